/**
 * SnapshotEnvironmentBinding against the real API server (continued from binding.int.test.ts): the
 * destination, the labels, the conditions that gate or stop generation, duplicates and the Application's
 * grace period. The test plays the component service (it writes `status.components`); the features run
 * alone.
 */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { errorPair, Kind } from '../testing/appstudio-fixture.ts';
import { APP, specOf, useBindingScenario } from '../testing/binding-scenario.ts';

describe('SnapshotEnvironmentBinding controller: destination, labels and conditions', () => {
  const scenario = useBindingScenario();
  const { f, component, binding, getBinding, deployment, environment, firstCondition } = scenario;
  let ns: string;
  beforeAll(() => {
    ns = scenario.ns();
  });

  it('the destination follows the Environment: its cluster and targetNamespace, none, or an error without targetNamespace', async () => {
    const credentials = (targetNamespace: string) => ({
      kubernetesCredentials: {
        targetNamespace,
        apiURL: 'https://api.cluster.example:6443',
        clusterCredentialsSecret: 'my-secret',
        allowInsecureSkipTLSVerify: false,
      },
    });
    await environment('remote', { unstableConfigurationFields: credentials('namespace1') });
    await binding('remote', { environment: 'remote', components: [component('component-a')] });
    const name = 'remote-new-demo-app-remote-component-a';
    const destination = async (expected: unknown) =>
      eventually(
        `destination ${JSON.stringify(expected)}`,
        async () =>
          JSON.stringify(specOf(await deployment(name)).destination ?? {}) === JSON.stringify(expected),
      );
    await destination({ environment: 'managed-environment-remote', namespace: 'namespace1' });
    await f.patch(Kind.Environment, ns, 'remote', {
      spec: { unstableConfigurationFields: credentials('another-namespace') },
    });
    await destination({ environment: 'managed-environment-remote', namespace: 'another-namespace' });
    await f.patch(Kind.Environment, ns, 'remote', { spec: { unstableConfigurationFields: null } });
    await destination({});
    await f.patch(Kind.Environment, ns, 'remote', { spec: { unstableConfigurationFields: credentials('') } });
    const c = await firstCondition('remote', 'Environment is missing a TargetNamespace field');
    assert.deepEqual(c[1], {
      type: 'Reconciled',
      status: 'False',
      reason: 'ErrorGeneratingGitOpsDeployment',
      message: 'Environment is missing a TargetNamespace field',
    });
  });

  it('an Environment whose claim does not exist is reported on the binding', async () => {
    await environment('claimed', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'dtc-doesnt-exist' } } },
    });
    await binding('claimed', { environment: 'claimed', components: [component('component-a')] });
    const c = await firstCondition(
      'claimed',
      'DeploymentTargetClaim referenced by Environment does not exist.',
    );
    assert.deepEqual(c[0], {
      type: 'ErrorOccurred',
      status: 'True',
      reason: 'ErrorOccurred',
      message: 'DeploymentTargetClaim referenced by Environment does not exist.',
    });
  });

  it('binding labels containing appstudio.openshift.io are copied, updated and removed; others are never copied', async () => {
    await environment('labels');
    await binding('labels', {
      environment: 'labels',
      components: [component('component-a')],
      labels: { 'appstudio.openshift.io': 'testing', 'appstudio.application': APP },
    });
    const name = 'labels-new-demo-app-labels-component-a';
    const labelOf = async () => (await deployment(name))?.metadata.labels ?? {};
    await eventually(
      'the label copied',
      async () => (await labelOf())['appstudio.openshift.io'] === 'testing',
    );
    assert.equal((await labelOf())['appstudio.application'], undefined);
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'labels', {
      metadata: { labels: { 'appstudio.openshift.io': 'testing-update' } },
    });
    await eventually(
      'the label updated',
      async () => (await labelOf())['appstudio.openshift.io'] === 'testing-update',
    );
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'labels', {
      metadata: { labels: { 'appstudio.openshift.io': null } },
    });
    await eventually('the label removed', async () => !('appstudio.openshift.io' in (await labelOf())));
    assert.equal((await labelOf())['appstudio.openshift.io/component'], 'component-a');
  });

  it('GitOps repository conditions gate the binding: False is GitOpsRepoNotReady, True is Reconciled', async () => {
    await environment('repo');
    await binding('appa-repo-binding', { environment: 'repo' });
    const repoCondition = (status: string) => ({
      type: 'GitOpsResourcesGenerated',
      status,
      reason: 'Test',
      message: '',
      lastTransitionTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    });
    await f.patch(
      Kind.SnapshotEnvironmentBinding,
      ns,
      'appa-repo-binding',
      { status: { gitopsRepoConditions: [repoCondition('False')] } },
      'status',
    );
    const message =
      "Cannot Reconcile Binding 'appa-repo-binding', since GitOps Repo Conditions status is false.";
    const failed = await firstCondition('appa-repo-binding', message);
    assert.deepEqual(failed, errorPair('GitOpsRepoNotReady', message));
    await f.patch(
      Kind.SnapshotEnvironmentBinding,
      ns,
      'appa-repo-binding',
      { status: { gitopsRepoConditions: [repoCondition('True')] } },
      'status',
    );
    const ok = await firstCondition('appa-repo-binding', '');
    assert.deepEqual(ok, [
      { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurred', message: '' },
      { type: 'Reconciled', status: 'True', reason: 'Reconciled', message: '' },
    ]);
  });

  it('a component named twice in status is DuplicateComponents', async () => {
    await environment('dups');
    await binding('dups', {
      environment: 'dups',
      components: [component('component-a'), component('component-a')],
    });
    const c = await firstCondition('dups', 'duplicate component keys found in status field in component-a');
    assert.equal(c[1]?.reason, 'DuplicateComponents');
  });

  it('a component name that cannot label a GitOpsDeployment is reported by name (fix: the original said "an unknown error occurred")', async () => {
    await environment('badlabel');
    const name = `Component_${'x'.repeat(75)}`;
    await binding('badlabel', { environment: 'badlabel', components: [component(name)] });
    const c = await firstCondition(
      'badlabel',
      `the component name "${name.slice(0, 80)}..." cannot be a label value of the generated GitOpsDeployments (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)`,
    );
    assert.equal(c[0]?.reason, 'ErrorOccurred');
    assert.equal(c[1]?.reason, 'ErrorGeneratingGitOpsDeployment');
  });

  it('a missing Environment is a binding condition, cleared once the Environment exists (fix: the original was silent)', async () => {
    await binding('early', { environment: 'later-env', components: [component('component-a')] });
    const c = await firstCondition(
      'early',
      "Environment 'later-env' referenced by the binding does not exist",
    );
    assert.equal(c[1]?.reason, 'EnvironmentNotFound');
    await environment('later-env');
    await eventually('the deployment', () => deployment('early-new-demo-app-later-env-component-a'));
    const cleared = await firstCondition('early', '');
    assert.deepEqual(cleared, [
      { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurred', message: '' },
      { type: 'Reconciled', status: 'True', reason: 'Reconciled', message: '' },
    ]);
  });

  it('a second binding of the same application and environment reports the duplicate and generates nothing (fix: a condition instead of the create webhook)', async () => {
    await environment('dup-env');
    await binding('first-binding', { environment: 'dup-env', components: [component('component-a')] });
    await eventually('the first binding served', () =>
      deployment('first-binding-new-demo-app-dup-env-component-a'),
    );
    await binding('second-binding', { environment: 'dup-env', components: [component('component-a')] });
    const c = await firstCondition(
      'second-binding',
      'invalid SnapshotEnvironmentBinding: duplicate combination of Application (new-demo-app) and Environment (dup-env). Duplicated by: first-binding',
    );
    assert.equal(c[1]?.reason, 'DuplicateBinding');
    assert.equal(await deployment('second-binding-new-demo-app-dup-env-component-a'), undefined);
    await f.remove(Kind.SnapshotEnvironmentBinding, ns, 'first-binding');
    await eventually('the second binding served once the first is gone', () =>
      deployment('second-binding-new-demo-app-dup-env-component-a'),
    );
  });

  it('a binding whose Application does not exist is deleted after the grace period; one whose Application appears in time stays', async () => {
    await environment('orphan-env');
    await binding('orphan', {
      application: 'no-such-app',
      environment: 'orphan-env',
      components: [component('component-a')],
    });
    await binding('adopted', {
      application: 'late-app',
      environment: 'orphan-env',
      components: [component('component-a')],
    });
    await f.create(Kind.Application, ns, 'late-app', { spec: { displayName: 'late' } });
    await eventually('the adopted binding served', () =>
      deployment('adopted-late-app-orphan-env-component-a'),
    );
    await eventually('the orphan deleted', async () => (await getBinding('orphan')) === undefined, 120_000);
    assert.ok(await getBinding('adopted'), 'the binding whose Application exists stays');
  });
});
