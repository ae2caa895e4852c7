/**
 * A GitOpsDeployment deleted at the moment its tenant moves (issue 37, item 7): whatever the order of the two
 * transactions, the application is deleted by the instance that holds its Argo CD Application, with pruning.
 * Before, the delete read the row before a concurrent move committed and deleted it after: announced to the
 * instance the tenant left, which could already have released the Application without pruning, so its
 * resources were left to no Argo CD. Both interleavings, made deterministic with row locks held open.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { type ApiCrMappingRow, type Database, moveTenant } from '@gitops/db';
import {
  givenOwnedOperation,
  givenTenantToMove,
  openTransaction,
  stillPending,
  useTestDatabase,
} from '@gitops/db/testing';
import type { Kysely } from 'kysely';
import { describe, test } from 'vitest';
import { deleteMappedApplications } from './application.store.ts';

const testDb = useTestDatabase();

/** A tenant on instance A with one deployment: its application row and the mapping of its GitOpsDeployment. */
async function givenDeployment(db: Kysely<Database>) {
  const { a, b, tenant, application } = await givenTenantToMove(db);
  await db.transaction().execute((trx) =>
    givenOwnedOperation(trx, {
      tenant,
      engineInstanceId: a.id,
      cr: { uid: randomUUID(), name: 'd', namespace: tenant.namespace_name },
      row: { kind: 'GitOpsDeployment', applicationId: application.id },
    }),
  );
  const mappings = (await db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('application_id', '=', application.id)
    .execute()) as ApiCrMappingRow[];
  return { a, b, tenant, application, mappings };
}

describe('a deployment deleted while its tenant moves', () => {
  test('the move commits first: the delete waits for the release (the new instance deletes it, pruning)', async () => {
    const { b, tenant, application, mappings } = await givenDeployment(testDb.db);
    const move = openTransaction(testDb.db, (trx) => moveTenant(trx, tenant.id, b.id));
    await move.ready;
    const deleting = testDb.db.transaction().execute((trx) => deleteMappedApplications(trx, mappings));
    // The delete waits for the move's row lock…
    assert.equal(await stillPending(deleting), true, 'the delete did not wait for the move');
    move.release();
    assert.deepEqual((await move.done)?.applicationIds, [application.id]);
    // …and then sees the row as it moved: it waits for the release instead of deleting under it.
    const result = await deleting;
    assert.deepEqual(result, { deleted: [], waitingForRelease: 1 });
    const row = await testDb.db
      .selectFrom('application')
      .selectAll()
      .where('id', '=', application.id)
      .executeTakeFirst();
    assert.ok(row, 'the row was deleted while its Argo CD Application was being released');
    assert.equal(row.engine_instance_id, b.id);
  });

  test('the delete commits first: the move leaves the row alone, and the instance holding it is told', async () => {
    const { a, b, tenant, mappings } = await givenDeployment(testDb.db);
    const deleting = openTransaction(testDb.db, (trx) => deleteMappedApplications(trx, mappings));
    await deleting.ready;
    const moving = testDb.db.transaction().execute((trx) => moveTenant(trx, tenant.id, b.id));
    assert.equal(await stillPending(moving), true, 'the move did not wait for the delete');
    deleting.release();
    const result = await deleting.done;
    assert.equal(result.deleted.length, 1);
    const announced = await testDb.db
      .selectFrom('operation')
      .select('engine_instance_id')
      .where('id', '=', result.deleted[0]!.operationId)
      .executeTakeFirstOrThrow();
    // Told to the instance that holds its Application (the tenant's, before the move): it deletes with pruning.
    assert.equal(announced.engine_instance_id, a.id);
    const moved = await moving;
    assert.deepEqual(moved?.applicationIds, []);
  });
});
