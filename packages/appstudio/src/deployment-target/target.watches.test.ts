import assert from 'node:assert/strict';
import { SpaceRequestLabel } from '@gitops/api';
import { describe, it } from 'vitest';
import {
  assertOwnEvents,
  claim,
  deleting,
  deploymentTargetClass,
  object,
  target,
  updated,
  useWatches,
} from '../testing/unit.ts';
import { type TargetWatchDeps, targetChanged, watchTargetSources } from './target.watches.ts';

describe('DeploymentTarget watches: which events wake which targets', () => {
  const watch = useWatches<TargetWatchDeps>(
    ['targets', 'claims', 'classes', 'spaceRequests'],
    { predicates: [targetChanged] },
    watchTargetSources,
  );

  it('the target: created, its spec, finalizers, deletion and a relist wake it; a phase write does not', async () => {
    await assertOwnEvents(watch, watch.sources.targets, target('t'), {
      ownWrite: { status: { phase: 'Available' } },
      changes: [
        (t) => updated(t, { metadata: { finalizers: ['dt.appstudio.redhat.com/finalizer'] } }),
        (t) => updated(t, { spec: { ...t.spec, claimRef: 'c' } }),
        deleting,
      ],
      removed: false,
    });
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
