/**
 * The claim path of the Environment controller against the real API server: the reference's Environment
 * scenarios with a DeploymentTargetClaim (§8.1 items 12–20, §8.8 items 131–134), with the binder and the
 * reclaimer running. A second group runs without the binder, so that a claim's phase written by the test
 * stays as written (the original's unit tests called the Environment reconciler alone).
 */
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { SecretType } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
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

const decoded = (o: KubeObject | undefined, key: string) =>
  Buffer.from(String((o?.data as Record<string, string> | undefined)?.[key] ?? ''), 'base64').toString();

/**
 * A started fixture (`start` its options) and a namespace of its own (`namespacePrefix`), for one describe
 * block, and the objects its tests create there (`h`).
 */
function useClaimEnvironments(namespacePrefix: string, ...start: Parameters<AppStudioFixture['start']>) {
  const f = createAppStudioFixture();
  let namespace = '';
  const ns = () => namespace;
  beforeAll(async () => {
    namespace = await f.createNamespace(namespacePrefix);
    await f.start(...start);
  });
  afterAll(() => f.cleanup());
  const h = {
    environment: (name: string, claimName: string) =>
      f.create(Kind.Environment, ns(), name, {
        spec: {
          displayName: '',
          deploymentStrategy: 'AppStudioAutomated',
          configuration: { target: { deploymentTargetClaim: { claimName } } },
        },
      }),
    claim: (name: string, spec: Record<string, unknown>) =>
      f.create(Kind.DeploymentTargetClaim, ns(), name, { spec: { deploymentTargetClassName: '', ...spec } }),
    target: (name: string, credentials: Record<string, unknown>, spec: Record<string, unknown> = {}) =>
      f.create(Kind.DeploymentTarget, ns(), name, {
        spec: {
          deploymentTargetClassName: '',
          kubernetesCredentials: {
            defaultNamespace: 'my-namespace',
            apiURL: 'https://api.target.example:6443',
            clusterCredentialsSecret: 'test-secret',
            allowInsecureSkipTLSVerify: true,
            ...credentials,
          },
          ...spec,
        },
      }),
    secret: (name: string, type: string, data: Record<string, string>) =>
      f.create(Kind.Secret, ns(), name, { type, stringData: data }),
    managedEnvironment: (env: string) =>
      f.get(Kind.GitOpsDeploymentManagedEnvironment, ns(), `managed-environment-${env}`),
  };
  return { f, ns, h };
}

