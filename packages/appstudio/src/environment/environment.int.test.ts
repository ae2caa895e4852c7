/**
 * Environment → ManagedEnvironment against the real API server: the reference's Environment scenarios
 * (controller unit tests and the Environment e2e suite), with the design's fixes named where they change the
 * outcome. The features run alone; the test is the user.
 */
import assert from 'node:assert/strict';
import { LEGACY_ENVIRONMENT_OWNER_API_VERSION, SecretType } from '@gitops/api';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type AppStudioFixture,
  conditionsOf,
  createAppStudioFixture,
  errorPair,
  Kind,
  specOf,
} from '../testing/appstudio-fixture.ts';

const f: AppStudioFixture = createAppStudioFixture();
let ns: string;

const credentials = (fields: Record<string, unknown> = {}) => ({
  targetNamespace: 'target-ns',
  apiURL: 'https://api.cluster.example:6443',
  clusterCredentialsSecret: 'cluster-secret',
  allowInsecureSkipTLSVerify: true,
  ...fields,
});
const environment = (name: string, spec: Record<string, unknown> = {}) =>
  f.create(Kind.Environment, ns, name, {
    spec: { displayName: '', deploymentStrategy: 'AppStudioAutomated', ...spec },
  });
const managedEnvironment = (env: string) =>
  f.get(Kind.GitOpsDeploymentManagedEnvironment, ns, `managed-environment-${env}`);
const secret = (name: string, type: string = SecretType.ManagedEnvironment) =>
  f.create(Kind.Secret, ns, name, { type, stringData: { kubeconfig: 'not-a-real-kubeconfig' } });

beforeAll(async () => {
  ns = await f.createNamespace('appstudio-env');
  await secret('cluster-secret');
  await f.start();
});
afterAll(() => f.cleanup());

