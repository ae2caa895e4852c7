import assert from 'node:assert/strict';
import { BindingMessage } from '@gitops/api';
import { describe, it } from 'vitest';
import type { ClaimCr, TargetCr } from '../objects.ts';
import {
  binding,
  boundClaim,
  cacheOf,
  claimedEnvironment,
  credentialsEnvironment,
  environment,
  quietLogger,
  target,
} from '../testing/unit.ts';
import { desiredDeployments, destinationOf, type Pass } from './binding.reconciler.ts';

describe('binding step destinationOf: where the deployments go', () => {
  it("an Environment with neither claim nor credentials: the service's default destination", () => {
    assert.deepEqual(
      destinationOf({ claims: cacheOf<ClaimCr>(), targets: cacheOf<TargetCr>() }, environment('dev')),
      {},
    );
  });

  it("credentials: the Environment's ManagedEnvironment and its target namespace, which must be given", () => {
    const deps = { claims: cacheOf<ClaimCr>(), targets: cacheOf<TargetCr>() };
    assert.deepEqual(destinationOf(deps, credentialsEnvironment('dev')), {
      environment: 'managed-environment-dev',
      namespace: 'apps',
    });
    assert.equal(
      destinationOf(deps, credentialsEnvironment('dev', { targetNamespace: '' })),
      BindingMessage.MissingTargetNamespace,
    );
  });

  it("a claim: the bound target's default namespace; a missing claim or target is the user's error", () => {
    const t = target('t', { claimRef: 'c' }, { phase: 'Bound' });
    const env = claimedEnvironment('dev', 'c');
    assert.deepEqual(destinationOf({ claims: cacheOf(boundClaim('c', 't')), targets: cacheOf(t) }, env), {
      environment: 'managed-environment-dev',
      namespace: 't-ns',
    });
    assert.equal(
      destinationOf({ claims: cacheOf<ClaimCr>(), targets: cacheOf<TargetCr>() }, env),
      BindingMessage.ClaimNotFound,
    );
    assert.equal(
      destinationOf({ claims: cacheOf(boundClaim('c', 't')), targets: cacheOf<TargetCr>() }, env),
      BindingMessage.DeploymentTargetNotFound,
    );
  });
});

describe('binding step desiredDeployments', () => {
  const pass = (application: string): Pass => {
    const b = binding('b', { application });
    return {
      binding: b,
      namespace: 'ns',
      application,
      environment: 'dev',
      status: {},
      now: new Date('2026-01-01T00:00:00Z'),
      conditions: [],
      logger: quietLogger,
    };
  };
  const deps = { claims: cacheOf<ClaimCr>(), targets: cacheOf<TargetCr>(), shardLabels: {} };
  const component = (name: string) => ({
    name,
    url: 'https://git.example/r',
    branch: 'main',
    path: `components/${name}`,
    commitID: '',
  });

  it('one deployment per component, in component order', () => {
    const desired = desiredDeployments(deps, pass('app'), environment('dev'), [
      component('web'),
      component('api'),
    ]);
    assert.ok(typeof desired !== 'string');
    assert.deepEqual(
      desired.map((d) => [d.component.name, d.desired.metadata.name]),
      [
        ['api', 'b-app-dev-api'],
        ['web', 'b-app-dev-web'],
      ],
    );
  });

  it('a value that cannot be a label value is the user-facing error, nothing generated', () => {
    const name = 'a'.repeat(64);
    assert.equal(
      desiredDeployments(deps, pass(name), environment('dev'), [component('web')]),
      BindingMessage.invalidLabelValue('spec.application', name),
    );
  });
});
