/**
 * The optional RHOAS operator component (manifests/components/rhoas-operator) is accepted by a real API
 * server and its RBAC is least privilege: checked with SubjectAccessReviews. Its namespaced objects are
 * applied into a namespace of this test (not gitops-service, which manifests.test.ts owns), so both files
 * may run at once.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { repoRoot } from '@gitops/local-env';
import { type KubeObject, loadKubeConfig, serverSideApply } from '@gitops/shared';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { create, get, isAllowed, remove, untilAllowed } from '../fixture/kube.ts';
import { kustomize } from '../fixture/manifests.ts';
import { randomSuffix } from '../fixture/system.ts';

const clusterPlural: Record<string, string> = {
  ClusterRole: 'clusterroles',
  ClusterRoleBinding: 'clusterrolebindings',
};

describe('the RHOAS operator component', () => {
  const kc = loadKubeConfig(process.env.KUBECONFIG);
  const namespace = `rhoas-manifests-${randomSuffix()}`;
  const operator = `system:serviceaccount:${namespace}:gitops-rhoas-operator`;
  let objects: KubeObject[] = [];

  beforeAll(async () => {
    objects = (await kustomize(join(repoRoot, 'manifests', 'components', 'rhoas-operator'))).map((o) => {
      const copy = structuredClone(o) as KubeObject & { subjects?: { namespace?: string }[] };
      if (copy.metadata.namespace === 'gitops-service') copy.metadata.namespace = namespace;
      for (const s of copy.subjects ?? []) if (s.namespace === 'gitops-service') s.namespace = namespace;
      return copy;
    });
    await create(kc, '/api/v1/namespaces', { metadata: { name: namespace } });
  });
  afterAll(async () => {
    for (const o of objects) {
      const plural = o.kind ? clusterPlural[o.kind] : undefined;
      if (plural) await remove(kc, `/apis/rbac.authorization.k8s.io/v1/${plural}/${o.metadata.name}`);
    }
    await remove(kc, `/api/v1/namespaces/${namespace}`);
  });

  it('server-side applies cleanly: the four CRDs, RBAC, a third Deployment with probes and its metrics Service', async () => {
    assert.deepEqual(
      objects
        .filter((o) => o.kind === 'CustomResourceDefinition')
        .map((o) => o.metadata.name)
        .sort(),
      [
        'cloudserviceaccountrequests.rhoas.redhat.com',
        'cloudservicesrequests.rhoas.redhat.com',
        'kafkaconnections.rhoas.redhat.com',
        'serviceregistryconnections.rhoas.redhat.com',
      ],
    );
    for (const object of objects) {
      // The harness installed these CRD files already: only validated here (see manifests.test.ts).
      const dryRun = object.kind === 'CustomResourceDefinition';
      await serverSideApply(kc, object, { fieldManager: 'manifests-test', force: true, dryRun });
    }
    const deployment = await get<{
      spec: {
        template: {
          spec: { containers: { command: string[]; readinessProbe?: unknown; livenessProbe?: unknown }[] };
        };
      };
    }>(kc, `/apis/apps/v1/namespaces/${namespace}/deployments/gitops-rhoas-operator`);
    const container = deployment?.spec.template.spec.containers[0];
    assert.deepEqual(container?.command, ['node', 'packages/rhoas-operator/src/main.ts']);
    assert.ok(container?.readinessProbe && container.livenessProbe);
    assert.ok(await get(kc, `/api/v1/namespaces/${namespace}/services/gitops-rhoas-operator-metrics`));
  });

  const can = (user: string, verb: string, resource: string, group: string, ns?: string) =>
    isAllowed(kc, user, { verb, resource, group, namespace: ns });

  /** Waits until `user` may do it (a grant applied a moment ago may not count yet: `untilAllowed`). */
  const allowed = (user: string, verb: string, resource: string, group: string, ns?: string) =>
    untilAllowed(kc, user, { verb, resource, group, namespace: ns });

  it('lets the operator do what it does, in any namespace', async () => {
    for (const plural of [
      'cloudservicesrequests',
      'cloudserviceaccountrequests',
      'kafkaconnections',
      'serviceregistryconnections',
    ]) {
      await allowed(operator, 'watch', plural, 'rhoas.redhat.com');
      await allowed(operator, 'patch', plural, 'rhoas.redhat.com', 'tenant-a');
      await allowed(operator, 'patch', `${plural}/status`, 'rhoas.redhat.com', 'tenant-a');
    }
    for (const verb of ['get', 'create', 'patch']) await allowed(operator, verb, 'secrets', '', 'tenant-a');
    await allowed(operator, 'create', 'events', '', 'tenant-a');
  });

  it('and nothing more: no listing, watching or deleting Secrets, no GitOps kinds, no deleting its kinds', async () => {
    for (const verb of ['list', 'watch', 'delete'])
      assert.equal(await can(operator, verb, 'secrets', '', 'tenant-a'), false, `${verb} secrets`);
    assert.equal(await can(operator, 'delete', 'kafkaconnections', 'rhoas.redhat.com', 'tenant-a'), false);
    assert.equal(await can(operator, 'create', 'kafkaconnections', 'rhoas.redhat.com', 'tenant-a'), false);
    assert.equal(
      await can(operator, 'get', 'gitopsdeployments', 'managed-gitops.redhat.com', 'tenant-a'),
      false,
    );
    assert.equal(await can(operator, 'get', 'configmaps', '', 'tenant-a'), false);
    assert.equal(await can(operator, 'update', 'customresourcedefinitions', 'apiextensions.k8s.io'), false);
  });
});
