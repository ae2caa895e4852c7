import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  ensureWorkspaceEnvironment,
  insertApplication,
  upsertClusterUser,
  upsertEngineInstance,
} from '@gitops/db';
import { createSilentLogger } from '@gitops/shared';
import { describe, test } from 'vitest';
import { sweepDeletedTenants } from './tenant-sweep.ts';
import { useBackendFixture } from './testing/backend-fixture.ts';

describe('tenant sweep', () => {
  const f = useBackendFixture();

  const tenantExists = async (id: string) =>
    (await f.db.selectFrom('cluster_user').select('id').where('id', '=', id).executeTakeFirst()) !==
    undefined;

  test('removes empty tenants whose namespace is gone or re-created, and keeps the others', async () => {
    // A live tenant: its namespace exists with its uid (nothing else left: it stays anyway).
    const live = await f.createNamespace('sweep-live');
    const liveTenant = await upsertClusterUser(f.db, { uid: live.uid, name: live.name });
    await ensureWorkspaceEnvironment(f.db, { id: liveTenant.id, namespaceName: live.name });
    // A tenant whose namespace no longer exists, with only its Workspace environment left.
    const goneName = `sweep-gone-${randomUUID().slice(0, 8)}`;
    const goneTenant = await upsertClusterUser(f.db, { uid: randomUUID(), name: goneName });
    await ensureWorkspaceEnvironment(f.db, { id: goneTenant.id, namespaceName: goneName });
    // A tenant of an earlier namespace with the same name as a live one (deleted and re-created: new uid).
    const earlierTenant = await upsertClusterUser(f.db, { uid: randomUUID(), name: live.name });
    // A tenant whose namespace is gone but who still has an application row (its delete is not done yet).
    const busyName = `sweep-busy-${randomUUID().slice(0, 8)}`;
    const busyTenant = await upsertClusterUser(f.db, { uid: randomUUID(), name: busyName });
    const engine = await upsertEngineInstance(f.db, {
      name: `sweep-${randomUUID()}`,
      namespaceName: 'argocd',
      namespaceUid: randomUUID(),
      clusterIdentity: 'test',
    });
    await insertApplication(f.db, {
      name: `gitopsdepl-${randomUUID()}`,
      clusterUserId: busyTenant.id,
      engineInstanceId: engine.id,
      managedEnvironmentId: null,
      spec: { source: { repoURL: 'https://example.com/repo', path: 'dev' } },
    });

    const removed = await sweepDeletedTenants(f.db, f.kc, new AbortController().signal, createSilentLogger());

    assert.equal(removed, 2);
    assert.equal(await tenantExists(goneTenant.id), false);
    assert.equal(await tenantExists(earlierTenant.id), false);
    assert.equal(await tenantExists(liveTenant.id), true);
    assert.equal(await tenantExists(busyTenant.id), true);
    // The removed tenant's Workspace environment went with it (cascade); the live one's stayed.
    const environments = await f.db
      .selectFrom('managed_environment')
      .select('cluster_user_id')
      .where('cluster_user_id', 'in', [goneTenant.id, liveTenant.id])
      .execute();
    assert.deepEqual(
      environments.map((e) => e.cluster_user_id),
      [liveTenant.id],
    );
  });
});
