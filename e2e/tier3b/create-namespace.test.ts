/**
 * Tier 3b: `syncPolicy.syncOptions: [CreateNamespace=true]` with a real Argo CD. Argo CD creates the
 * destination namespace where the credentials it deploys with may create it: through an External environment
 * (the namespace one of its `namespaces`, or any for a cluster-wide one), with the environment's token. The
 * tenant's own namespace always exists, and Argo CD's own credentials never create a namespace for a tenant
 * (docs/api.md, GitOpsDeployment).
 */

import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import { describe, it } from 'vitest';
import { get, paths } from '../fixture/kube.ts';
import { gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';
import { randomSuffix } from '../fixture/system.ts';

const CREATE_NAMESPACE = { syncOptions: ['CreateNamespace=true' as const] };

describe('tier 3b: CreateNamespace=true with a real Argo CD', () => {
  const f = useRealSystem();

  it("into the tenant's own namespace, which exists: synced, in the tenant's main project", async () => {
    const tenant = await f.given.tenant('cns-own');
    const repo = await f.given.repository('cns-own-app', {
      'dev/config.yaml': manifest.configMap('cns-own-config', { where: 'own' }),
    });
    const gd = await f.when.deployed(tenant, 'own', gitSource(repo, 'dev'), { syncPolicy: CREATE_NAMESPACE });
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.equal((await f.expect.object(tenant, 'ConfigMap', 'cns-own-config')).data?.where, 'own');
    // The host is deployed to with Argo CD's own credentials: its project never permits a Namespace.
    assert.doesNotMatch((await f.expect.readApplication(gd))?.spec.project ?? '', /-cluster$/);
  });

  it('through a namespace-limited environment (clusterResources: false): Argo CD creates a listed namespace with its token; cluster-scoped objects of the repository stay refused', async ({
    annotate,
  }) => {
    // Given an environment limited to its namespace and one that does not exist yet, whose token may create
    // namespaces (and ClusterRoles: only Argo CD's namespaced cluster cache stands in the way of those)
    const tenant = await f.given.tenant('cns-lim');
    const target = await f.external.target('cns-lim-target', {
      createNamespaces: true,
      manageClusterRoles: true,
    });
    const created = `cns-new-${randomSuffix()}`;
    f.external.track(created);
    const limited = await f.external.environment(tenant, 'limited', target, {
      namespaces: [target.namespace, created],
      clusterResources: false,
    });
    const repo = await f.given.repository('cns-lim-app', {
      'dev/config.yaml': manifest.configMap('cns-lim-config', { where: 'created' }),
    });

    // When the tenant deploys into the namespace that does not exist, with CreateNamespace=true
    const gd = await f.when.deployed(tenant, 'to-new-namespace', gitSource(repo, 'dev'), {
      destination: { ...limited, namespace: created },
      syncPolicy: CREATE_NAMESPACE,
    });
    // Then Argo CD creates the namespace and deploys into it
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.ok(await get(f.system.kc, paths.namespace(created)), `namespace ${created} exists`);
    assert.equal((await f.expect.object(created, 'ConfigMap', 'cns-lim-config')).data?.where, 'created');
    assert.match((await f.expect.readApplication(gd))?.spec.project ?? '', /-cluster$/);

    // When the same tenant deploys a ClusterRole through that environment, also with CreateNamespace=true
    const roleName = `cns-role-${randomSuffix()}`;
    const withRole = await f.given.repository('cns-lim-role', {
      'dev/role.yaml': manifest.clusterRole(roleName),
    });
    const refused = await f.when.deployed(tenant, 'cluster-role', gitSource(withRole, 'dev'), {
      destination: limited,
      syncPolicy: CREATE_NAMESPACE,
    });
    // Then Argo CD refuses it (the environment manages no cluster-scoped object of the repository)
    const { status, condition } = await f.expect
      .deployment(refused)
      .reports(
        'Argo CD refuses the ClusterRole',
        /ClusterRole.{0,120}?can not be managed when in namespaced mode/,
      );
    await annotate(`Argo CD said: ${condition.message}`);
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(
      await get(f.system.kc, `/apis/rbac.authorization.k8s.io/v1/clusterroles/${roleName}`),
      undefined,
    );
  });

  it('a namespace the environment’s token may not create is not created; Argo CD’s error says what is missing', async ({
    annotate,
  }) => {
    // Given an environment whose token may administer only its own namespace, listing one that does not exist
    const tenant = await f.given.tenant('cns-deny');
    const target = await f.external.target('cns-deny-target');
    const missing = `cns-missing-${randomSuffix()}`;
    f.external.track(missing);
    const narrow = await f.external.environment(tenant, 'narrow', target, {
      namespaces: [target.namespace, missing],
    });
    const repo = await f.given.repository('cns-deny-app', {
      'dev/config.yaml': manifest.configMap('cns-deny-config', { where: 'missing' }),
    });

    // When the tenant deploys there with CreateNamespace=true
    const gd = await f.when.deployed(tenant, 'to-missing', gitSource(repo, 'dev'), {
      destination: { ...narrow, namespace: missing },
      syncPolicy: CREATE_NAMESPACE,
    });
    // Then the GitOpsDeployment carries Argo CD's error naming the token's missing permission in that namespace
    const forbidden = new RegExp(`cannot [a-z]+ resource .{0,80}in the namespace .?${missing}`);
    const { status, condition } = await f.expect.deployment(gd).reports('Argo CD’s "forbidden"', forbidden);
    await annotate(`Argo CD said: ${condition.message}`);
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(await get(f.system.kc, paths.namespace(missing)), undefined);
  });
});
