/**
 * What the admin CLI reads and writes (packages/cli): the sealed columns (list, compare-and-set, key usage),
 * operations stuck or failed and an operator's retry, and a tenant's deployments with their latest operation.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { beforeAll, describe, test } from 'vitest';
import { insertApiCrMapping } from './api-cr-mapping.repository.ts';
import type { Database, EngineInstanceRow } from './database.ts';
import { placeTenant } from './engine-instance.repository.ts';
import { insertExternalEnvironment } from './managed-environment.repository.ts';
import { getOperation, insertOperation, type OperationRequest } from './operation.repository.ts';
import {
  listFailedOperationIds,
  listOperationsNeedingAttention,
  retryOperationNow,
} from './operation-admin.repository.ts';
import { completeOperation, failOperation, startOperation } from './operation-lifecycle.repository.ts';
import {
  listSealedKeyUsage,
  listSealedValues,
  replaceSealedValue,
  SEALED_COLUMNS,
  sealedColumnName,
} from './sealed-values.repository.ts';
import { createSealer, SealContext } from './sealing.ts';
import { getTenantInView } from './tenant-overview.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenListeningAgentSession,
  givenRepositoryCredentials,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();
let db: Kysely<Database>;
beforeAll(() => {
  db = testDb.db;
});

const keyA = { id: 'key-a', key: randomBytes(32) };
const keyB = { id: 'key-b', key: randomBytes(32) };
const underA = createSealer({ keys: [keyA], activeKeyId: keyA.id });

const column = (table: string, name: string) =>
  SEALED_COLUMNS.find((c) => c.table === table && c.column === name)!;

describe('sealed columns', () => {
  test('lists every _sealed column with the context it is sealed with', () => {
    assert.deepEqual(SEALED_COLUMNS.map(sealedColumnName), [
      'cluster_credentials.bearer_token_sealed',
      'repository_credentials.username_sealed',
      'repository_credentials.password_sealed',
      'repository_credentials.ssh_private_key_sealed',
    ]);
    assert.equal(column('cluster_credentials', 'bearer_token_sealed').context, SealContext.bearerToken);
  });

  test('pages through non-NULL values, replaces one only while it is unchanged, and counts values per key', async () => {
    const tenant = await givenClusterUser(db);
    const instance = await givenEngineInstance(db);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const row = await givenRepositoryCredentials(
        db,
        { clusterUserId: tenant.id, engineInstanceId: instance.id },
        { url: `https://git.example/r${i}.git`, secretName: `s${i}` },
        { sealer: underA, username: `user-${i}`, password: i === 2 ? undefined : `pw-${i}` },
      );
      ids.push(row.id);
    }
    const usernames = column('repository_credentials', 'username_sealed');
    const first = await listSealedValues(db, usernames, { limit: 2 });
    const rest = await listSealedValues(db, usernames, { afterId: first.at(-1)!.id, limit: 2 });
    assert.deepEqual([...first, ...rest].map((v) => v.id).sort(), [...ids].sort());
    assert.equal(
      (await listSealedValues(db, column('repository_credentials', 'password_sealed'), { limit: 10 })).length,
      2,
      'NULL values are not listed',
    );

    const underB = createSealer({ keys: [keyB, keyA], activeKeyId: keyB.id });
    const target = first[0]!;
    const resealed = underB.seal(underB.open(target.value, SealContext.username), SealContext.username);
    assert.equal(
      await replaceSealedValue(db, usernames, target.id, randomBytes(40), resealed),
      false,
      'a value that changed meanwhile is left alone',
    );
    assert.equal(await replaceSealedValue(db, usernames, target.id, target.value, resealed), true);
    const [after] = await listSealedValues(db, usernames, { limit: 1 });
    assert.equal(underB.keyIdOf(after!.value), keyB.id);

    const usage = (await listSealedKeyUsage(db)).filter((u) => u.column === usernames);
    assert.deepEqual(usage.map((u) => [u.keyId, u.count]).sort(), [
      ['key-a', 2],
      ['key-b', 1],
    ]);
    for (const u of usage) assert.match(underB.openString(u.sample.value, SealContext.username), /^user-\d$/);
  });

  test('an External environment token counts under its key', async () => {
    const tenant = await givenClusterUser(db);
    await db.transaction().execute((trx) =>
      insertExternalEnvironment(trx, {
        clusterUserId: tenant.id,
        name: 'env',
        credentials: {
          apiUrl: 'https://cluster.example:6443',
          bearerTokenSealed: underA.seal('token', SealContext.bearerToken),
          allowInsecureSkipTlsVerify: false,
          namespaces: [],
          clusterResources: false,
        },
      }),
    );
    const tokens = (await listSealedKeyUsage(db)).filter(
      (u) => u.column.table === 'cluster_credentials' && u.keyId === keyA.id,
    );
    assert.equal(tokens.length, 1);
    assert.ok(tokens[0]!.count >= 1);
  });
});

describe('operations that need attention, and retrying them', () => {
  let instance: EngineInstanceRow;
  let other: EngineInstanceRow;
  beforeAll(async () => {
    instance = await givenEngineInstance(db, `attention-${randomUUID().slice(0, 8)}`);
    other = await givenEngineInstance(db, `attention-other-${randomUUID().slice(0, 8)}`);
  });

  const change = (engineInstanceId = instance.id, resourceId = randomUUID()): OperationRequest => ({
    engineInstanceId,
    resourceType: 'Application',
    resourceId,
    ownerCr: { kind: 'GitOpsDeployment', namespace: 'jane', name: 'app', uid: randomUUID() },
  });
  const announce = async (request: OperationRequest) =>
    (await db.transaction().execute((trx) => insertOperation(trx, request))).operation;
  async function failed(request = change()) {
    const operation = await announce(request);
    assert.equal((await startOperation(db, operation.id)).status, 'started');
    await failOperation(db, operation.id, 'failed after 10 attempts: the Application is invalid');
    return operation;
  }

  test('lists unfinished operations older than the threshold and Failed ones, with their instance and whether an agent listens', async () => {
    const waiting = await announce(change());
    const failedOne = await failed();
    const done = await announce(change());
    await startOperation(db, done.id);
    await completeOperation(db, done.id);
    const elsewhere = await failed(change(other.id));

    const ids = async (filter: Parameters<typeof listOperationsNeedingAttention>[1]) =>
      (await listOperationsNeedingAttention(db, filter)).map((o) => o.id);
    // Created before this statement: older than 0 ms, younger than an hour.
    assert.deepEqual(await ids({ stuckForMs: 0, engineInstanceName: instance.name }), [waiting.id]);
    assert.deepEqual(await ids({ stuckForMs: 3_600_000, engineInstanceName: instance.name }), []);
    assert.deepEqual(await ids({ failed: true, engineInstanceName: instance.name }), [failedOne.id]);
    assert.deepEqual(await ids({ stuckForMs: 0, failed: true, engineInstanceName: instance.name }), [
      waiting.id,
      failedOne.id,
    ]);
    assert.ok((await ids({ failed: true })).includes(elsewhere.id));
    assert.deepEqual(await ids({}), []);

    const [row] = await listOperationsNeedingAttention(db, {
      failed: true,
      engineInstanceName: instance.name,
    });
    assert.equal(row!.engine_instance_name, instance.name);
    assert.equal(row!.agent_listening, false);
    assert.equal(row!.owner_namespace, 'jane');
    const agent = await givenListeningAgentSession(testDb.url, instance.id);
    try {
      const [listened] = await listOperationsNeedingAttention(db, {
        failed: true,
        engineInstanceName: instance.name,
      });
      assert.equal(listened!.agent_listening, true);
    } finally {
      await agent.end();
    }
    assert.deepEqual(await listFailedOperationIds(db, { engineInstanceName: instance.name }), [failedOne.id]);
  });

  test('a Failed operation goes back to Waiting, due now, with fresh attempts and delivery; the agent can start it', async () => {
    const operation = await failed();
    await db
      .updateTable('operation')
      .set({ delivered_at: sql<Date>`now()` })
      .where('id', '=', operation.id)
      .execute();
    const result = await retryOperationNow(db, operation.id);
    assert.equal(result.status, 'retried');
    const row = (await getOperation(db, operation.id))!;
    assert.equal(row.state, 'Waiting');
    assert.equal(row.attempts, 0);
    assert.equal(row.finished_at, null);
    assert.equal(row.delivered_at, null);
    assert.match(row.message, /^retried by an operator; it had failed: failed after 10 attempts/);
    assert.ok(row.next_attempt_at.getTime() <= Date.now() + 1000);
    assert.equal((await startOperation(db, operation.id)).status, 'started');
  });

  test('a Waiting operation scheduled for later becomes due now', async () => {
    const operation = await announce(change());
    await db
      .updateTable('operation')
      .set({ next_attempt_at: sql<Date>`now() + interval '1 hour'` })
      .where('id', '=', operation.id)
      .execute();
    assert.equal((await startOperation(db, operation.id)).status, 'not-due');
    assert.equal((await retryOperationNow(db, operation.id)).status, 'due-now');
    assert.equal((await startOperation(db, operation.id)).status, 'started');
  });

  test('a Failed operation whose resource has a newer Waiting operation makes that one due instead', async () => {
    const resourceId = randomUUID();
    const old = await failed(change(instance.id, resourceId));
    const newer = await announce(change(instance.id, resourceId));
    await db
      .updateTable('operation')
      .set({ next_attempt_at: sql<Date>`now() + interval '1 hour'` })
      .where('id', '=', newer.id)
      .execute();
    const result = await retryOperationNow(db, old.id);
    assert.equal(result.status, 'superseded');
    assert.equal(result.status === 'superseded' && result.by.id, newer.id);
    assert.equal((await getOperation(db, old.id))!.state, 'Failed');
    assert.equal((await startOperation(db, newer.id)).status, 'started');
  });

  test('In_Progress and Completed operations are not retried; an unknown id is not found', async () => {
    const running = await announce(change());
    await startOperation(db, running.id);
    assert.equal((await retryOperationNow(db, running.id)).status, 'not-retryable');
    await completeOperation(db, running.id);
    assert.equal((await retryOperationNow(db, running.id)).status, 'not-retryable');
    assert.equal((await retryOperationNow(db, randomUUID())).status, 'not-found');
  });
});

describe('a tenant in view', () => {
  test('its placement and each GitOpsDeployment with its application row, instance and latest operation', async () => {
    const instance = await givenEngineInstance(db, `view-${randomUUID().slice(0, 8)}`);
    const tenant = await givenClusterUser(db);
    await db.transaction().execute((trx) => placeTenant(trx, tenant.id, instance.name));
    const cr = (name: string) => ({
      uid: randomUUID(),
      name,
      namespace: tenant.namespace_name,
      namespaceUid: tenant.namespace_uid,
    });
    const withOps = await givenApplication(db, { clusterUser: tenant, engineInstance: instance });
    const withoutOps = await givenApplication(db, { clusterUser: tenant, engineInstance: instance });
    const b = cr('b-app');
    await insertApiCrMapping(db, b, { kind: 'GitOpsDeployment', applicationId: withOps.id });
    await insertApiCrMapping(db, cr('a-app'), { kind: 'GitOpsDeployment', applicationId: withoutOps.id });
    const request: OperationRequest = {
      engineInstanceId: instance.id,
      resourceType: 'Application',
      resourceId: withOps.id,
    };
    const first = (await db.transaction().execute((trx) => insertOperation(trx, request))).operation;
    await startOperation(db, first.id);
    await completeOperation(db, first.id);
    const second = (await db.transaction().execute((trx) => insertOperation(trx, request))).operation;

    const view = await getTenantInView(db, tenant.namespace_uid);
    assert.ok(view);
    assert.equal(view.engine_instance_name, instance.name);
    assert.deepEqual(
      view.deployments.map((d) => d.cr_name),
      ['a-app', 'b-app'],
    );
    const [a, bView] = view.deployments;
    assert.equal(a!.last_operation, null);
    assert.equal(a!.engine_instance_name, instance.name);
    assert.equal(bView!.cr_uid, b.uid);
    assert.equal(bView!.application_name, withOps.name);
    assert.equal(bView!.last_operation?.id, second.id);
    assert.equal(bView!.last_operation?.state, 'Waiting');
    assert.equal(bView!.releasing_engine_instance_name, null);

    assert.equal(await getTenantInView(db, randomUUID()), undefined);
  });
});
