import assert from 'node:assert/strict';
import { SPACE_REQUEST_TIER, SpaceRequestLabel } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { handInformer } from '@gitops/shared/testing';
import { afterEach, beforeEach, describe, it } from 'vitest';
import type { ClaimCr, ClassCr, TargetCr } from '../objects.ts';
import { claim, NS, object, target, updated, wiredController } from '../testing/unit.ts';
import {
  spaceRequestsByLabel,
  targetKeysOfSpaceRequest,
  watchDevSandboxSources,
} from './devsandbox.watches.ts';

const spaceRequest = (name: string, labels: Record<string, string>, tierName = SPACE_REQUEST_TIER) =>
  object(name, { spec: { tierName } }, { labels });

describe('devsandbox watches: which events wake which SpaceRequests', () => {
  let sources: ReturnType<typeof informers>;
  let controller: ReturnType<typeof wiredController>;
  const informers = () => ({
    spaceRequests: handInformer<KubeObject>(),
    claims: handInformer<ClaimCr>(),
    targets: handInformer<TargetCr>(),
    classes: handInformer<ClassCr>(),
  });
  beforeEach(() => {
    sources = informers();
    const deps = {
      spaceRequests: sources.spaceRequests.informer,
      claims: sources.claims.informer,
      targets: sources.targets.informer,
      classes: sources.classes.informer,
    };
    controller = wiredController(deps.spaceRequests, {}, (b) => watchDevSandboxSources(b, deps));
  });
  afterEach(() => controller.stop());

  it('a SpaceRequest wakes itself at every event (its status: Ready, namespace access)', async () => {
    const sr = spaceRequest('sr', { [SpaceRequestLabel.Claim]: 'c' });
    assert.deepEqual(await controller.wakes(() => sources.spaceRequests.put(sr)), ['ns/sr']);
    const ready = updated(sr, { status: { conditions: [{ type: 'Ready', status: 'True' }] } });
    assert.deepEqual(await controller.wakes(() => sources.spaceRequests.put(ready)), ['ns/sr']);
    assert.deepEqual(await controller.wakes(() => sources.spaceRequests.remove(ready)), ['ns/sr']);
  });

  it('only a claim deleted wakes the SpaceRequests labelled with it (an orphan now)', async () => {
    sources.spaceRequests.put(spaceRequest('sr-1', { [SpaceRequestLabel.Claim]: 'c' }));
    sources.spaceRequests.put(spaceRequest('sr-2', { [SpaceRequestLabel.Claim]: 'other' }));
    const c = claim('c');
    assert.deepEqual(await controller.wakes(() => sources.claims.put(c)), []);
    assert.deepEqual(
      await controller.wakes(() => sources.claims.put(updated(c, { status: { phase: 'Pending' } }))),
      [],
    );
    assert.deepEqual(await controller.wakes(() => sources.claims.remove(c)), ['ns/sr-1']);
  });

  it("targets and classes only feed the reconcile's reads: they wake nothing", async () => {
    sources.spaceRequests.put(spaceRequest('sr', { [SpaceRequestLabel.Claim]: 'c' }));
    assert.deepEqual(
      await controller.wakes(() => sources.targets.put(target('c-dt', { claimRef: 'c' }))),
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
