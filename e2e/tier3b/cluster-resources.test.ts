/**
 * Tier 3b: cluster-scoped objects (a ClusterRole) with a real Argo CD. Only a GitOpsDeploymentManagedEnvironment
 * that allows cluster resources (`clusterResources: true`) lets them through, bounded by its token's RBAC; the
 * tenant's own namespace (Argo CD's `in-cluster`, deployed with Argo CD's own credentials) and an environment
 * with `clusterResources: false` refuse them (docs/api.md "Argo CD objects the agent owns").
 */

import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import { GROUP_VERSION, get, paths, remove } from '../fixture/kube.ts';
import { gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';
import { randomSuffix } from '../fixture/system.ts';

const RBAC = '/apis/rbac.authorization.k8s.io/v1';

/** A ClusterRole that may read ConfigMaps. */
const clusterRoleManifest = (name: string) =>
  manifest.clusterRole(name, [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }]);

describe('tier 3b: cluster-scoped resources with a real Argo CD', () => {
  const f = useRealSystem();

  const clusterRole = (name: string) => get(f.system.kc, `${RBAC}/clusterroles/${name}`);

  it('deploys a ClusterRole through an environment with clusterResources: true, never to the tenant’s own namespace', async ({
    annotate,
  }) => {
    // Given a tenant with an environment that allows cluster resources, whose token may manage ClusterRoles
    const tenant = await f.given.tenant('cres');
    const target = await f.external.target('cres-target', { manageClusterRoles: true });
    const destination = await f.external.environment(tenant, 'cluster-admin-ish', target, {
      clusterResources: true,
    });
    const roleName = `cres-role-${randomSuffix()}`;
    const repo = await f.given.repository('cres-app', {
      'dev/role.yaml': clusterRoleManifest(roleName),
      'dev/config.yaml': manifest.configMap('cres-config', { where: 'target' }),
    });

    // When the tenant deploys the ClusterRole and a ConfigMap through it
    const source = gitSource(repo, 'dev');
    const gd = await f.when.deployed(tenant, 'with-cluster-role', source, { destination });
    // Then Argo CD syncs both with the environment's credentials
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.ok(await clusterRole(roleName), 'the ClusterRole exists');
    const cm = await f.expect.object(target.namespace, 'ConfigMap', 'cres-config');
    assert.equal(cm.data?.where, 'target');
    // and its Application is in the tenant's cluster-resource project, which never lists in-cluster
    const app = await f.expect.readApplication(gd);
    assert.match(app?.spec.project ?? '', /^app-project-.+-cluster$/);
    const project = await get<KubeObject & { spec: { destinations: { name: string }[] } }>(
      f.system.kc,
      paths.appProject(f.system.argoCdNamespace, app?.spec.project ?? ''),
    );
    assert.ok(project?.spec.destinations.every((d) => d.name !== 'in-cluster'));

    // When the same tenant deploys the same repository to its own namespace (Argo CD's in-cluster)
    const ownRoleName = `cres-own-${randomSuffix()}`;
    const own = await f.given.repository('cres-own', {
      'dev/role.yaml': clusterRoleManifest(ownRoleName),
      'dev/config.yaml': manifest.configMap('cres-config', { where: 'own' }),
    });
    const refused = await f.when.deployed(tenant, 'to-own-namespace', gitSource(own, 'dev'));
    // Then Argo CD refuses the ClusterRole as not permitted in the tenant's project, and creates none
    const status = await f.expect
      .deployment(refused)
      .is('Argo CD’s "not permitted"', (s) => /is not permitted in project/.test(JSON.stringify(s)));
    const said = /resource [^"]*ClusterRole is not permitted in project [^"\s]*/.exec(JSON.stringify(status));
    await annotate(`Argo CD said: ${said?.[0] ?? JSON.stringify(status)}`);
    assert.ok(said, JSON.stringify(status));
    assert.doesNotMatch(said[0], /-cluster$/);
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(await clusterRole(ownRoleName), undefined);

    // When the tenant deletes the deployment and then the environment
    await f.when.deleted(gd);
    // Then Argo CD prunes the ClusterRole (through the cluster-resource project, kept until then)
    await eventually('ClusterRole pruned', async () => ((await clusterRole(roleName)) ? undefined : true));
    await remove(
      f.system.kc,
      `/apis/${GROUP_VERSION}/namespaces/${tenant}/gitopsdeploymentmanagedenvironments/cluster-admin-ish`,
    );
    // and the cluster-resource project goes, while the main project stays for the other deployment
    await eventually('cluster-resource project deleted', async () =>
      (await get(f.system.kc, paths.appProject(f.system.argoCdNamespace, app?.spec.project ?? ''))) ===
      undefined
        ? true
        : undefined,
    );
    const mainProject = (app?.spec.project ?? '').replace(/-cluster$/, '');
    assert.ok(await get(f.system.kc, paths.appProject(f.system.argoCdNamespace, mainProject)));
  });

  it('an environment with clusterResources: false refuses a ClusterRole', async ({ annotate }) => {
    // Given a tenant whose environment does not allow cluster resources (the token could create ClusterRoles)
    const tenant = await f.given.tenant('cres-off');
    const target = await f.external.target('cres-off-target', { manageClusterRoles: true });
    const destination = await f.external.environment(tenant, 'namespaced', target, {
      clusterResources: false,
    });
    const roleName = `cres-off-role-${randomSuffix()}`;
    const repo = await f.given.repository('cres-off-app', {
      'dev/role.yaml': clusterRoleManifest(roleName),
      'dev/config.yaml': manifest.configMap('cres-off-config', { where: 'target' }),
    });

    // When the tenant deploys the ClusterRole through it
    const source = gitSource(repo, 'dev');
    const gd = await f.when.deployed(tenant, 'cluster-role-refused', source, { destination });
    // Then Argo CD refuses it (its cluster cache manages no cluster-level object in namespaced mode), and
    // no ClusterRole is created
    const refusal =
      /ClusterRole.{0,120}?(is not permitted in project|can not be managed when in namespaced mode)/;
    const { status, condition: said } = await f.expect
      .deployment(gd)
      .reports('an Argo CD refusal of the ClusterRole', refusal);
    await annotate(`Argo CD said (${said.type}): ${said.message}`);
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(await clusterRole(roleName), undefined);
  });
});
