import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { operationCrName } from '@gitops/api';
import { completeOperation, getOperation, type OperationRow, startOperation } from '@gitops/db';
import {
  createTestDatabase,
  givenEngineInstance,
  givenOperation,
  type TestDatabase,
} from '@gitops/db/testing';
import { createSilentLogger, type KubeObject } from '@gitops/shared';
import { handInformer } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  CR_SWEEP_GRACE_MS,
  collectFinishedOperations,
  sweepFinishedOperationCrs,
  sweepOperations,
} from './operation.sweeps.ts';

describe('operation sweeps', () => {
  let database: TestDatabase;
  let engineInstanceId: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    engineInstanceId = (await givenEngineInstance(database.db, `sweeps-${randomUUID()}`)).id;
  });
  afterAll(async () => {
    await database?.destroy();
  });

  const givenApplicationOperation = (): Promise<OperationRow> =>
    givenOperation(database.db, { engineInstanceId, resourceType: 'Application', resourceId: randomUUID() });
  const age = (id: string, column: 'next_attempt_at' | 'last_attempt_at' | 'finished_at', interval: string) =>
    database.db
      .updateTable('operation')
      .set({ [column]: sql<Date>`now() - ${interval}::interval` })
      .where('id', '=', id)
      .execute();

  it('queues due Waiting operations and hands stale In_Progress ones not held by this process back', async () => {
    const waiting = await givenApplicationOperation();
    await age(waiting.id, 'next_attempt_at', '1 minute');
    const stale = await givenApplicationOperation();
    await startOperation(database.db, stale.id);
    await age(stale.id, 'last_attempt_at', '1 hour');
    const held = await givenApplicationOperation();
    await startOperation(database.db, held.id);
    await age(held.id, 'last_attempt_at', '1 hour');
    // Created last, just before the sweep: "fresh" means within the 2 s grace, whatever the machine's speed.
    const fresh = await givenApplicationOperation();

    const queued: string[] = [];
    await sweepOperations({
      db: database.db,
      engineInstanceId,
      logger: createSilentLogger(),
      staleAfterMs: 60_000,
      holds: (id) => id === held.id,
      enqueueResource: (_type, id) => queued.push(id),
    });
    assert.ok(queued.includes(waiting.resource_id));
    assert.ok(
      !queued.includes(fresh.resource_id),
      'a Waiting row is left to its Operation CR for a few seconds',
    );
    assert.ok(queued.includes(stale.resource_id));
    assert.ok(!queued.includes(held.resource_id));
    assert.equal((await getOperation(database.db, stale.id))?.state, 'Waiting');
    assert.equal((await getOperation(database.db, held.id))?.state, 'In_Progress');
  });

  it('deletes finished operations of its engine instance older than the retention, and only those', async () => {
    const old = await givenApplicationOperation();
    await startOperation(database.db, old.id);
    await completeOperation(database.db, old.id);
    await age(old.id, 'finished_at', '2 days');
    const recent = await givenApplicationOperation();
    await startOperation(database.db, recent.id);
    await completeOperation(database.db, recent.id);

    // An old finished operation of another engine instance (another agent's) is not ours to collect.
    const otherInstance = await givenEngineInstance(database.db, `other-${randomUUID()}`);
    const theirs = await givenOperation(database.db, {
      engineInstanceId: otherInstance.id,
      resourceType: 'Application',
      resourceId: randomUUID(),
    });
    await startOperation(database.db, theirs.id);
    await completeOperation(database.db, theirs.id);
    await age(theirs.id, 'finished_at', '2 days');

    const deleted = await collectFinishedOperations(
      database.db,
      engineInstanceId,
      24 * 3_600_000,
      new AbortController().signal,
    );
    assert.equal(deleted, 1);
    assert.equal(await getOperation(database.db, old.id), undefined);
    assert.equal((await getOperation(database.db, recent.id))?.state, 'Completed');
    assert.equal((await getOperation(database.db, theirs.id))?.state, 'Completed');
  });

  it('hands over the cached Operation CRs of finished operations of its instance, past the grace, named as the relay names them', async () => {
    const now = Date.now();
    const old = new Date(now - CR_SWEEP_GRACE_MS - 1_000).toISOString();
    const cr = (id: string, created = old, name = operationCrName(id)): KubeObject => ({
      apiVersion: 'managed-gitops.redhat.com/v1alpha1',
      kind: 'Operation',
      metadata: { name, namespace: 'argocd', creationTimestamp: created },
      spec: { operationID: id },
    });
    const finished = async (instance = engineInstanceId) => {
      const row = await givenOperation(database.db, {
        engineInstanceId: instance,
        resourceType: 'Application',
        resourceId: randomUUID(),
      });
      await startOperation(database.db, row.id);
      await completeOperation(database.db, row.id);
      return row.id;
    };
    const leftBehind = await finished();
    const justCreated = await finished();
    const renamed = await finished();
    const waiting = (await givenApplicationOperation()).id;
    const otherInstance = await givenEngineInstance(database.db, `other-${randomUUID()}`);
    const theirs = await finished(otherInstance.id);

    const crs = handInformer();
    crs.put(cr(leftBehind));
    crs.put(cr(justCreated, new Date(now).toISOString()));
    crs.put(cr(renamed, old, `by-hand-${renamed}`));
    crs.put(cr(waiting));
    crs.put(cr(theirs));
    crs.put(cr('not-a-uuid', old, 'operation-not-a-uuid'));
    const queued: string[] = [];
    await sweepFinishedOperationCrs({
      db: database.db,
      engineInstanceId,
      operationCrs: crs.informer,
      enqueueCr: (key) => queued.push(key),
      now,
    });
    assert.deepEqual(queued, [`argocd/${operationCrName(leftBehind)}`]);
  });
});
