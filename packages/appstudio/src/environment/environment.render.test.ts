import assert from 'node:assert/strict';
import {
  AppStudioKinds,
  AppStudioLabel,
  EnvironmentMessage,
  EnvironmentReason,
  EnvironmentTargetMessage,
} from '@gitops/api';
import { describe, it } from 'vitest';
import type { ClaimCr, TargetCr } from '../objects.ts';
import {
  boundClaim,
  CREDENTIALS,
  cacheOf,
  claim,
  claimedEnvironment,
  credentialsEnvironment,
  environment,
  object,
  ownerRefTo,
  target,
} from '../testing/unit.ts';
import {
  desiredOf,
  isSecretCopyOf,
  type ManagedEnvironmentSpec,
  managedEnvironmentAction,
} from './environment.render.ts';

/** The caches `desiredOf` reads, holding `claims` and `targets`. */
const caches = (claims: ClaimCr[] = [], targets: TargetCr[] = []) => ({
  claims: cacheOf(...claims),
  targets: cacheOf(...targets),
});

describe('Environment step desiredOf: what the Environment asks for', () => {
  it('a claim and CREDENTIALS both: InvalidEnvironment', () => {
    const env = environment('dev', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'c' } } },
      unstableConfigurationFields: { kubernetesCredentials: CREDENTIALS },
    });
    assert.deepEqual(desiredOf(caches(), env), {
      kind: 'error',
      reason: EnvironmentReason.InvalidEnvironment,
      message: EnvironmentMessage.BothTargets,
    });
  });

  it('a claim that does not exist: DeploymentTargetClaimNotFound, looked at again in 30 s', () => {
    assert.deepEqual(desiredOf(caches(), claimedEnvironment('dev', 'c')), {
      kind: 'error',
      reason: EnvironmentReason.DeploymentTargetClaimNotFound,
      message: EnvironmentMessage.ClaimNotFound,
      requeueAfter: 30_000,
    });
  });

  it('a claim not Bound: wait, without a condition', () => {
    assert.deepEqual(desiredOf(caches([claim('c')]), claimedEnvironment('dev', 'c')), { kind: 'wait' });
  });

  it('a Bound claim whose target is missing: DeploymentTargetNotFound', () => {
    const desired = desiredOf(caches([boundClaim('c', 't')]), claimedEnvironment('dev', 'c'));
    assert.deepEqual(desired, {
      kind: 'error',
      reason: EnvironmentReason.DeploymentTargetNotFound,
      message: EnvironmentTargetMessage.Missing,
    });
  });

  it("a Bound claim: the target's cluster, its default namespace, no cluster resources, via the claim", () => {
    const t = target('t', { claimRef: 'c' }, { phase: 'Bound' });
    const desired = desiredOf(caches([boundClaim('c', 't')], [t]), claimedEnvironment('dev', 'c'));
    assert.deepEqual(desired, {
      kind: 'cluster',
      viaClaim: true,
      spec: {
        apiURL: 'https://cluster.example:6443',
        credentialsSecret: 't-secret',
        allowInsecureSkipTLSVerify: false,
        namespaces: ['t-ns'],
        clusterResources: false,
      },
    });
  });

  it('credentials: that cluster (namespaces only when given); neither: none', () => {
    assert.deepEqual(desiredOf(caches(), credentialsEnvironment('dev', { namespaces: ['a'] })), {
      kind: 'cluster',
      spec: {
        apiURL: 'https://c.example',
        credentialsSecret: 'creds',
        allowInsecureSkipTLSVerify: false,
        namespaces: ['a'],
        clusterResources: false,
      },
    });
    const plain = desiredOf(caches(), credentialsEnvironment('dev'));
    assert.equal(plain.kind === 'cluster' && 'namespaces' in plain.spec, false);
    assert.deepEqual(desiredOf(caches(), environment('dev')), { kind: 'none' });
  });
});

describe('Environment step managedEnvironmentAction: apply, leave, or nothing to do', () => {
  const env = credentialsEnvironment('dev');
  const spec: ManagedEnvironmentSpec = {
    apiURL: 'https://c.example',
    credentialsSecret: 'creds',
    allowInsecureSkipTLSVerify: false,
    clusterResources: false,
  };
  const me = (fields: Record<string, unknown>, refs: unknown[]) =>
    object('managed-environment-dev', fields, { ownerReferences: refs as never });

  it('applies when missing or different; nothing when ours and equal (absent and empty alike)', () => {
    assert.equal(managedEnvironmentAction(undefined, env, spec), 'apply');
    const same = me({ spec: { ...spec, namespaces: [] } }, [ownerRefTo(AppStudioKinds.Environment, env)]);
    assert.equal(managedEnvironmentAction(same, env, spec), 'unchanged');
    const other = me({ spec: { ...spec, apiURL: 'https://d.example' } }, [
      ownerRefTo(AppStudioKinds.Environment, env),
    ]);
    assert.equal(managedEnvironmentAction(other, env, spec), 'apply');
    const noOwner = me({ spec }, []);
    assert.equal(managedEnvironmentAction(noOwner, env, spec), 'apply');
  });

  it("leaves one another object controls ('foreign')", () => {
    const foreign = me({ spec }, [
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'u', controller: true },
    ]);
    assert.equal(managedEnvironmentAction(foreign, env, spec), 'foreign');
  });
});

describe('Environment step isSecretCopyOf', () => {
  it("is true only for the same data labelled with the Environment's name", () => {
    const env = environment('dev');
    const data = { kubeconfig: 'a2M=' };
    const copy = object('s', { data }, { labels: { [AppStudioLabel.EnvironmentSecret]: 'dev' } });
    assert.equal(isSecretCopyOf(copy, env, data), true);
    assert.equal(isSecretCopyOf(copy, env, { kubeconfig: 'b3RoZXI=' }), false);
    assert.equal(isSecretCopyOf(object('s', { data }), env, data), false);
    assert.equal(isSecretCopyOf(undefined, env, data), false);
  });
});
