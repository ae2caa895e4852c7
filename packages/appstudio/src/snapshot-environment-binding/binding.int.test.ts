/**
 * SnapshotEnvironmentBinding → GitOpsDeployments against the real API server: the reference's binding
 * scenarios (controller unit tests and the binding e2e suite), with the design's fixes named where they
 * change the outcome. The test plays the component service (it writes `status.components`) and the core
 * (it writes a GitOpsDeployment's `status`); the features run alone. Here the deployments generated, their
 * status and the names; the destination, labels and conditions in binding-status.int.test.ts.
 */
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { Kind } from '../testing/appstudio-fixture.ts';
import {
  APP,
  type Condition,
  pick,
  REPO,
  specOf,
  statusOf,
  useBindingScenario,
} from '../testing/binding-scenario.ts';

describe('SnapshotEnvironmentBinding controller', () => {
  const scenario = useBindingScenario();
  const { f, component, binding, setComponents, getBinding, deployment, environment, firstCondition } =
    scenario;
  let ns: string;
  beforeAll(() => {
    ns = scenario.ns();
  });

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
});