describe('Environment with a DeploymentTargetClaim (binder running)', () => {
  const { f, ns, h } = useClaimEnvironments('appstudio-env-claim');

  it('an Opaque Secret of the bound target is copied to managed-environment-secret-<env>; edits follow; its deletion is SecretNotFound and removes the copy', async () => {
    await h.secret('opaque-secret', 'Opaque', { kubeconfig: 'first' });
    await h.target('opaque-dt', { clusterCredentialsSecret: 'opaque-secret' });
    await h.claim('opaque-dtc', { targetName: 'opaque-dt' });
    const env = await h.environment('test-env', 'opaque-dtc');

    const me = await eventually('the ManagedEnvironment', () => h.managedEnvironment('test-env'));
    assert.deepEqual(specOf(me), {
      apiURL: 'https://api.target.example:6443',
      credentialsSecret: 'managed-environment-secret-test-env',
      allowInsecureSkipTLSVerify: true,
      namespaces: ['my-namespace'],
      clusterResources: false,
    });
    const copy = await f.get(Kind.Secret, ns(), 'managed-environment-secret-test-env');
    assert.equal(copy?.type, SecretType.ManagedEnvironment);
    assert.equal(decoded(copy, 'kubeconfig'), 'first');
    assert.equal(copy?.metadata.labels?.['appstudio.openshift.io/environment-secret'], 'test-env');
    assert.equal(
      (copy?.metadata.ownerReferences as { uid: string }[] | undefined)?.[0]?.uid,
      env.metadata.uid,
    );
    assert.deepEqual(conditionsOf(await f.get(Kind.Environment, ns(), 'test-env')), []);

    // A key added to the source reaches the copy.
    await f.patch(Kind.Secret, ns(), 'opaque-secret', { stringData: { extra: 'added' } });
    await eventually('the copy updated', async () =>
      decoded(await f.get(Kind.Secret, ns(), 'managed-environment-secret-test-env'), 'extra') === 'added'
        ? true
        : undefined,
    );

    // The source deleted: SecretNotFound, and the copy goes.
    await f.remove(Kind.Secret, ns(), 'opaque-secret');
    const conditions = await f.conditionsOnceSet('SecretNotFound', Kind.Environment, ns(), 'test-env');
    assert.deepEqual(
      conditions,
      errorPair(
        'SecretNotFound',
        'the secret opaque-secret referenced by the Environment resource was not found',
      ),
    );
    await eventually('the copy deleted', async () =>
      (await f.get(Kind.Secret, ns(), 'managed-environment-secret-test-env')) === undefined
        ? true
        : undefined,
    );

    // The Environment deleted: its ManagedEnvironment goes.
    await f.remove(Kind.Environment, ns(), 'test-env');
    await eventually('the ManagedEnvironment deleted', async () =>
      (await h.managedEnvironment('test-env')) === undefined ? true : undefined,
    );
  });

  it('a target without default namespace gives a ManagedEnvironment without namespaces; a managed-environment Secret is used as it is', async () => {
    await h.secret('typed-secret', SecretType.ManagedEnvironment, { kubeconfig: 'x' });
    await h.target('typed-dt', { clusterCredentialsSecret: 'typed-secret', defaultNamespace: '' });
    await h.claim('typed-dtc', { targetName: 'typed-dt' });
    await h.environment('typed-env', 'typed-dtc');
    const me = await eventually('the ManagedEnvironment', () => h.managedEnvironment('typed-env'));
    assert.deepEqual(specOf(me), {
      apiURL: 'https://api.target.example:6443',
      credentialsSecret: 'typed-secret',
      allowInsecureSkipTLSVerify: true,
      clusterResources: false,
    });
    assert.equal(await f.get(Kind.Secret, ns(), 'managed-environment-secret-typed-env'), undefined);
  });

  it('the target’s API URL and Secret changing rewrite the ManagedEnvironment spec exactly', async () => {
    await h.secret('old-secret', SecretType.ManagedEnvironment, { kubeconfig: 'old' });
    await h.secret('new-secret', SecretType.ManagedEnvironment, { kubeconfig: 'new' });
    await h.target('moving-dt', {
      clusterCredentialsSecret: 'old-secret',
      allowInsecureSkipTLSVerify: false,
    });
    await h.claim('moving-dtc', { targetName: 'moving-dt' });
    await h.environment('moving-env', 'moving-dtc');
    await eventually('the ManagedEnvironment', () => h.managedEnvironment('moving-env'));
    await f.patch(Kind.DeploymentTarget, ns(), 'moving-dt', {
      spec: { kubernetesCredentials: { apiURL: 'https://new-url', clusterCredentialsSecret: 'new-secret' } },
    });
    await eventually('the new spec', async () => {
      const spec = specOf(await h.managedEnvironment('moving-env'));
      return isDeepStrictEqual(spec, {
        apiURL: 'https://new-url',
        credentialsSecret: 'new-secret',
        allowInsecureSkipTLSVerify: false,
        namespaces: ['my-namespace'],
        clusterResources: false,
      })
        ? true
        : undefined;
    });
  });

  it('an Environment created with its claim before the target exists waits without condition, then gets its ManagedEnvironment', async () => {
    await h.secret('later-secret', SecretType.ManagedEnvironment, { kubeconfig: 'x' });
    await h.claim('later-dtc', { targetName: 'later-dt' });
    const env = await h.environment('later-env', 'later-dtc');
    await eventually('the claim Pending', async () =>
      (await f.get(Kind.DeploymentTargetClaim, ns(), 'later-dtc'))?.status ? true : undefined,
    );
    // Once the controllers have seen the Environment and finished with it.
    await f.settledAfter(env);
    assert.equal(await h.managedEnvironment('later-env'), undefined);
    assert.deepEqual(conditionsOf(await f.get(Kind.Environment, ns(), 'later-env')), []);
    await h.target('later-dt', { clusterCredentialsSecret: 'later-secret' });
    await eventually('the ManagedEnvironment', () => h.managedEnvironment('later-env'));
  });

  it('a binding’s deployments go to the bound target’s default namespace', async () => {
    await h.secret('deploy-secret', SecretType.ManagedEnvironment, { kubeconfig: 'x' });
    await h.target('deploy-dt', { clusterCredentialsSecret: 'deploy-secret', defaultNamespace: 'team-ns' });
    await h.claim('deploy-dtc', { targetName: 'deploy-dt' });
    await h.environment('deploy-env', 'deploy-dtc');
    await f.create(Kind.Application, ns(), 'app', { spec: { displayName: 'app' } });
    await f.create(Kind.SnapshotEnvironmentBinding, ns(), 'app-deploy-env', {
      spec: { application: 'app', environment: 'deploy-env', snapshot: 's', components: [] },
    });
    await f.patch(
      Kind.SnapshotEnvironmentBinding,
      ns(),
      'app-deploy-env',
      {
        status: {
          components: [
            {
              name: 'comp',
              gitopsRepository: {
                url: 'https://example.com/repo.git',
                branch: 'main',
                path: 'components/comp/overlays/deploy-env',
                generatedResources: [],
                commitID: 'abc123',
              },
            },
          ],
        },
      },
      'status',
    );
    const deployment = await eventually('the GitOpsDeployment', async () =>
      (await f.list(Kind.GitOpsDeployment, ns())).find((d) => d.metadata.name.startsWith('app-deploy-env-')),
    );
    assert.deepEqual(specOf(deployment).destination, {
      environment: 'managed-environment-deploy-env',
      namespace: 'team-ns',
    });
  });
});

