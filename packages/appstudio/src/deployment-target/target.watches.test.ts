import assert from 'node:assert/strict';
import { SpaceRequestLabel } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { handInformer } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import type { ClaimCr, ClassCr, TargetCr } from '../objects.ts';
import {
  claim,
  deploymentTargetClass,
  object,
  target,
  updated,
  useWatches,
  wiredController,
} from '../testing/unit.ts';
import { targetChanged, watchTargetSources } from './target.watches.ts';

describe('DeploymentTarget watches: which events wake which targets', () => {
  const watch = useWatches(
    () => ({
      targets: handInformer<TargetCr>(),
      claims: handInformer<ClaimCr>(),
      classes: handInformer<ClassCr>(),
      spaceRequests: handInformer<KubeObject>(),
    }),
    (deps) =>
      wiredController(deps.targets, { predicates: [targetChanged] }, (b) => watchTargetSources(b, deps)),
  );

  it('the target: created, its spec, finalizers, deletion and a relist wake it; a phase write does not', async () => {
    const t = target('t');
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(t)), ['ns/t']);
    const phase = updated(t, { status: { phase: 'Available' } });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(phase)), []);
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(phase)), ['ns/t'], 'relist');
    const finalized = updated(phase, { metadata: { finalizers: ['dt.appstudio.redhat.com/finalizer'] } });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(finalized)), ['ns/t']);
    const claimed = updated(finalized, { spec: { ...finalized.spec, claimRef: 'c' } });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(claimed)), ['ns/t']);
    const deleting = updated(claimed, { metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(deleting)), ['ns/t']);
  });

  it('a class wakes its targets (any namespace), others none', async () => {
    watch.sources.targets.put(target('a'));
    watch.sources.targets.put(target('b', {}, {}, { namespace: 'other' }));
    watch.sources.targets.put(target('c', { deploymentTargetClassName: 'another' }));
    const cls = deploymentTargetClass('class');
    assert.deepEqual(await watch.wakes(() => watch.sources.classes.put(cls)), ['ns/a', 'other/b']);
    assert.deepEqual(
      await watch.wakes(() =>
        watch.sources.classes.put(updated(cls, { spec: { ...cls.spec, reclaimPolicy: 'Retain' } })),
      ),
      ['ns/a', 'other/b'],
    );
  });

  it('only a claim deleted wakes targets: the one it names and those claiming it', async () => {
    watch.sources.targets.put(target('named'));
    watch.sources.targets.put(target('claiming', { claimRef: 'c' }));
    watch.sources.targets.put(target('unrelated', { claimRef: 'other' }));
    const c = claim('c', { targetName: 'named' });
    assert.deepEqual(await watch.wakes(() => watch.sources.claims.put(c)), []);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.claims.put(updated(c, { status: { phase: 'Bound' } }))),
      [],
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.claims.remove(c)), ['ns/claiming', 'ns/named']);
  });

  it('a SpaceRequest wakes the target labelled on it and the targets claiming its claim', async () => {
    watch.sources.targets.put(target('c-dt', { claimRef: 'c' }));
    watch.sources.targets.put(target('labelled'));
    const byClaim = object('sr-1', {}, { labels: { [SpaceRequestLabel.Claim]: 'c' } });
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.put(byClaim)), ['ns/c-dt']);
    const both = object(
      'sr-2',
      {},
      {
        labels: { [SpaceRequestLabel.Claim]: 'c', [SpaceRequestLabel.Target]: 'labelled' },
      },
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.put(both)), [
      'ns/c-dt',
      'ns/labelled',
    ]);
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.remove(both)), [
      'ns/c-dt',
      'ns/labelled',
    ]);
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.put(object('sr-3'))), []);
  });
});
