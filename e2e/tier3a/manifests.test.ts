/**
 * The production manifests' core (manifests/base) are accepted by a real API server, hold nothing of App Studio
 * or the Prometheus Operator (components/appstudio and components/monitoring add those; tier 4's base.test.ts
 * runs base alone), and their RBAC grants each process what it needs and users nothing they should not have.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadCrds } from '@gitops/api';
import { repoRoot } from '@gitops/local-env';
import { type KubeObject, loadKubeConfig, serverSideApply } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { create, get, isAllowed, remove, untilAllowed } from '../fixture/kube.ts';
import { kustomize } from '../fixture/manifests.ts';

describe('the production manifests', () => {
  const kc = loadKubeConfig(process.env.KUBECONFIG);
  let objects: KubeObject[] = [];
  let createdArgoNamespace = false;

  beforeAll(async () => {
    objects = await kustomize(join(repoRoot, 'manifests', 'base'));
    if (!(await get(kc, '/api/v1/namespaces/gitops-service-argocd'))) {
      await create(kc, '/api/v1/namespaces', { metadata: { name: 'gitops-service-argocd' } });
      createdArgoNamespace = true;
    }
  });
  afterAll(async () => {
    for (const o of objects.filter((x) => !x.metadata.namespace && x.kind !== 'CustomResourceDefinition')) {
      const plural =
        o.kind === 'Namespace'
          ? undefined
          : o.kind === 'ClusterRole'
            ? 'clusterroles'
            : 'clusterrolebindings';
      if (plural) await remove(kc, `/apis/rbac.authorization.k8s.io/v1/${plural}/${o.metadata.name}`);
    }
    await remove(kc, '/api/v1/namespaces/gitops-service');
    if (createdArgoNamespace) await remove(kc, '/api/v1/namespaces/gitops-service-argocd');
  });

  it('are the core service only: its CRDs, no App Studio or Prometheus Operator kind, App Studio off', async () => {
    const groups = new Set(objects.map((o) => (o.apiVersion ?? '').split('/').slice(0, -1).join('/')));
    for (const group of groups) assert.ok(!/appstudio|toolchain|monitoring\.coreos\.com/.test(group), group);
    assert.deepEqual(
      objects
        .filter((o) => o.kind === 'CustomResourceDefinition')
        .map((o) => o.metadata.name)
        .sort(),
      (await loadCrds()).map((crd) => crd.metadata.name).sort(),
    );
    const backend = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'gitops-backend') as
      | (KubeObject & {
          spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
        })
      | undefined;
    assert.equal(
      backend?.spec.template.spec.containers[0]?.env.find((e) => e.name === 'GITOPS_APPSTUDIO')?.value,
      'false',
    );
    const rules = objects.flatMap((o) =>
      o.kind === 'ClusterRole' || o.kind === 'Role'
        ? ((o as KubeObject & { rules: { apiGroups?: string[] }[] }).rules ?? [])
        : [],
    );
    assert.ok(!rules.some((r) => r.apiGroups?.some((g) => /appstudio|toolchain/.test(g))));
  });

  it('server-side apply cleanly, in order', async () => {
    assert.ok(objects.some((o) => o.kind === 'CustomResourceDefinition'));
    assert.ok(objects.some((o) => o.kind === 'Deployment' && o.metadata.name === 'gitops-backend'));
    assert.ok(objects.some((o) => o.kind === 'Deployment' && o.metadata.name === 'gitops-cluster-agent'));
    for (const object of objects) {
      // The harness installed these very CRD files already; re-applying them for real would make the API
      // server re-initialise their storage under the other test files, so they are only validated.
      const dryRun = object.kind === 'CustomResourceDefinition';
      await serverSideApply(kc, object, { fieldManager: 'manifests-test', force: true, dryRun });
    }
    assert.ok(await get(kc, '/apis/apps/v1/namespaces/gitops-service/deployments/gitops-backend'));
  });

  const can = (
    user: string,
    verb: string,
    resource: string,
    group: string,
    namespace?: string,
    groups?: string[],
  ) => isAllowed(kc, user, { verb, resource, group, namespace }, groups);
  /**
   * Waits until `user` may do it: the API server's RBAC authorizer reads roles and bindings from its cache, so
   * a grant applied a moment ago may not count yet. (A check that something is refused comes after a grant
   * of the same binding was seen, so it is not refused only because the cache lags.)
   */
  const allowed = (user: string, verb: string, resource: string, group: string, namespace?: string) =>
    untilAllowed(kc, user, { verb, resource, group, namespace });
  const agent = 'system:serviceaccount:gitops-service:gitops-cluster-agent';
  const backend = 'system:serviceaccount:gitops-service:gitops-backend';

  it('let the agent manage Argo CD objects only in its Argo CD namespace', async () => {
    await allowed(agent, 'patch', 'applications', 'argoproj.io', 'gitops-service-argocd');
    await allowed(agent, 'create', 'secrets', '', 'gitops-service-argocd');
    assert.equal(await can(agent, 'get', 'secrets', '', 'default'), false);
    assert.equal(await can(agent, 'patch', 'applications', 'argoproj.io', 'default'), false);
  });

  it("give the agent its engine instance's own database Secret and none of the backend's keys", () => {
    type Container = {
      env?: { name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
      volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
    };
    type PodSpec = {
      containers: Container[];
      volumes?: { name: string; configMap?: { name: string; optional?: boolean } }[];
    };
    const specOf = (name: string) =>
      (
        objects.find((o) => o.kind === 'Deployment' && o.metadata.name === name) as unknown as {
          spec: { template: { spec: PodSpec } };
        }
      ).spec.template.spec;
    const secretOf = (spec: PodSpec, variable: string) =>
      spec.containers[0]?.env?.find((e) => e.name === variable)?.valueFrom?.secretKeyRef;
    const agent = specOf('gitops-cluster-agent');
    const backend = specOf('gitops-backend');
    assert.deepEqual(secretOf(agent, 'DATABASE_URL'), { name: 'gitops-service-agent-database', key: 'url' });
    assert.equal(secretOf(agent, 'GITOPS_ENCRYPTION_KEYS'), undefined);
    assert.deepEqual(secretOf(backend, 'DATABASE_URL'), { name: 'gitops-service-database', key: 'url' });
    assert.deepEqual(secretOf(backend, 'GITOPS_ENCRYPTION_KEYS'), {
      name: 'gitops-service-encryption',
      key: 'keys',
    });
    // Both may verify PostgreSQL's certificate (sslrootcert), from a ConfigMap that need not exist.
    for (const spec of [agent, backend]) {
      assert.deepEqual(spec.volumes?.find((v) => v.name === 'postgres-ca')?.configMap, {
        name: 'gitops-service-postgres-ca',
        optional: true,
      });
      assert.deepEqual(
        spec.containers[0]?.volumeMounts?.find((m) => m.name === 'postgres-ca'),
        { name: 'postgres-ca', mountPath: '/etc/gitops-service/postgres-ca', readOnly: true },
      );
    }
  });

  it('let the backend watch user objects everywhere and create Operations only in the Argo CD namespace', async () => {
    await allowed(backend, 'watch', 'gitopsdeployments', 'managed-gitops.redhat.com');
    await allowed(backend, 'patch', 'gitopsdeployments/status', 'managed-gitops.redhat.com', 'tenant-x');
    await allowed(backend, 'create', 'operations', 'managed-gitops.redhat.com', 'gitops-service-argocd');
    assert.equal(await can(backend, 'create', 'operations', 'managed-gitops.redhat.com', 'tenant-x'), false);
    assert.equal(await can(backend, 'create', 'applications', 'argoproj.io', 'gitops-service-argocd'), false);
    // What only App Studio needs comes with components/appstudio (tier 4 runs it: argocd.test.ts).
    assert.equal(await can(backend, 'patch', 'environments', 'appstudio.redhat.com', 'tenant-x'), false);
    assert.equal(await can(backend, 'create', 'namespaces', ''), false);
    assert.equal(await can(backend, 'create', 'secrets', '', 'tenant-x'), false);
  });

  it('let a namespace editor use the user-facing kinds but never Operations', async () => {
    const ns = `editor-${Date.now().toString(36)}`;
    await create(kc, '/api/v1/namespaces', { metadata: { name: ns } });
    try {
      await create(kc, `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
        metadata: { name: 'jane-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'jane' }],
      });
      // The clusterrole-aggregation controller folds our rules into `edit`.
      await eventually('edit to include GitOpsDeployments', async () =>
        (await can('jane', 'create', 'gitopsdeployments', 'managed-gitops.redhat.com', ns))
          ? true
          : undefined,
      );
      // Folded in separately maybe: waited for too.
      await allowed('jane', 'create', 'gitopsdeploymentsyncruns', 'managed-gitops.redhat.com', ns);
      assert.equal(await can('jane', 'create', 'operations', 'managed-gitops.redhat.com', ns), false);
      assert.equal(
        await can('jane', 'get', 'operations', 'managed-gitops.redhat.com', 'gitops-service-argocd'),
        false,
      );
      assert.equal(
        await can('jane', 'create', 'gitopsdeployments', 'managed-gitops.redhat.com', 'default'),
        false,
      );
    } finally {
      await remove(kc, `/api/v1/namespaces/${ns}`);
    }
  });
});
