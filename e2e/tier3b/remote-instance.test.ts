/**
 * Tier 3b: an engine instance on another cluster. A second local control plane plays a workload cluster with
 * its own Argo CD and agent (which reach the service only through PostgreSQL); the backend and the tenants'
 * namespaces stay on the first. A tenant placed there by its namespace label deploys into the workload cluster
 * through a ManagedEnvironment, and without an environment into its own namespace on the first cluster (the
 * remote Argo CD reaches it with a token for that namespace only); a tenant moved from the first cluster's
 * instance to the remote one and back keeps its deployed resources, which each Argo CD takes over in turn.
 */
import assert from 'node:assert/strict';
import { Label } from '@gitops/api';
import { manifest, startControlPlane } from '@gitops/local-env';
import { clusterIdentity, loadKubeConfig } from '@gitops/shared';
import { eventually, useFixture } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { type ExternalCluster, externalCluster } from '../fixture/external-cluster.ts';
import { create, GROUP_VERSION, get, mergePatch, paths } from '../fixture/kube.ts';
import { gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

describe('tier 3b: an Argo CD instance on another cluster', () => {
  const workload = useFixture(
    () => startControlPlane(),
    (plane) => plane.stop(),
  );
  const f = useRealSystem(() => ({ secondInstance: { kubeconfigPath: workload.kubeconfigPath } }));
  let remote: ExternalCluster;
  let a: string;
  let b: string;

  beforeAll(() => {
    remote = externalCluster(loadKubeConfig(workload.kubeconfigPath), f.system.shard);
    a = f.system.engineInstanceName;
    b = f.system.secondEngineInstanceName;
  });

  const workloadKc = () => loadKubeConfig(workload.kubeconfigPath);
  const engineInstanceOf = (status: object) => (status as { engineInstance?: string }).engineInstance;
  /** A Secret + ManagedEnvironment in `tenant` (on the first cluster) for a namespace of the workload cluster. */
  async function workloadEnvironment(tenant: string, name: string) {
    const target = await remote.target(name);
    const objects = remote.environmentObjects(name, target);
    await create(f.system.kc, `/api/v1/namespaces/${tenant}/secrets`, objects.secret);
    await create(
      f.system.kc,
      `/apis/${GROUP_VERSION}/namespaces/${tenant}/gitopsdeploymentmanagedenvironments`,
      objects.environment,
    );
    return target.namespace;
  }

  /**
   * A tenant labelled for `instance` with a ManagedEnvironment for a namespace of the workload cluster, and an
   * automated GitOpsDeployment `app` of `object` through it, Synced and Healthy on that instance.
   */
  async function deployedToWorkload(prefix: string, instance: string, object: string) {
    const tenant = await f.given.tenant(prefix, { [Label.EngineInstance]: instance });
    const namespace = await workloadEnvironment(tenant, 'workload');
    const repo = await f.given.repository(prefix, { 'app/object.yaml': object });
    const gd = await f.when.deployed(tenant, 'app', gitSource(repo, 'app'), {
      destination: { environment: 'workload', namespace },
    });
    await f.expect
      .deployment(gd)
      .is(`Synced/Healthy on ${instance}`, (s) => syncedAndHealthy(s) && engineInstanceOf(s) === instance);
    return { tenant, namespace, repo, gd };
  }

  it('the remote instance registered with its own cluster identity', async () => {
    const rows = await f.system.db
      .selectFrom('engine_instance')
      .select(['name', 'cluster_identity'])
      .where('name', 'in', [a, b])
      .execute();
    const identity = (name: string) => rows.find((r) => r.name === name)?.cluster_identity;
    assert.equal(identity(a), await clusterIdentity(f.system.kc));
    assert.equal(identity(b), await clusterIdentity(workloadKc()));
    assert.notEqual(identity(a), identity(b));
  });

  it('a tenant labelled for the remote instance deploys into the workload cluster through a ManagedEnvironment, and without an environment into its own namespace on the first cluster', async () => {
    const { tenant, namespace, repo, gd } = await deployedToWorkload(
      'remote',
      b,
      manifest.configMap('far', { k: 'v' }),
    );
    // The ConfigMap is on the workload cluster (deployed by its Argo CD), not on the first one.
    const far = await get<{ data?: Record<string, string> }>(
      workloadKc(),
      `/api/v1/namespaces/${namespace}/configmaps/far`,
    );
    assert.equal(far?.data?.k, 'v');
    assert.equal(await f.expect.readObject(namespace, 'ConfigMap', 'far'), undefined);
    assert.ok(
      await get(
        workloadKc(),
        paths.application(f.system.secondArgoCdNamespace, `gitopsdepl-${gd.metadata.uid}`),
      ),
    );

    // Without an environment: into the tenant's own namespace, on the first cluster, by the remote Argo CD.
    const near = await repo.commit({ 'app/object.yaml': manifest.configMap('near', { k: 'here' }) });
    const local = await f.when.deployed(tenant, 'local', gitSource(repo, 'app'));
    await f.expect
      .deployment(local)
      .is(
        'Synced/Healthy on b',
        (s) => syncedAndHealthy(s) && engineInstanceOf(s) === b && s.sync?.revision === near,
      );
    const cm = await f.expect.readObject(tenant, 'ConfigMap', 'near');
    assert.equal((cm as { data?: Record<string, string> } | undefined)?.data?.k, 'here');
    assert.equal(await get(workloadKc(), `/api/v1/namespaces/${tenant}/configmaps/near`), undefined);
    assert.ok(
      await get(
        workloadKc(),
        paths.application(f.system.secondArgoCdNamespace, `gitopsdepl-${local.metadata.uid}`),
      ),
      'the Application is on the remote Argo CD',
    );
    await f.when.deleted(local);
  });

  it('a tenant whose deployment has no environment, moved to the remote instance and back: its objects stay in its namespace, taken over by each Argo CD in turn', async () => {
    const tenant = await f.given.tenant('roundtrip', { [Label.EngineInstance]: a });
    const repo = await f.given.repository('roundtrip', {
      'app/object.yaml': manifest.configMap('home', { v: '1' }),
    });
    const gd = await f.when.deployed(tenant, 'app', gitSource(repo, 'app'));
    await f.expect
      .deployment(gd)
      .is('Synced/Healthy on a', (s) => syncedAndHealthy(s) && engineInstanceOf(s) === a);
    const before = await f.expect.readObject(tenant, 'ConfigMap', 'home');
    assert.ok(before);
    const appName = `gitopsdepl-${gd.metadata.uid}`;

    for (const [to, from, argoCd, kc, v] of [
      [b, a, f.system.secondArgoCdNamespace, workloadKc(), '2'],
      [a, b, f.system.argoCdNamespace, f.system.kc, '3'],
    ] as const) {
      await mergePatch(f.system.kc, paths.namespace(tenant), {
        metadata: { labels: { [Label.EngineInstance]: to } },
      });
      await eventually(
        'the Application on the new instance',
        () => get(kc, paths.application(argoCd, appName)),
        180_000,
      );
      const old = to === b ? f.system.kc : workloadKc();
      const oldArgoCd = to === b ? f.system.argoCdNamespace : f.system.secondArgoCdNamespace;
      await eventually(
        `no Application left on ${from}`,
        async () => ((await get(old, paths.application(oldArgoCd, appName))) ? undefined : true),
        180_000,
      );
      // Same object: adopted, never pruned and re-created.
      assert.equal(
        (await f.expect.readObject(tenant, 'ConfigMap', 'home'))?.metadata.uid,
        before.metadata.uid,
      );
      const head = await repo.commit({ 'app/object.yaml': manifest.configMap('home', { v }) });
      await f.expect
        .deployment(gd)
        .is(
          `Synced at the new head on ${to}`,
          (s) => syncedAndHealthy(s) && engineInstanceOf(s) === to && s.sync?.revision === head,
        );
      const cm = await eventually(
        `the ConfigMap at v${v} in the tenant's namespace`,
        async () => {
          const live = (await f.expect.readObject(tenant, 'ConfigMap', 'home')) as
            | { data?: Record<string, string>; metadata: { uid?: string } }
            | undefined;
          return live?.data?.v === v ? live : undefined;
        },
        180_000,
      );
      assert.equal(cm.metadata.uid, before.metadata.uid);
    }
    // Back on the first cluster: the account the remote Argo CD used is gone.
    await eventually(
      'the workspace ServiceAccount deleted',
      async () =>
        (await get(f.system.kc, `/api/v1/namespaces/${tenant}/serviceaccounts/gitops-service-workspace`))
          ? undefined
          : true,
      60_000,
    );
  });

  it("a tenant moved from the first cluster's instance to the remote one: the remote Argo CD takes its resources over, same objects", async () => {
    const { tenant, namespace, repo, gd } = await deployedToWorkload(
      'crossing',
      a,
      manifest.configMap('kept', { v: '1' }),
    );
    const path = `/api/v1/namespaces/${namespace}/configmaps/kept`;
    const before = await get(workloadKc(), path);
    assert.ok(before);

    await mergePatch(f.system.kc, paths.namespace(tenant), {
      metadata: { labels: { [Label.EngineInstance]: b } },
    });

    await f.expect
      .deployment(gd)
      .is('Synced/Healthy on b', (s) => syncedAndHealthy(s) && engineInstanceOf(s) === b);
    const appName = `gitopsdepl-${gd.metadata.uid}`;
    // (status.engineInstance names b from the move on; the Application there follows the release by a)
    await eventually(
      'the Application on the workload cluster',
      () => get(workloadKc(), paths.application(f.system.secondArgoCdNamespace, appName)),
      180_000,
    );
    await eventually(
      'no Application left on the first cluster',
      async () =>
        (await get(f.system.kc, paths.application(f.system.argoCdNamespace, appName))) ? undefined : true,
      180_000,
    );
    assert.equal((await get(workloadKc(), path))?.metadata.uid, before.metadata.uid);

    // A change after the move is deployed by the remote Argo CD.
    const head = await repo.commit({ 'app/object.yaml': manifest.configMap('kept', { v: '2' }) });
    await f.expect
      .deployment(gd)
      .is('Synced at the new head', (s) => syncedAndHealthy(s) && s.sync?.revision === head);
    await eventually(
      'the ConfigMap at v2 on the workload cluster',
      async () => {
        const cm = await get<{ data?: Record<string, string> }>(workloadKc(), path);
        return cm?.data?.v === '2' ? cm : undefined;
      },
      180_000,
    );
  });
});