describe('Environment with a DeploymentTargetClaim (Environment controller alone)', () => {
  const { f, ns, h } = useClaimEnvironments('appstudio-env-alone', {}, { only: ['appstudio-environment'] });

  const boundClaim = async (name: string, spec: Record<string, unknown>) => {
    await h.claim(name, spec);
    await f.patch(Kind.DeploymentTargetClaim, ns(), name, { status: { phase: 'Bound' } }, 'status');
  };

  it('a claim that is not Bound: no ManagedEnvironment and no condition', async () => {
    await h.claim('pending-dtc', {});
    await h.environment('pending-env', 'pending-dtc');
    const touched = await f.patch(Kind.Environment, ns(), 'pending-env', {
      metadata: { labels: { touched: 'yes' } },
    });
    // A later Environment in the same queue is served, so this one has been looked at.
    await h.secret('s', SecretType.ManagedEnvironment, { kubeconfig: 'x' });
    await h.target('witness-dt', { clusterCredentialsSecret: 's' });
    await boundClaim('witness-dtc', { targetName: 'witness-dt' });
    await h.environment('witness-env', 'witness-dtc');
    await eventually('the witness ManagedEnvironment', () => h.managedEnvironment('witness-env'));
    await f.settledAfter(touched);
    assert.equal(await h.managedEnvironment('pending-env'), undefined);
    assert.deepEqual(conditionsOf(await f.get(Kind.Environment, ns(), 'pending-env')), []);
  });

  it('a Bound claim without target name and only an unrelated target: DeploymentTarget not found for DeploymentTargetClaim', async () => {
    await h.target('unrelated-dt', {});
    await boundClaim('no-target-dtc', {});
    await h.environment('no-target-env', 'no-target-dtc');
    const c = await eventually('the condition', async () => {
      const list = conditionsOf(await f.get(Kind.Environment, ns(), 'no-target-env'));
      return list.length > 0 ? list : undefined;
    });
    assert.deepEqual(
      c,
      errorPair('DeploymentTargetNotFound', 'DeploymentTarget not found for DeploymentTargetClaim'),
    );
  });

  it('a Bound claim naming a target that does not exist: DeploymentTargetClaim references a DeploymentTarget that does not exist', async () => {
    await boundClaim('missing-target-dtc', { targetName: 'no-such-dt' });
    await h.environment('missing-target-env', 'missing-target-dtc');
    const c = await eventually('the condition', async () => {
      const list = conditionsOf(await f.get(Kind.Environment, ns(), 'missing-target-env'));
      return list.length > 0 ? list : undefined;
    });
    assert.deepEqual(
      c,
      errorPair(
        'DeploymentTargetNotFound',
        'DeploymentTargetClaim references a DeploymentTarget that does not exist',
      ),
    );
    // The target appears: the condition resolves (the target's event brings the Environment back).
    await h.secret('appearing-secret', SecretType.ManagedEnvironment, { kubeconfig: 'x' });
    await h.target('no-such-dt', { clusterCredentialsSecret: 'appearing-secret' });
    await eventually('the ManagedEnvironment', () => h.managedEnvironment('missing-target-env'));
    await eventually('resolved', async () =>
      JSON.stringify(conditionsOf(await f.get(Kind.Environment, ns(), 'missing-target-env'))) ===
      JSON.stringify([
        { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurredResolved', message: '' },
        { type: 'Reconciled', status: 'True', reason: 'DeploymentTargetNotFoundResolved', message: '' },
      ])
        ? true
        : undefined,
    );
  });
});
