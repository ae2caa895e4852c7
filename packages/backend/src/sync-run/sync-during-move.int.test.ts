/**
 * A SyncRun requested at the moment its tenant moves: whatever the order of the two transactions, the
 * engine instance that now holds the application is told about the sync, so it runs. Before, the request
 * announced the sync from the application row read before a concurrent move committed: the instance the
 * tenant left was told, which leaves syncs of moved applications to their new instance, and the new one
 * never heard of it (the SyncRun stayed Pending for good; chaos seed 463140204). The other order (the
 * request's transaction first) was safe already: its sync_operation insert holds a key-share lock on the
 * application row, which the move's FOR UPDATE waits for, and the move then hands the sync over itself.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { type Database, getApplication, moveTenant } from '@gitops/db';
import { givenTenantToMove, useTestDatabase } from '@gitops/db/testing';
import type { Kysely } from 'kysely';
import { describe, test } from 'vitest';
import { requestSync } from './sync-run.store.ts';

const testDb = useTestDatabase();

/** The SyncRun's request, from the application row as the reconcile read it (before anything below). */
const request = (
  db: Kysely<Database>,
  tenant: { namespace_name: string; namespace_uid: string },
  application: Parameters<typeof requestSync>[1]['application'],
) =>
  requestSync(db, {
    syncRun: { namespace: tenant.namespace_name, name: 'run', uid: randomUUID() },
    namespaceUid: tenant.namespace_uid,
    application,
    deploymentName: 'd',
    revision: '',
  });

/** The instances told about this sync (SyncOperation operations of its row). */
async function instancesTold(db: Kysely<Database>, syncOperationId: string) {
  const rows = await db
    .selectFrom('operation')
    .select('engine_instance_id')
    .where('resource_type', '=', 'SyncOperation')
    .where('resource_id', '=', syncOperationId)
    .execute();
  return new Set(rows.map((r) => r.engine_instance_id));
}

describe('a SyncRun requested while its tenant moves', () => {
  test('the move commits first: the sync is announced to the new instance, not from the row read before', async () => {
    const { b, tenant, application } = await givenTenantToMove(testDb.db);
    // The reconcile read the row (on A); the move commits; then the request is written.
    const readBefore = await getApplication(testDb.db, application.id);
    assert.ok(readBefore);
    await testDb.db.transaction().execute((trx) => moveTenant(trx, tenant.id, b.id));
    const result = await request(testDb.db, tenant, readBefore);
    assert.ok(result.created);
    assert.deepEqual(await instancesTold(testDb.db, result.syncOperation.id), new Set([b.id]));
  });
});
