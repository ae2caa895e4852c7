import assert from 'node:assert/strict';
import { SPACE_REQUEST_TIER, SpaceRequestLabel } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { handInformer } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import type { TargetCr } from '../objects.ts';
import { claim, NS, object, target, updated, useWatches } from '../testing/unit.ts';
import {
  type DevSandboxWatchDeps,
  spaceRequestsByLabel,
  targetKeysOfSpaceRequest,
  watchDevSandboxSources,
} from './devsandbox.watches.ts';

const spaceRequest = (name: string, labels: Record<string, string>, tierName = SPACE_REQUEST_TIER) =>
  object(name, { spec: { tierName } }, { labels });

describe('devsandbox watches: which events wake which SpaceRequests', () => {
  const watch = useWatches<DevSandboxWatchDeps>(
    ['spaceRequests', 'claims', 'targets', 'classes'],
    {},
    watchDevSandboxSources,
  );

  it('a SpaceRequest wakes itself at every event (its status: Ready, namespace access)', async () => {
    const sr = spaceRequest('sr', { [SpaceRequestLabel.Claim]: 'c' });
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.put(sr)), ['ns/sr']);
    const ready = updated(sr, { status: { conditions: [{ type: 'Ready', status: 'True' }] } });
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.put(ready)), ['ns/sr']);
    assert.deepEqual(await watch.wakes(() => watch.sources.spaceRequests.remove(ready)), ['ns/sr']);
  });

  it('only a claim deleted wakes the SpaceRequests labelled with it (an orphan now)', async () => {
    watch.sources.spaceRequests.put(spaceRequest('sr-1', { [SpaceRequestLabel.Claim]: 'c' }));
    watch.sources.spaceRequests.put(spaceRequest('sr-2', { [SpaceRequestLabel.Claim]: 'other' }));
    const c = claim('c');
    assert.deepEqual(await watch.wakes(() => watch.sources.claims.put(c)), []);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.claims.put(updated(c, { status: { phase: 'Pending' } }))),
      [],
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.claims.remove(c)), ['ns/sr-1']);
  });

  it("targets and classes only feed the reconcile's reads: they wake nothing", async () => {
    watch.sources.spaceRequests.put(spaceRequest('sr', { [SpaceRequestLabel.Claim]: 'c' }));
    assert.deepEqual(
      await watch.wakes(() => watch.sources.targets.put(target('c-dt', { claimRef: 'c' }))),
      [],
    );
  });
});

describe('devsandbox lookups', () => {
  it('spaceRequestsByLabel: by claim or target label, only of the appstudio-env tier', () => {
    const srs = handInformer<KubeObject>();
    const of = spaceRequestsByLabel(srs.informer);
    srs.put(spaceRequest('mine', { [SpaceRequestLabel.Claim]: 'c', [SpaceRequestLabel.Target]: 'c-dt' }));
    srs.put(spaceRequest('other-tier', { [SpaceRequestLabel.Claim]: 'c' }, 'base'));
    assert.deepEqual(
      of(NS, SpaceRequestLabel.Claim, 'c').map((o) => o.metadata.name),
      ['mine'],
    );
    assert.deepEqual(
      of(NS, SpaceRequestLabel.Target, 'c-dt').map((o) => o.metadata.name),
      ['mine'],
    );
  });

  it('targetKeysOfSpaceRequest: the labelled target once, and the targets claiming its claim', () => {
    const targets = handInformer<TargetCr>();
    targets.put(target('c-dt', { claimRef: 'c' }));
    const sr = spaceRequest('sr', { [SpaceRequestLabel.Claim]: 'c', [SpaceRequestLabel.Target]: 'c-dt' });
    assert.deepEqual(targetKeysOfSpaceRequest(sr, targets.informer), ['ns/c-dt']);
    assert.deepEqual(targetKeysOfSpaceRequest(spaceRequest('x', {}), targets.informer), []);
  });
});
