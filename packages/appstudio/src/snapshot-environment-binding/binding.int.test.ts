/**
 * SnapshotEnvironmentBinding → GitOpsDeployments against the real API server: the reference's binding
 * scenarios (controller unit tests and the binding e2e suite), with the design's fixes named where they
 * change the outcome. The test plays the component service (it writes `status.components`) and the core
 * (it writes a GitOpsDeployment's `status`); the features run alone.
 */
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioFixture, createAppStudioFixture, Kind } from '../testing/appstudio-fixture.ts';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

const pick = ({ type, status, reason, message }: Condition) => ({ type, status, reason, message });
const statusOf = (o: KubeObject | undefined) => (o?.status ?? {}) as Record<string, unknown>;
const specOf = (o: KubeObject | undefined) => (o?.spec ?? {}) as Record<string, unknown>;
const bindingConditions = (b: KubeObject | undefined) =>
  ((statusOf(b).bindingConditions as Condition[] | undefined) ?? []).map(pick);

const APP = 'new-demo-app';
const REPO = 'https://github.com/redhat-appstudio/managed-gitops';

describe('SnapshotEnvironmentBinding controller', () => {
  const f: AppStudioFixture = createAppStudioFixture();
  let ns: string;

  const component = (name: string, path = `components/${name}/overlays/staging`) => ({
    name,
    gitopsRepository: { url: REPO, branch: 'main', path, generatedResources: [], commitID: '' },
  });
  const binding = async (
    name: string,
    options: {
      environment?: string;
      application?: string;
      components?: unknown[];
      labels?: Record<string, string>;
    } = {},
  ) => {
    const created = await f.create(Kind.SnapshotEnvironmentBinding, ns, name, {
      metadata: { labels: options.labels ?? {} },
      spec: {
        application: options.application ?? APP,
        environment: options.environment ?? 'staging',
        snapshot: 'my-snapshot',
        components: [{ name: 'component-a' }],
      },
    });
    if (options.components) await setComponents(name, options.components);
    return created;
  };
  const setComponents = (name: string, components: unknown[] | null) =>
    f.patch(Kind.SnapshotEnvironmentBinding, ns, name, { status: { components } }, 'status');
  const getBinding = (name: string) => f.get(Kind.SnapshotEnvironmentBinding, ns, name);
  const deployment = (name: string) => f.get(Kind.GitOpsDeployment, ns, name);
  const environment = (name: string, spec: Record<string, unknown> = {}) =>
    f.create(Kind.Environment, ns, name, {
      spec: { displayName: '', deploymentStrategy: 'AppStudioAutomated', ...spec },
    });
  const firstCondition = async (name: string, message: string) =>
    eventually(`bindingConditions[0] of ${name} says "${message}"`, async () => {
      const c = bindingConditions(await getBinding(name));
      return c[0]?.message === message ? c : undefined;
    });

  beforeAll(async () => {
    ns = await f.createNamespace('appstudio-seb');
    await f.create(Kind.Application, ns, APP, { spec: { displayName: APP } });
    await environment('staging');
    // Long enough that a binding created just before its Application survives, short enough to test.
    await f.start({ applicationGracePeriodMs: 20_000 });
  });
  afterAll(() => f.cleanup());

  it('each component gets a GitOpsDeployment named <binding>-<app>-<env>-<component>, owned by the binding, with source, automated type and identity labels', async () => {
    const seb = await binding('appa-staging-binding', { components: [component('component-a')] });
    const name = 'appa-staging-binding-new-demo-app-staging-component-a';
    const gd = await eventually('the GitOpsDeployment', () => deployment(name));
    assert.deepEqual(specOf(gd).source, {
      repoURL: REPO,
      path: 'components/component-a/overlays/staging',
      targetRevision: 'main',
    });
    assert.equal(specOf(gd).type, 'automated');
    assert.equal(specOf(gd).destination, undefined, "no destination: the binding's own namespace");
    const [owner] = gd.metadata.ownerReferences as { name: string; uid: string; controller: boolean }[];
    assert.equal(owner?.name, 'appa-staging-binding');
    assert.equal(owner?.uid, seb.metadata.uid);
    assert.equal(owner?.controller, true);
    assert.deepEqual(gd.metadata.labels, {
      'appstudio.openshift.io/application': APP,
      'appstudio.openshift.io/component': 'component-a',
      'appstudio.openshift.io/environment': 'staging',
      'managed-gitops.redhat.com/backend-shard': f.shard,
    });
    const status = await eventually('status.gitopsDeployments', async () => {
      const s = statusOf(await getBinding('appa-staging-binding'));
      return Array.isArray(s.gitopsDeployments) && s.gitopsDeployments.length === 1 ? s : undefined;
    });
    assert.deepEqual(status.gitopsDeployments, [
      { componentName: 'component-a', gitopsDeployment: name, syncStatus: '', health: '', commitID: '' },
    ]);
  });

  it('status.gitopsDeployments is sorted by component and mirrors sync, health and revision; "N of M components deployed" follows Synced', async () => {
    await binding('sorted', {
      environment: 'sorted-env',
      components: [component('comp-b'), component('comp-a')],
    });
    await environment('sorted-env');
    const a = 'sorted-new-demo-app-sorted-env-comp-a';
    const b = 'sorted-new-demo-app-sorted-env-comp-b';
    await eventually('both deployments', async () => (await deployment(a)) && (await deployment(b)));
    const deployed = async (message: string) =>
      eventually(`componentDeploymentConditions "${message}"`, async () => {
        const s = statusOf(await getBinding('sorted'));
        const c = (s.componentDeploymentConditions as Condition[] | undefined)?.map(pick);
        return c?.length === 1 && c[0]?.message === message ? { s, c } : undefined;
      });
    const initial = await deployed('0 of 2 components deployed');
    assert.deepEqual(
      (initial.s.gitopsDeployments as { componentName: string }[]).map((e) => e.componentName),
      ['comp-a', 'comp-b'],
    );
    // The test plays the core: it reports Argo CD's verdict on each deployment.
    await f.patch(
      Kind.GitOpsDeployment,
      ns,
      a,
      { status: { sync: { status: 'Synced', revision: '1.0.0' }, health: { status: 'Healthy' } } },
      'status',
    );
    await f.patch(
      Kind.GitOpsDeployment,
      ns,
      b,
      { status: { sync: { status: 'OutOfSync', revision: '2.0.0' }, health: { status: 'Degraded' } } },
      'status',
    );
    const mirrored = [
      {
        componentName: 'comp-a',
        gitopsDeployment: a,
        syncStatus: 'Synced',
        health: 'Healthy',
        commitID: '1.0.0',
      },
      {
        componentName: 'comp-b',
        gitopsDeployment: b,
        syncStatus: 'OutOfSync',
        health: 'Degraded',
        commitID: '2.0.0',
      },
    ];
    const half = await eventually('both verdicts mirrored', async () => {
      const s = statusOf(await getBinding('sorted'));
      return isDeepStrictEqual(s.gitopsDeployments, mirrored) ? s : undefined;
    });
    assert.deepEqual((half.componentDeploymentConditions as Condition[]).map(pick), [
      {
        type: 'AllComponentsDeployed',
        status: 'False',
        reason: 'CommitsUnsynced',
        message: '1 of 2 components deployed',
      },
    ]);
    await f.patch(
      Kind.GitOpsDeployment,
      ns,
      b,
      { status: { sync: { status: 'Synced', revision: '2.0.0' } } },
      'status',
    );
    const all = await deployed('2 of 2 components deployed');
    assert.deepEqual(all.c, [
      {
        type: 'AllComponentsDeployed',
        status: 'True',
        reason: 'CommitsSynced',
        message: '2 of 2 components deployed',
      },
    ]);
  });

  it('a changed status path updates the deployment; manual edits are reverted, removed identity labels restored, a deleted deployment recreated', async () => {
    await environment('edits');
    await binding('edits', { environment: 'edits', components: [component('component-a')] });
    const name = 'edits-new-demo-app-edits-component-a';
    await eventually('the deployment', () => deployment(name));
    await setComponents('edits', [component('component-a', 'components/component-a/overlays/edited')]);
    await eventually(
      'the new path',
      async () =>
        (specOf(await deployment(name)).source as { path?: string })?.path ===
        'components/component-a/overlays/edited',
    );
    await f.patch(Kind.GitOpsDeployment, ns, name, {
      metadata: { labels: { 'appstudio.openshift.io/component': null, 'user-label': 'kept' } },
      spec: { source: { path: 'hand/edited' } },
    });
    const reverted = await eventually('the edit reverted', async () => {
      const gd = await deployment(name);
      return (specOf(gd).source as { path?: string })?.path === 'components/component-a/overlays/edited' &&
        gd?.metadata.labels?.['appstudio.openshift.io/component'] === 'component-a'
        ? gd
        : undefined;
    });
    assert.equal(
      reverted.metadata.labels?.['user-label'],
      'kept',
      'labels that are not appstudio.openshift.io ones stay',
    );
    await f.remove(Kind.GitOpsDeployment, ns, name);
    await eventually('the deployment recreated', async () => {
      const gd = await deployment(name);
      return gd && gd.metadata.uid !== reverted.metadata.uid ? gd : undefined;
    });
  });

  it("removing a component deletes only its deployment, never an unrelated one; no components at all is WaitingForComponentStatus and deletes the binding's deployments", async () => {
    await environment('removal');
    await binding('removal', {
      environment: 'removal',
      components: [component('component-a'), component('component-b')],
    });
    const a = 'removal-new-demo-app-removal-component-a';
    const b = 'removal-new-demo-app-removal-component-b';
    await f.create(Kind.GitOpsDeployment, ns, 'unrelated', {
      metadata: {
        labels: {
          'appstudio.openshift.io/application': APP,
          'appstudio.openshift.io/environment': 'removal',
          'appstudio.openshift.io/component': 'component-z',
        },
      },
      spec: { source: { repoURL: REPO, path: 'x' }, type: 'automated' },
    });
    await eventually('both deployments', async () => (await deployment(a)) && (await deployment(b)));
    await setComponents('removal', [component('component-b')]);
    await eventually('component-a deleted', async () => (await deployment(a)) === undefined);
    assert.ok(await deployment(b), 'component-b stays');
    await setComponents('removal', null);
    const message =
      "SnapshotEventBinding Component status is required to generate GitOps deployment, waiting for the Application Service controller to finish reconciling binding 'removal'";
    assert.deepEqual((await firstCondition('removal', message))[1], {
      type: 'Reconciled',
      status: 'False',
      reason: 'WaitingForComponentStatus',
      message,
    });
    await eventually('component-b deleted', async () => (await deployment(b)) === undefined);
    assert.ok(await deployment('unrelated'), 'the unrelated deployment is never touched');
  });

  it('a GitOpsDeployment of the generated name that the binding does not control is left alone and reported (fix: the original took it over)', async () => {
    await environment('taken-env');
    const name = 'taken-new-demo-app-taken-env-component-a';
    await f.create(Kind.GitOpsDeployment, ns, name, {
      spec: { source: { repoURL: REPO, path: 'mine' }, type: 'manual' },
    });
    await binding('taken', { environment: 'taken-env', components: [component('component-a')] });
    const c = await firstCondition(
      'taken',
      `GitOpsDeployment ${name} already exists and is not controlled by this binding`,
    );
    assert.equal(c[1]?.reason, 'ErrorGeneratingGitOpsDeployment');
    const gd = await deployment(name);
    assert.equal(specOf(gd).type, 'manual');
    assert.equal(gd?.metadata.ownerReferences, undefined);
  });

  it('a binding whose full name rule is too long gets <binding>-<component>, or the hashed form', async () => {
    await environment('long');
    const longBinding = 'b'.repeat(240);
    await binding(longBinding, { environment: 'long', components: [component('wxyzwxyzwxyzwxyzwxyz')] });
    const short = `${longBinding}-wxyzwxyzwxyzwxyzwxyz`;
    assert.ok(short.length > 250);
    const gd = await eventually('the hashed deployment', async () => {
      const list = await f.list(Kind.GitOpsDeployment, ns);
      return list.find((d) => d.metadata.name.startsWith(short.slice(0, 180)));
    });
    assert.equal(gd.metadata.name.length, 245);
    assert.match(gd.metadata.name, /^b{180}-[0-9a-f]{64}$/);
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
    assert.deepEqual(failed, [
      { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message },
      { type: 'Reconciled', status: 'False', reason: 'GitOpsRepoNotReady', message },
    ]);
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
