/**
 * Tier 3b: an Environment that claims its cluster, with a real Argo CD. A DeploymentTargetClass with the
 * managed-gitops.redhat.com/namespace provisioner gives each claim a namespace of the local API server and a
 * ServiceAccount token that may administer only it; a binding's component then deploys into that namespace
 * through the ManagedEnvironment's token. The test plays only the component service. Deleting the
 * Environment and then the claim removes everything (Delete), or keeps the namespace with the target
 * Released (Retain).
 */
import assert from 'node:assert/strict';
import { AppStudioKinds } from '@gitops/api';
import { type GitRepo, manifest } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioObjects, appStudioObjects } from '../fixture/appstudio.ts';
import { create, get, list, mergePatch, remove } from '../fixture/kube.ts';
import { CONVERGE_MS, type RealSystem, startRealSystem } from '../fixture/real-argo-cd.ts';
import { randomSuffix } from '../fixture/system.ts';

const CLASSES = '/apis/appstudio.redhat.com/v1alpha1/deploymenttargetclasses';

interface Status {
  phase?: string;
  sync?: { status?: string };
  health?: { status?: string };
}
const statusOf = (o: KubeObject | undefined) => (o?.status ?? {}) as Status;

describe('tier 3b: App Studio deployment targets with a real Argo CD', () => {
  let f: RealSystem;
  let tenant: string;
  let repo: GitRepo;
  const classes: string[] = [];
  const namespaces: string[] = [];

  let apps: AppStudioObjects;
  const namespaceOf = (name: string) => get(f.system.kc, `/api/v1/namespaces/${name}`);
  const deploymentsOf = async (binding: string) =>
    (
      await list(
        f.system.kc,
        `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant}/gitopsdeployments`,
      )
    ).filter((d) => d.metadata.name.startsWith(`${binding}-`));
  const goneEventually = (what: string, readIt: () => Promise<KubeObject | undefined>) =>
    eventually(`${what} gone`, async () => ((await readIt()) === undefined ? true : undefined), CONVERGE_MS);

  /** A class, a claim and an Environment created together; a binding of component web; Synced/Healthy. */
  async function deployedThroughClaim(env: string, policy: 'Delete' | 'Retain') {
    const className = `e2e-namespace-${policy.toLowerCase()}-${randomSuffix()}`;
    classes.push(className);
    await create(f.system.kc, CLASSES, {
      apiVersion: 'appstudio.redhat.com/v1alpha1',
      kind: 'DeploymentTargetClass',
      metadata: { name: className },
      spec: { provisioner: 'managed-gitops.redhat.com/namespace', reclaimPolicy: policy },
    });
    const claim = `${env}-dtc`;
    await Promise.all([
      apps.create(AppStudioKinds.DeploymentTargetClaim, claim, { deploymentTargetClassName: className }),
      apps.create(AppStudioKinds.Environment, env, {
        displayName: env,
        deploymentStrategy: 'Manual',
        configuration: { target: { deploymentTargetClaim: { claimName: claim } } },
      }),
    ]);
    const binding = `shop-${env}`;
    await apps.create(AppStudioKinds.SnapshotEnvironmentBinding, binding, {
      application: 'shop',
      environment: env,
      snapshot: 'shop-1',
      components: [{ name: 'web', configuration: { replicas: 1 } }],
    });
    // The component service.
    await mergePatch(f.system.kc, `${apps.path(AppStudioKinds.SnapshotEnvironmentBinding, binding)}/status`, {
      status: {
        components: [
          {
            name: 'web',
            gitopsRepository: {
              url: repo.fileUrl,
              branch: 'main',
              path: `components/web/overlays/${env}`,
              generatedResources: [],
              commitID: await repo.head(),
            },
          },
        ],
      },
    });
    const target = await eventually(
      'the provisioned target Bound',
      async () => {
        const t = await apps.read(AppStudioKinds.DeploymentTarget, `${claim}-dt`);
        return statusOf(t).phase === 'Bound' ? t : undefined;
      },
      CONVERGE_MS,
    );
    const namespace = String(
      (target.spec as { kubernetesCredentials: { defaultNamespace: string } }).kubernetesCredentials
        .defaultNamespace,
    );
    namespaces.push(namespace);
    const [deployment] = await eventually(
      'the deployment Synced and Healthy',
      async () => {
        const ds = await deploymentsOf(binding);
        return ds.length === 1 &&
          statusOf(ds[0]).sync?.status === 'Synced' &&
          statusOf(ds[0]).health?.status === 'Healthy'
          ? ds
          : undefined;
      },
      CONVERGE_MS,
    );
    assert.deepEqual((deployment?.spec as { destination?: unknown } | undefined)?.destination, {
      environment: `managed-environment-${env}`,
      namespace,
    });
    const me = await get(
      f.system.kc,
      `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant}/gitopsdeploymentmanagedenvironments/managed-environment-${env}`,
    );
    assert.equal(
      (me?.spec as { credentialsSecret?: string } | undefined)?.credentialsSecret,
      `${claim}-dt-kubeconfig`,
    );
    const cm: KubeObject = await eventually('the ConfigMap in the provisioned namespace', () =>
      get(f.system.kc, `/api/v1/namespaces/${namespace}/configmaps/web-${env}`),
    );
    assert.equal((cm.data as Record<string, string> | undefined)?.environment, env);
    return { claim, namespace, binding, target: `${claim}-dt` };
  }

  beforeAll(async () => {
    f = await startRealSystem();
    tenant = await f.given.tenant('appstudio-dt');
    apps = appStudioObjects(f.system, tenant);
    const files: Record<string, string> = {};
    for (const env of ['dev', 'qa'])
      files[`components/web/overlays/${env}/config.yaml`] = manifest.configMap(`web-${env}`, {
        environment: env,
      });
    repo = await f.given.repository('appstudio-dt-gitops', files);
    await apps.create(AppStudioKinds.Application, 'shop', { displayName: 'shop' });
  });

  afterAll(async () => {
    for (const b of (await list(f.system.kc, apps.path(AppStudioKinds.SnapshotEnvironmentBinding)).catch(
      () => [],
    )) as KubeObject[])
      await remove(f.system.kc, apps.path(AppStudioKinds.SnapshotEnvironmentBinding, b.metadata.name));
    await f?.stop();
    for (const name of classes) await remove(f.system.kc, `${CLASSES}/${name}`).catch(() => {});
    for (const name of namespaces) await remove(f.system.kc, `/api/v1/namespaces/${name}`).catch(() => {});
  });

  it('Delete: deploys into the provisioned namespace through its token; deleting the Environment then the claim removes deployments, ManagedEnvironment, target and namespace', async () => {
    const { claim, namespace, binding, target } = await deployedThroughClaim('dev', 'Delete');

    await remove(f.system.kc, apps.path(AppStudioKinds.Environment, 'dev'));
    await eventually(
      'the deployments gone',
      async () => ((await deploymentsOf(binding)).length === 0 ? true : undefined),
      CONVERGE_MS,
    );
    await goneEventually('the ManagedEnvironment', () =>
      get(
        f.system.kc,
        `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant}/gitopsdeploymentmanagedenvironments/managed-environment-dev`,
      ),
    );
    assert.ok(await namespaceOf(namespace), 'the namespace stays while the claim exists');

    await remove(f.system.kc, apps.path(AppStudioKinds.DeploymentTargetClaim, claim));
    await eventually(
      'the target being deleted',
      async () =>
        (await apps.read(AppStudioKinds.DeploymentTarget, target))?.metadata.deletionTimestamp
          ? true
          : undefined,
      CONVERGE_MS,
    );
    await goneEventually('the namespace', () => namespaceOf(namespace));
    await goneEventually('the target', () => apps.read(AppStudioKinds.DeploymentTarget, target));
    await goneEventually('the claim', () => apps.read(AppStudioKinds.DeploymentTargetClaim, claim));
    assert.equal(
      await get(f.system.kc, `/api/v1/namespaces/${tenant}/secrets/${claim}-dt-kubeconfig`),
      undefined,
    );
  });

  it('Retain: the namespace stays and the target is Released', async () => {
    const { claim, namespace, binding, target } = await deployedThroughClaim('qa', 'Retain');
    await remove(f.system.kc, apps.path(AppStudioKinds.Environment, 'qa'));
    await eventually(
      'the deployments gone',
      async () => ((await deploymentsOf(binding)).length === 0 ? true : undefined),
      CONVERGE_MS,
    );
    await remove(f.system.kc, apps.path(AppStudioKinds.DeploymentTargetClaim, claim));
    await goneEventually('the claim', () => apps.read(AppStudioKinds.DeploymentTargetClaim, claim));
    const released = await eventually(
      'the target Released',
      async () => {
        const t = await apps.read(AppStudioKinds.DeploymentTarget, target);
        return statusOf(t).phase === 'Released' ? t : undefined;
      },
      CONVERGE_MS,
    );
    assert.equal((released.spec as { claimRef?: string }).claimRef, '');
    const ns = await namespaceOf(namespace);
    assert.ok(ns);
    assert.equal(ns.metadata.deletionTimestamp, undefined);
  });
});
