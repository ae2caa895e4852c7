import assert from 'node:assert/strict';
import {
  AppStudioKinds,
  AppStudioLabel,
  EnvironmentMessage,
  EnvironmentReason,
  EnvironmentTargetMessage,
  SecretType,
} from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { describe, it } from 'vitest';
import type { ClaimCr, EnvironmentCr, TargetCr } from '../objects.ts';
import {
  cacheOf,
  claim,
  environment,
  NS,
  noApiServer,
  object,
  quietLogger,
  recordedEvents,
  target,
} from '../testing/unit.ts';
import {
  desiredOf,
  type EnvironmentReconcilerDeps,
  isSecretCopyOf,
  type ManagedEnvironmentSpec,
  managedEnvironmentAction,
  reconcileEnvironment,
} from './environment.reconciler.ts';

const claimed = (name: string, claimName: string) =>
  environment(name, { configuration: { target: { deploymentTargetClaim: { claimName } } } });
const credentials = {
  targetNamespace: 'apps',
  apiURL: 'https://c.example',
  clusterCredentialsSecret: 'creds',
  allowInsecureSkipTLSVerify: false,
};
const direct = (name: string, extra: Partial<typeof credentials> & { namespaces?: string[] } = {}) =>
  environment(name, { unstableConfigurationFields: { kubernetesCredentials: { ...credentials, ...extra } } });
const bound = (name: string, targetName: string) =>
  claim(
    name,
    { targetName },
    { phase: 'Bound' },
    { annotations: { 'dt.appstudio.redhat.com/bind-complete': 'true' } },
  );
const controllerRef = (env: KubeObject) => ({
  apiVersion: AppStudioKinds.Environment.apiVersion,
  kind: 'Environment',
  name: env.metadata.name,
  uid: env.metadata.uid ?? '',
  controller: true,
});

function deps(
  caches: Partial<Pick<EnvironmentReconcilerDeps, 'environments' | 'managedEnvironments' | 'secrets'>> & {
    claims?: ClaimCr[];
    targets?: TargetCr[];
  } = {},
) {
  const recorded = recordedEvents();
  const d: EnvironmentReconcilerDeps = {
    kc: noApiServer(),
    events: recorded.recorder,
    now: () => new Date('2026-01-01T00:00:00Z'),
    shardLabels: {},
    environments: caches.environments ?? cacheOf<EnvironmentCr>(),
    managedEnvironments: caches.managedEnvironments ?? cacheOf(),
    secrets: caches.secrets ?? cacheOf(),
    opaqueSecrets: cacheOf(),
    claims: cacheOf(...(caches.claims ?? [])),
    targets: cacheOf(...(caches.targets ?? [])),
  };
  return { deps: d, events: recorded.events };
}

describe('Environment step desiredOf: what the Environment asks for', () => {
  it('a claim and credentials both: InvalidEnvironment', () => {
    const env = environment('dev', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'c' } } },
      unstableConfigurationFields: { kubernetesCredentials: credentials },
    });
    assert.deepEqual(desiredOf(deps().deps, env), {
      kind: 'error',
      reason: EnvironmentReason.InvalidEnvironment,
      message: EnvironmentMessage.BothTargets,
    });
  });

  it('a claim that does not exist: DeploymentTargetClaimNotFound, looked at again in 30 s', () => {
    assert.deepEqual(desiredOf(deps().deps, claimed('dev', 'c')), {
      kind: 'error',
      reason: EnvironmentReason.DeploymentTargetClaimNotFound,
      message: EnvironmentMessage.ClaimNotFound,
      requeueAfter: 30_000,
    });
  });

  it('a claim not Bound: wait, without a condition', () => {
    assert.deepEqual(desiredOf(deps({ claims: [claim('c')] }).deps, claimed('dev', 'c')), { kind: 'wait' });
  });

  it('a Bound claim whose target is missing: DeploymentTargetNotFound', () => {
    const desired = desiredOf(deps({ claims: [bound('c', 't')] }).deps, claimed('dev', 'c'));
    assert.deepEqual(desired, {
      kind: 'error',
      reason: EnvironmentReason.DeploymentTargetNotFound,
      message: EnvironmentTargetMessage.Missing,
    });
  });

  it("a Bound claim: the target's cluster, its default namespace, no cluster resources, via the claim", () => {
    const t = target('t', { claimRef: 'c' }, { phase: 'Bound' });
    const desired = desiredOf(deps({ claims: [bound('c', 't')], targets: [t] }).deps, claimed('dev', 'c'));
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
    assert.deepEqual(desiredOf(deps().deps, direct('dev', { namespaces: ['a'] })), {
      kind: 'cluster',
      spec: {
        apiURL: 'https://c.example',
        credentialsSecret: 'creds',
        allowInsecureSkipTLSVerify: false,
        namespaces: ['a'],
        clusterResources: false,
      },
    });
    const plain = desiredOf(deps().deps, direct('dev'));
    assert.equal(plain.kind === 'cluster' && 'namespaces' in plain.spec, false);
    assert.deepEqual(desiredOf(deps().deps, environment('dev')), { kind: 'none' });
  });
});

describe('Environment step managedEnvironmentAction: apply, leave, or nothing to do', () => {
  const env = direct('dev');
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
    const same = me({ spec: { ...spec, namespaces: [] } }, [controllerRef(env)]);
    assert.equal(managedEnvironmentAction(same, env, spec), 'unchanged');
    const other = me({ spec: { ...spec, apiURL: 'https://d.example' } }, [controllerRef(env)]);
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

describe('Environment reconcile, passes that write nothing', () => {
  it('an Environment gone, with no ManagedEnvironment of its own: nothing to do', async () => {
    const notOurs = object('managed-environment-dev', {}, { ownerReferences: [] });
    const { deps: d, events } = deps({ managedEnvironments: cacheOf(notOurs) });
    assert.equal(await reconcileEnvironment(d, `${NS}/dev`, quietLogger), undefined);
    assert.deepEqual(events, []);
  });

  it('a claim not Bound yet: waits for its events', async () => {
    const { deps: d, events } = deps({ environments: cacheOf(claimed('dev', 'c')), claims: [claim('c')] });
    assert.equal(await reconcileEnvironment(d, `${NS}/dev`, quietLogger), undefined);
    assert.deepEqual(events, []);
  });

  it('its ManagedEnvironment up to date and no conditions: nothing written, no Event', async () => {
    const env = direct('dev');
    const me = object(
      'managed-environment-dev',
      { spec: { apiURL: 'https://c.example', credentialsSecret: 'creds' } },
      { ownerReferences: [controllerRef(env)] },
    );
    const secret = object('creds', { type: SecretType.ManagedEnvironment });
    const { deps: d, events } = deps({
      environments: cacheOf(env),
      managedEnvironments: cacheOf(me),
      secrets: cacheOf(secret),
    });
    assert.equal(await reconcileEnvironment(d, `${NS}/dev`, quietLogger), undefined);
    assert.deepEqual(events, []);
  });
});