describe('Environment controller: credentials and Secrets', () => {
  it('an Environment with cluster credentials gets managed-environment-<env> with the same fields, owned by it, and no conditions', async () => {
    const env = await environment('staging', {
      unstableConfigurationFields: {
        kubernetesCredentials: credentials({ namespaces: ['ns-1', 'ns-2'], clusterResources: true }),
      },
    });
    const me = await eventually('the ManagedEnvironment', () => managedEnvironment('staging'));
    assert.deepEqual(specOf(me), {
      apiURL: 'https://api.cluster.example:6443',
      credentialsSecret: 'cluster-secret',
      allowInsecureSkipTLSVerify: true,
      namespaces: ['ns-1', 'ns-2'],
      clusterResources: true,
    });
    assert.deepEqual(me.metadata.ownerReferences, [
      {
        apiVersion: 'appstudio.redhat.com/v1alpha1',
        kind: 'Environment',
        name: 'staging',
        uid: env.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(
      me.metadata.labels?.['managed-gitops.redhat.com/backend-shard'],
      f.shard,
      'served by the same shard',
    );
    const events = await eventually('the Event', async () => {
      const list = await f.events(ns, 'staging');
      return list.some((e) => e.reason === 'ManagedEnvironmentCreated') ? list : undefined;
    });
    // Checked once the reconcile that created the ManagedEnvironment has gone on to record its Event.
    assert.deepEqual(conditionsOf(await f.get(Kind.Environment, ns, 'staging')), []);
    assert.ok(events.every((e) => !e.message.includes('not-a-real-kubeconfig')));
  });

  it('edits of insecure flag, namespaces and clusterResources are copied; removing namespaces removes them', async () => {
    await environment('edited', {
      unstableConfigurationFields: { kubernetesCredentials: credentials({ namespaces: ['ns1', 'ns2'] }) },
    });
    await eventually('the ManagedEnvironment', () => managedEnvironment('edited'));
    await f.patch(Kind.Environment, ns, 'edited', {
      spec: {
        unstableConfigurationFields: {
          kubernetesCredentials: {
            allowInsecureSkipTLSVerify: false,
            namespaces: ['ns1', 'ns2', 'ns3'],
            clusterResources: true,
          },
        },
      },
    });
    await eventually('the edit copied', async () => {
      const spec = specOf(await managedEnvironment('edited'));
      return (
        spec.allowInsecureSkipTLSVerify === false &&
        JSON.stringify(spec.namespaces) === '["ns1","ns2","ns3"]' &&
        spec.clusterResources === true
      );
    });
    await f.patch(Kind.Environment, ns, 'edited', {
      spec: {
        unstableConfigurationFields: { kubernetesCredentials: { namespaces: null, clusterResources: false } },
      },
    });
    await eventually('namespaces removed', async () => {
      const spec = specOf(await managedEnvironment('edited'));
      return spec.namespaces === undefined && spec.clusterResources === false;
    });
    assert.deepEqual(conditionsOf(await f.get(Kind.Environment, ns, 'edited')), []);
  });

  it('a pre-existing managed-environment-<env> with a stale spec is overwritten', async () => {
    await f.create(Kind.GitOpsDeploymentManagedEnvironment, ns, 'managed-environment-stale', {
      spec: {
        apiURL: 'https://old.example',
        credentialsSecret: 'old-secret',
        allowInsecureSkipTLSVerify: false,
      },
    });
    await environment('stale', { unstableConfigurationFields: { kubernetesCredentials: credentials() } });
    const me = await eventually('the spec overwritten', async () => {
      const m = await managedEnvironment('stale');
      return specOf(m).apiURL === 'https://api.cluster.example:6443' ? m : undefined;
    });
    assert.equal(specOf(me).credentialsSecret, 'cluster-secret');
    assert.equal(specOf(me).allowInsecureSkipTLSVerify, true);
  });

  it('a missing Secret is SecretNotFound; fixing it resolves both conditions with <reason>Resolved', async () => {
    await environment('no-secret', {
      unstableConfigurationFields: {
        kubernetesCredentials: credentials({ clusterCredentialsSecret: 'secret-that-doesnt-exist' }),
      },
    });
    const message =
      'the secret secret-that-doesnt-exist referenced by the Environment resource was not found';
    const failed = await f.conditionsOnceSet('SecretNotFound', Kind.Environment, ns, 'no-secret');
    assert.deepEqual(failed, errorPair('SecretNotFound', message));
    assert.equal(await managedEnvironment('no-secret'), undefined);
    await secret('new-secret');
    await f.patch(Kind.Environment, ns, 'no-secret', {
      spec: {
        unstableConfigurationFields: { kubernetesCredentials: { clusterCredentialsSecret: 'new-secret' } },
      },
    });
    const fixed = await eventually('resolved', async () => {
      const c = conditionsOf(await f.get(Kind.Environment, ns, 'no-secret'));
      return c[0]?.status === 'False' ? c : undefined;
    });
    assert.deepEqual(fixed, [
      { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurredResolved', message: '' },
      { type: 'Reconciled', status: 'True', reason: 'SecretNotFoundResolved', message: '' },
    ]);
    await eventually('the ManagedEnvironment', () => managedEnvironment('no-secret'));
  });

  it('a Secret created after the Environment is picked up without editing the Environment', async () => {
    await environment('late-secret', {
      unstableConfigurationFields: {
        kubernetesCredentials: credentials({ clusterCredentialsSecret: 'late-secret' }),
      },
    });
    await eventually(
      'SecretNotFound',
      async () => conditionsOf(await f.get(Kind.Environment, ns, 'late-secret'))[0]?.status === 'True',
    );
    await secret('late-secret');
    await eventually('the ManagedEnvironment', () => managedEnvironment('late-secret'));
  });
});

describe('Environment controller: invalid targets and ownership', () => {
  it('both a DeploymentTargetClaim and credentials is InvalidEnvironment', async () => {
    await environment('both', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'testdtc' } } },
      unstableConfigurationFields: { kubernetesCredentials: credentials({ apiURL: 'https://abc' }) },
    });
    const message =
      'Environment is invalid since it cannot have both DeploymentTargetClaim and credentials configuration set';
    const c = await f.conditionsOnceSet('InvalidEnvironment', Kind.Environment, ns, 'both');
    assert.deepEqual(c, errorPair('InvalidEnvironment', message));
    assert.equal(await managedEnvironment('both'), undefined);
  });

  it("an apiURL a ManagedEnvironment refuses is InvalidEnvironment with the API server's reason (fix: the original retried silently)", async () => {
    await environment('bad-url', {
      unstableConfigurationFields: {
        kubernetesCredentials: credentials({ apiURL: 'https://exa mple.com:6443' }),
      },
    });
    const message =
      'the ManagedEnvironment managed-environment-bad-url cannot be generated from this Environment: GitOpsDeploymentManagedEnvironment.managed-gitops.redhat.com "managed-environment-bad-url" is invalid: spec.apiURL: Invalid value: "https://exa mple.com:6443": cluster api url must start with https://';
    const c = await f.conditionsOnceSet('InvalidEnvironment', Kind.Environment, ns, 'bad-url');
    assert.deepEqual(c, errorPair('InvalidEnvironment', message));
  });

  it('a claim that does not exist is DeploymentTargetClaimNotFound', async () => {
    await environment('claimed', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'test' } } },
    });
    const message = 'DeploymentTargetClaim not found while generating the desired Environment resource';
    const c = await f.conditionsOnceSet('DeploymentTargetClaimNotFound', Kind.Environment, ns, 'claimed');
    assert.deepEqual(c, errorPair('DeploymentTargetClaimNotFound', message));
  });

  it('an Environment without a target gets no ManagedEnvironment; one that stops targeting a cluster loses it (fix: the original kept it)', async () => {
    await environment('local');
    await environment('was-remote', {
      unstableConfigurationFields: { kubernetesCredentials: credentials() },
    });
    await eventually('the ManagedEnvironment', () => managedEnvironment('was-remote'));
    await f.patch(Kind.Environment, ns, 'was-remote', { spec: { unstableConfigurationFields: null } });
    await eventually(
      'the ManagedEnvironment deleted',
      async () => (await managedEnvironment('was-remote')) === undefined,
    );
    assert.equal(await managedEnvironment('local'), undefined);
  });

  it('deleting the Environment deletes its ManagedEnvironment', async () => {
    await environment('short-lived', {
      unstableConfigurationFields: { kubernetesCredentials: credentials() },
    });
    await eventually('the ManagedEnvironment', () => managedEnvironment('short-lived'));
    await f.remove(Kind.Environment, ns, 'short-lived');
    await eventually(
      'the ManagedEnvironment deleted',
      async () => (await managedEnvironment('short-lived')) === undefined,
    );
  });

  it('a ManagedEnvironment owned in the legacy form by an Environment that does not exist is deleted', async () => {
    await f.create(Kind.GitOpsDeploymentManagedEnvironment, ns, 'managed-environment-name', {
      metadata: {
        ownerReferences: [
          { apiVersion: LEGACY_ENVIRONMENT_OWNER_API_VERSION, kind: 'Environment', name: 'name', uid: '123' },
        ],
      },
      spec: {
        apiURL: 'https://api.example',
        credentialsSecret: 'cluster-secret',
        allowInsecureSkipTLSVerify: false,
      },
    });
    await eventually(
      'the legacy ManagedEnvironment deleted',
      async () => (await managedEnvironment('name')) === undefined,
    );
  });

  it('a ManagedEnvironment of that name controlled by something else is left alone', async () => {
    // Another controller's object (a real owner, or the garbage collector would remove it).
    const owner = await f.create(Kind.ConfigMap, ns, 'someone', {});
    await f.create(Kind.GitOpsDeploymentManagedEnvironment, ns, 'managed-environment-taken', {
      metadata: {
        ownerReferences: [
          { apiVersion: 'v1', kind: 'ConfigMap', name: 'someone', uid: owner.metadata.uid, controller: true },
        ],
      },
      spec: {
        apiURL: 'https://someone-else.example',
        credentialsSecret: 'cluster-secret',
        allowInsecureSkipTLSVerify: false,
      },
    });
    await environment('taken', { unstableConfigurationFields: { kubernetesCredentials: credentials() } });
    // The Environment is looked at once the ManagedEnvironment of another Environment appears after it.
    await environment('after-taken', {
      unstableConfigurationFields: { kubernetesCredentials: credentials() },
    });
    await eventually('the later Environment served', () => managedEnvironment('after-taken'));
    assert.equal(specOf(await managedEnvironment('taken')).apiURL, 'https://someone-else.example');
  });
});
