import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { getApplication } from './application.repository.ts';
import { writeApplicationState } from './application-state.repository.ts';
import { getClusterUser } from './cluster-user.repository.ts';
import type { EngineInstanceRow } from './database.ts';
import { placeTenant } from './engine-instance.repository.ts';
import {
  insertExternalEnvironment,
  isManagedEnvironmentOnEngineInstance,
} from './managed-environment.repository.ts';
import {
  getSyncOperation,
  insertSyncOperation,
  markSyncOperationRequested,
  setSyncOperationOutcome,
} from './sync-operation.repository.ts';
import {
  completeApplicationAdoption,
  completeApplicationRelease,
  moveTenant,
} from './tenant-move.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenRepositoryCredentials,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

const move = (clusterUserId: string, to: EngineInstanceRow) =>
  testDb.db.transaction().execute((trx) => moveTenant(trx, clusterUserId, to.id));

/** What an agent of `instance` writes when Argo CD reports `status` as the application's health. */
const reportHealth = (application: { id: string }, status: string, instance: EngineInstanceRow) =>
  writeApplicationState(testDb.db, application.id, { health: { status } }, { engineInstanceId: instance.id });

/** Waiting operations as "instance/type/resource". */
async function waitingOperations(resourceIds: string[]): Promise<string[]> {
  const rows = await testDb.db
    .selectFrom('operation as o')
    .innerJoin('engine_instance as e', 'e.id', 'o.engine_instance_id')
    .select(['e.name', 'o.resource_type', 'o.resource_id'])
    .where('o.resource_id', 'in', resourceIds)
    .where('o.state', '=', 'Waiting')
    .execute();
  return rows.map((r) => `${r.name}/${r.resource_type}/${r.resource_id}`).sort();
}

async function placedTenant(on: EngineInstanceRow) {
  const tenant = await givenClusterUser(testDb.db);
  await testDb.db.transaction().execute((trx) => placeTenant(trx, tenant.id, on.name));
  return tenant;
}

