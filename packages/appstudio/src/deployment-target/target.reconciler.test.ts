import assert from 'node:assert/strict';
import { DeploymentTargetMessage, ReclaimPolicy } from '@gitops/api';
import { describe, it } from 'vitest';
import type { Provisioner } from '../provisioners/provisioner.ts';
import { cacheOf, deploymentTargetClass, NS, noApiServer, quietLogger, target } from '../testing/unit.ts';
import { reclaimOf, reconcileTarget, type TargetReconcilerDeps, targetPass } from './target.reconciler.ts';

const provisioner = (name: string): Provisioner => ({
  name,
  provision: async () => undefined,
  deprovision: async () => ({ kind: 'gone' }),
});

const deps = (fields: Partial<TargetReconcilerDeps> = {}): TargetReconcilerDeps => ({
  kc: noApiServer(),
  now: () => new Date('2026-01-01T00:00:00Z'),
  targets: cacheOf(),
  classes: cacheOf(),
  provisioners: [],
  ...fields,
});

describe('reclaimer step reclaimOf: how a target is reclaimed', () => {
  it('no class; a policy other than Delete or Retain; else the policy and the provisioner this process runs', () => {
    const t = target('t');
    assert.deepEqual(reclaimOf(deps(), t), { kind: 'no-class' });
    const odd = deploymentTargetClass('class', { reclaimPolicy: 'Recycle' });
    assert.deepEqual(reclaimOf(deps({ classes: cacheOf(odd) }), t), { kind: 'invalid-policy' });
    const retain = deploymentTargetClass('class', { reclaimPolicy: ReclaimPolicy.Retain });
    assert.deepEqual(reclaimOf(deps({ classes: cacheOf(retain) }), t), {
      kind: 'policy',
      policy: ReclaimPolicy.Retain,
      deploymentTargetClass: retain,
      provisioner: undefined,
    });
    const mine = provisioner('example.com/provisioner');
    const del = deploymentTargetClass('class');
    const how = reclaimOf(deps({ classes: cacheOf(del), provisioners: [provisioner('other'), mine] }), t);
    assert.equal(how.kind === 'policy' && how.provisioner, mine);
  });
});

describe('reclaimer passes that write nothing', () => {
  it('a target no longer cached: nothing to do', async () => {
    assert.equal(await reconcileTarget(deps(), `${NS}/gone`, quietLogger), undefined);
  });

  it('a target being deleted whose policy is not Delete or Retain: the condition, no finalizer change', async () => {
    const deleting = target('t', {}, {}, { deletionTimestamp: '2026-01-01T00:00:00Z' });
    const odd = deploymentTargetClass('class', { reclaimPolicy: 'Recycle' });
    assert.deepEqual(await targetPass(deps({ classes: cacheOf(odd) }), deleting, quietLogger), {
      error: DeploymentTargetMessage.UnexpectedReclaimPolicy,
    });
  });
});
