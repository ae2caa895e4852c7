/** Tier 3a: one AppProject per tenant, exactly the tenant's repos and destinations; drift is put back. */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { get, mergePatch, paths, remove } from '../fixture/kube.ts';
import { usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

interface AppProject {
  metadata: { name: string };
  spec: {
    sourceRepos?: string[];
    destinations?: { name?: string; server?: string; namespace?: string }[];
    clusterResourceWhitelist?: unknown[];
  };
}

describe('tenant isolation and drift repair (tier 3a)', () => {
  const f = usePlayedArgoCdSystem();
  let tenantA: string;
  let tenantB: string;

  beforeAll(async () => {
    tenantA = await f.given.tenant('tenant-a');
    tenantB = await f.given.tenant('tenant-b');
  });

  const projectOf = async (namespace: string) => {
    const row = await eventually(`tenant row of ${namespace}`, () =>
      f.system.db
        .selectFrom('cluster_user')
        .select('id')
        .where('namespace_name', '=', namespace)
        .executeTakeFirst(),
    );
    return `app-project-${row.id}`;
  };

  it('gives each tenant its own AppProject with exactly its repositories and its own namespace', async () => {
    const a1 = await f.when.deployed(
      tenantA,
      'one',
      { repoURL: 'https://github.com/tenant-a/first', path: 'p' },
      { type: 'automated' },
    );
    await f.when.deployed(
      tenantA,
      'two',
      { repoURL: 'https://github.com/tenant-a/second', path: 'p' },
      { type: 'manual' },
    );
    await f.when.deployed(
      tenantB,
      'one',
      { repoURL: 'https://github.com/tenant-b/only', path: 'p' },
      { type: 'automated' },
    );
    const projectA = await projectOf(tenantA);
    const projectB = await projectOf(tenantB);
    assert.notEqual(projectA, projectB);

    const a = await eventually('tenant A AppProject with both repositories', async () => {
      const project = await get<AppProject>(
        f.system.kc,
        paths.appProject(f.system.argoCdNamespace, projectA),
      );
      return project?.spec.sourceRepos?.length === 2 ? project : undefined;
    });
    assert.deepEqual(a.spec.sourceRepos, [
      'https://github.com/tenant-a/first',
      'https://github.com/tenant-a/second',
    ]);
    assert.deepEqual(a.spec.destinations, [{ name: 'in-cluster', namespace: tenantA }]);
    assert.deepEqual(a.spec.clusterResourceWhitelist ?? [], []);

    const b = await eventually('tenant B AppProject', () =>
      get<AppProject>(f.system.kc, paths.appProject(f.system.argoCdNamespace, projectB)),
    );
    assert.deepEqual(b.spec.sourceRepos, ['https://github.com/tenant-b/only']);
    assert.deepEqual(b.spec.destinations, [{ name: 'in-cluster', namespace: tenantB }]);

    const appA = await f.expect.application(a1);
    assert.equal(appA.spec.project, projectA);
  });

  it("rejects a deployment that names another tenant's namespace without an environment", async () => {
    await assert.rejects(
      f.system.createGitOpsDeployment(tenantA, 'sneaky', {
        source: { repoURL: 'https://github.com/tenant-a/first', path: 'p' },
        destination: { namespace: tenantB },
        type: 'automated',
      }),
      /the environment field should not be empty when the namespace is non-empty/,
    );
  });

  it("removes the tenant's AppProject with its last deployment", async () => {
    const projectB = await projectOf(tenantB);
    await remove(f.system.kc, paths.gitopsDeployment(tenantB, 'one'));
    await eventually('tenant B AppProject to be deleted', async () =>
      (await get(f.system.kc, paths.appProject(f.system.argoCdNamespace, projectB))) ? undefined : true,
    );
    // Tenant A is untouched.
    assert.ok(await get(f.system.kc, paths.appProject(f.system.argoCdNamespace, await projectOf(tenantA))));
  });

  it('puts back an Application a user edited or deleted in the Argo CD namespace', async () => {
    const gd = await f.when.deployed(tenantA, 'guarded', {
      repoURL: 'https://github.com/tenant-a/first',
      path: 'guarded',
    });
    const path = paths.application(f.system.argoCdNamespace, (await f.expect.application(gd)).metadata.name);

    await mergePatch(f.system.kc, path, {
      spec: { source: { path: 'hijacked' }, destination: { namespace: tenantB } },
    });
    // Then the edited Application repaired
    const repaired = await f.expect.application(
      gd,
      (app) => app.spec.source.path === 'guarded' && app.spec.destination.namespace === tenantA,
    );
    assert.equal(repaired.spec.destination.name, 'in-cluster');

    await remove(f.system.kc, path);
    // Then the deleted Application recreated
    const recreated = await f.expect.application(
      gd,
      (app) => !app.metadata.deletionTimestamp && app.metadata.uid !== repaired.metadata.uid,
    );
    assert.equal(recreated.spec.source.path, 'guarded');
    assert.deepEqual(f.system.crashes, []);
  });
});