describe('moving a tenant', () => {
  test('its rows point at the new instance; each application names the instance releasing it; both instances are told', async () => {
    const a = await givenEngineInstance(testDb.db, 'move-a');
    const b = await givenEngineInstance(testDb.db, 'move-b');
    const tenant = await placedTenant(a);
    const app = await givenApplication(testDb.db, { clusterUser: tenant, engineInstance: a });
    // Another tenant's application on the same instance: its state is written by a, never touched by the move.
    const neighbour = await givenApplication(testDb.db, {
      clusterUser: await placedTenant(a),
      engineInstance: a,
    });
    const credentials = await givenRepositoryCredentials(
      testDb.db,
      { clusterUserId: tenant.id, engineInstanceId: a.id },
      { url: 'https://example.com/repo.git', normalizedUrl: 'https://example.com/repo', secretName: 'creds' },
    );
    const { environment } = await testDb.db.transaction().execute((trx) =>
      insertExternalEnvironment(trx, {
        clusterUserId: tenant.id,
        name: 'env',
        credentials: {
          apiUrl: 'https://cluster.example.com',
          bearerTokenSealed: Buffer.from([1]),
          allowInsecureSkipTlsVerify: false,
          namespaces: ['x'],
          clusterResources: false,
          caData: null,
        },
      }),
    );

    const moved = await move(tenant.id, b);
    assert.ok(moved);
    assert.deepEqual([moved.from, moved.to, moved.applicationIds], [a.id, b.id, [app.id]]);
    assert.equal((await getClusterUser(testDb.db, tenant.id))?.engine_instance_id, b.id);
    const row = await getApplication(testDb.db, app.id);
    assert.deepEqual([row?.engine_instance_id, row?.releasing_engine_instance_id], [b.id, a.id]);
    assert.deepEqual(
      await waitingOperations([app.id, credentials.id, environment.id]),
      [
        `move-a/Application/${app.id}`,
        `move-a/ManagedEnvironment/${environment.id}`,
        `move-a/RepositoryCredentials/${credentials.id}`,
        `move-b/Application/${app.id}`,
        `move-b/ManagedEnvironment/${environment.id}`,
        `move-b/RepositoryCredentials/${credentials.id}`,
      ].sort(),
    );
    // While a still holds the Application, its cluster Secret stays on a too; b has it as the tenant's.
    assert.equal(await isManagedEnvironmentOnEngineInstance(testDb.db, environment.id, a.id), false);
    await testDb.db
      .updateTable('application')
      .set({ managed_environment_id: environment.id })
      .where('id', '=', app.id)
      .execute();
    assert.equal(await isManagedEnvironmentOnEngineInstance(testDb.db, environment.id, a.id), true);
    assert.equal(await isManagedEnvironmentOnEngineInstance(testDb.db, environment.id, b.id), true);

    // Only the instance holding the Application reports its state: a until it released it, then b.
    assert.equal(await reportHealth(app, 'Healthy', b), 'application-missing');
    assert.equal(await reportHealth(app, 'Healthy', a), 'changed');

    // a releases it: the column names b (adopting) and b is told, once.
    await testDb.db.deleteFrom('operation').where('resource_id', '=', app.id).execute();
    assert.equal(await completeApplicationRelease(testDb.db, app.id, a.id), true);
    assert.equal(await completeApplicationRelease(testDb.db, app.id, a.id), false);
    assert.equal((await getApplication(testDb.db, app.id))?.releasing_engine_instance_id, b.id);
    assert.deepEqual(await waitingOperations([app.id]), [`move-b/Application/${app.id}`]);
    // b created its Application: the move of this application is over.
    assert.equal(await completeApplicationAdoption(testDb.db, app.id, a.id), false);
    assert.equal(await completeApplicationAdoption(testDb.db, app.id, b.id), true);
    assert.equal((await getApplication(testDb.db, app.id))?.releasing_engine_instance_id, null);
    assert.equal(await reportHealth(app, 'Degraded', a), 'application-missing');
    assert.equal(await reportHealth(app, 'Degraded', b), 'changed');

    assert.equal(await reportHealth(neighbour, 'Healthy', a), 'changed');
    assert.equal(await reportHealth(neighbour, 'Degraded', b), 'application-missing');

    // Moving to where it is already does nothing.
    assert.equal(await move(tenant.id, b), undefined);
  });

  test('moved on before the release ended: the first instance still releases it; moved back: adopting there, nothing to release', async () => {
    const a = await givenEngineInstance(testDb.db, 'chain-a');
    const b = await givenEngineInstance(testDb.db, 'chain-b');
    const c = await givenEngineInstance(testDb.db, 'chain-c');
    const tenant = await placedTenant(a);
    const app = await givenApplication(testDb.db, { clusterUser: tenant, engineInstance: a });

    await move(tenant.id, b);
    await move(tenant.id, c);
    let row = await getApplication(testDb.db, app.id);
    // b never created it (it waited for a), so a is the one to release it, and c waits for a.
    assert.deepEqual([row?.engine_instance_id, row?.releasing_engine_instance_id], [c.id, a.id]);

    await move(tenant.id, a);
    row = await getApplication(testDb.db, app.id);
    // Back on a, which may still have it (or may have released it already): nothing to release, a makes sure
    // its Application is there (adopting) before the move is over.
    assert.deepEqual([row?.engine_instance_id, row?.releasing_engine_instance_id], [a.id, a.id]);
    assert.equal(await completeApplicationRelease(testDb.db, app.id, a.id), false);
    assert.equal(await completeApplicationAdoption(testDb.db, app.id, a.id), true);
  });

  test('an unfinished sync of a moved application is announced to the new instance and asked again; a finished one is not', async () => {
    const a = await givenEngineInstance(testDb.db, 'sync-a');
    const b = await givenEngineInstance(testDb.db, 'sync-b');
    const tenant = await placedTenant(a);
    const app = await givenApplication(testDb.db, { clusterUser: tenant, engineInstance: a });
    const sync = (revision: string) =>
      insertSyncOperation(testDb.db, {
        clusterUserId: tenant.id,
        applicationId: app.id,
        deploymentName: 'd',
        revision,
      });
    const finished = await sync('one');
    await setSyncOperationOutcome(testDb.db, finished.id, 'Succeeded', '');
    const running = await sync('two');
    await markSyncOperationRequested(testDb.db, running.id, 'uid-on-a');
    await move(tenant.id, b);
    assert.deepEqual(await waitingOperations([finished.id, running.id]), [
      `sync-b/SyncOperation/${running.id}`,
    ]);
    // Its request is forgotten (a release may withdraw it): asked again where Argo CD does not have it.
    const after = await getSyncOperation(testDb.db, running.id);
    assert.equal(after?.requested_at, null);
    assert.equal(after?.requested_application_uid, null);
    assert.notEqual((await getSyncOperation(testDb.db, finished.id))?.outcome, null);
  });

  test('an application written for the tenant while a move runs is moved too: placement and move never interleave', async () => {
    const a = await givenEngineInstance(testDb.db, 'race-a');
    const b = await givenEngineInstance(testDb.db, 'race-b');
    const tenant = await placedTenant(a);
    const { promise: held, resolve: release } = Promise.withResolvers<void>();
    const { promise: placed, resolve: placedSeen } = Promise.withResolvers<string>();
    // A reconcile: reads the tenant's instance, then (slowly) writes an application there.
    const writer = testDb.db.transaction().execute(async (trx) => {
      const placement = await placeTenant(trx, tenant.id, undefined);
      assert.ok('placed' in placement);
      placedSeen(placement.placed.id);
      await held;
      return await givenApplication(trx, { clusterUser: tenant, engineInstance: placement.placed });
    });
    assert.equal(await placed, a.id);
    // The move starts meanwhile; it must not pass the reconcile.
    const mover = move(tenant.id, b);
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    const app = await writer;
    await mover;
    assert.equal((await getApplication(testDb.db, app.id))?.engine_instance_id, b.id);
  });

  test('a tenant not placed yet is not moved', async () => {
    const b = await givenEngineInstance(testDb.db, 'unplaced-b');
    const tenant = await givenClusterUser(testDb.db);
    assert.equal(await move(tenant.id, b), undefined);
    assert.equal((await getClusterUser(testDb.db, tenant.id))?.engine_instance_id, null);
  });
});
