import assert from 'node:assert/strict';
import { DeploymentTargetAnnotation } from '@gitops/api';
import { handInformer } from '@gitops/shared/testing';
import { afterEach, beforeEach, describe, it } from 'vitest';
import type { ClaimCr, ClassCr, EnvironmentCr, TargetCr } from '../objects.ts';
import {
  claim,
  deploymentTargetClass,
  environment,
  target,
  updated,
  wiredController,
} from '../testing/unit.ts';
import { claimChanged, watchClaimSources } from './claim.watches.ts';

const provisioning = (name: string, className: string) =>
  claim(
    name,
    { deploymentTargetClassName: className },
    {},
    {
      annotations: { [DeploymentTargetAnnotation.DTProvisioner]: className },
    },
  );
const bindComplete = { annotations: { [DeploymentTargetAnnotation.BindComplete]: 'true' } };

describe('DeploymentTargetClaim watches: which events wake which claims', () => {
  let sources: ReturnType<typeof informers>;
  let controller: ReturnType<typeof wiredController>;
  const informers = () => ({
    claims: handInformer<ClaimCr>(),
    targets: handInformer<TargetCr>(),
    classes: handInformer<ClassCr>(),
    environments: handInformer<EnvironmentCr>(),
  });
  beforeEach(() => {
    sources = informers();
    const deps = {
      claims: sources.claims.informer,
      targets: sources.targets.informer,
      classes: sources.classes.informer,
      environments: sources.environments.informer,
    };
    controller = wiredController(deps.claims, { predicates: [claimChanged] }, (b) =>
      watchClaimSources(b, deps),
    );
  });
  afterEach(() => controller.stop());

  it('the claim: created, its spec, annotations, finalizers, deletion and a relist wake it; a status write does not', async () => {
    const c = claim('c');
    assert.deepEqual(await controller.wakes(() => sources.claims.put(c)), ['ns/c']);
    const phase = updated(c, { status: { phase: 'Pending' } });
    assert.deepEqual(await controller.wakes(() => sources.claims.put(phase)), []);
    assert.deepEqual(await controller.wakes(() => sources.claims.put(phase)), ['ns/c'], 'relist');
    const annotated = updated(phase, { metadata: bindComplete });
    assert.deepEqual(await controller.wakes(() => sources.claims.put(annotated)), ['ns/c']);
    const finalized = updated(annotated, {
      metadata: { finalizers: ['binder.appstudio.redhat.com/finalizer'] },
    });
    assert.deepEqual(await controller.wakes(() => sources.claims.put(finalized)), ['ns/c']);
    const deleting = updated(finalized, { metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } });
    assert.deepEqual(await controller.wakes(() => sources.claims.put(deleting)), ['ns/c']);
    assert.deepEqual(await controller.wakes(() => sources.claims.remove(deleting)), ['ns/c']);
  });

  it('a target wakes the claims linked to it and the waiting claims of its namespace, not bound or named ones', async () => {
    sources.claims.put(claim('referenced', { targetName: 'other' }));
    sources.claims.put(claim('naming', { targetName: 't' }));
    sources.claims.put(claim('waiting'));
    sources.claims.put(claim('bound', {}, { phase: 'Bound' }, bindComplete));
    sources.claims.put(claim('elsewhere', {}, {}, { namespace: 'other-ns' }));
    const t = target('t', { claimRef: 'referenced' });
    const expected = ['ns/naming', 'ns/referenced', 'ns/waiting'];
    assert.deepEqual(await controller.wakes(() => sources.targets.put(t)), expected);
    assert.deepEqual(
      await controller.wakes(() => sources.targets.put(updated(t, { status: { phase: 'Bound' } }))),
      expected,
    );
    assert.deepEqual(await controller.wakes(() => sources.targets.remove(t)), expected);
  });

  it('a class wakes only its claims that asked for provisioning', async () => {
    sources.claims.put(provisioning('asked', 'sandbox'));
    sources.claims.put(claim('not-asked', { deploymentTargetClassName: 'sandbox' }));
    sources.claims.put(provisioning('other-class', 'other'));
    const cls = deploymentTargetClass('sandbox');
    assert.deepEqual(await controller.wakes(() => sources.classes.put(cls)), ['ns/asked']);
    assert.deepEqual(await controller.wakes(() => sources.classes.remove(cls)), ['ns/asked']);
  });

  it('an Environment wakes the claim it names, whether or not the claim exists; one without a claim wakes none', async () => {
    const env = environment('dev', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'c' } } },
    });
    assert.deepEqual(await controller.wakes(() => sources.environments.put(env)), ['ns/c']);
    assert.deepEqual(await controller.wakes(() => sources.environments.remove(env)), ['ns/c']);
    assert.deepEqual(await controller.wakes(() => sources.environments.put(environment('plain'))), []);
  });
});
