import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventually } from '@gitops/shared/testing';
import { type CompiledQuery, type ControlledTransaction, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { beforeAll, describe, test } from 'vitest';
import {
  createApplicationOfNewDeployment,
  getApiCrMappingByUid,
  insertApplicationWithMappingAndOperation,
  isDeletedCr,
  lockCrName,
  recordDeletedCrs,
} from './api-cr-mapping.repository.ts';
import { getApplication } from './application.repository.ts';
import { deleteClusterUser } from './cluster-user.repository.ts';
import type { Database, EngineInstanceRow } from './database.ts';
import { ensureWorkspaceEnvironment, insertExternalEnvironment } from './managed-environment.repository.ts';
import {
  boundedOperationMessage,
  deleteFinishedOperations,
  getOperation,
  insertOperation,
  insertOperations,
  type OperationRequest,
} from './operation.repository.ts';
import {
  completeOperation,
  failOperation,
  finishOperations,
  listDueWaitingOperations,
  listStaleInProgressOperations,
  retryOperation,
  startDueOperationsOfResource,
  startOperation,
} from './operation-lifecycle.repository.ts';
import {
  claimUndeliveredOperations,
  hasUndeliveredOperations,
  isAgentListening,
  markOperationsDelivered,
  recordDeliveryFailure,
} from './operation-relay.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenListeningAgentSession,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase({ max: 10 });
let db: Kysely<Database>;
let instance: EngineInstanceRow;
/** The cluster of givenEngineInstance's instances, and so of the relay these tests play. */
const CLUSTER = 'test-cluster';

beforeAll(async () => {
  db = testDb.db;
  instance = await givenEngineInstance(db);
});

function applicationChange(
  resourceId: string = randomUUID(),
  engineInstanceId = instance.id,
): OperationRequest {
  return { engineInstanceId, resourceType: 'Application', resourceId };
}

/** The operations announcing resource `resourceId`, by id. */
const operationIdsOf = (resourceId: string) =>
  db.selectFrom('operation').select('id').where('resource_id', '=', resourceId).execute();

/** Ends transactions a test started and may have left open (one already ended is no error). */
async function rollBackIfOpen(...transactions: ControlledTransaction<Database>[]) {
  for (const trx of transactions)
    await trx
      .rollback()
      .execute()
      .catch(() => {});
}

async function announce(request: OperationRequest) {
  return await db.transaction().execute((trx) => insertOperation(trx, request));
}

/** Waits (event-based, generous limit) until backend `pid` is blocked on a lock. */
async function waitUntilBlocked(pid: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { rows } = await sql<{ wait_event_type: string | null }>`
      select wait_event_type from pg_stat_activity where pid = ${pid}`.execute(db);
    if (rows[0]?.wait_event_type === 'Lock') return;
    await sleep(50);
  }
  throw new Error(`backend ${pid} never blocked on a lock`);
}

async function backendPid(trx: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
  return rows[0]!.pid;
}

describe('insertOperation', () => {
  test('a second announcement of the same resource reuses the Waiting operation', async () => {
    const change = applicationChange();
    const first = await announce(change);
    const second = await announce(change);
    assert.equal(first.reused, false);
    assert.equal(second.reused, true);
    assert.equal(second.operation.id, first.operation.id);
    assert.equal((await operationIdsOf(change.resourceId)).length, 1);
  });

  test('reuse takes the latest owner and keeps the tenant when none is given', async () => {
    const user = await givenClusterUser(db);
    const change = applicationChange();
    const ownerCr = { kind: 'GitOpsDeployment' as const, namespace: 'ns', name: 'old', uid: randomUUID() };
    await announce({ ...change, ownerUserId: user.id, ownerCr });
    const newOwner = { ...ownerCr, name: 'new', uid: randomUUID() };
    const { operation } = await announce({ ...change, ownerCr: newOwner });
    assert.equal(operation.owner_user_id, user.id);
    assert.equal(operation.owner_name, 'new');
    assert.equal(operation.owner_uid, newOwner.uid);
    const again = await announce(change);
    assert.equal(again.operation.owner_name, 'new', 'an announcement without owner keeps the known owner');
  });

  test('once the operation is In_Progress, a new announcement creates a new Waiting operation', async () => {
    const change = applicationChange();
    const first = await announce(change);
    assert.equal((await startOperation(db, first.operation.id)).status, 'started');
    const second = await announce(change);
    assert.equal(second.reused, false);
    assert.notEqual(second.operation.id, first.operation.id);
  });

  test('other engine instances, resource types and resources get their own operations', async () => {
    const otherInstance = await givenEngineInstance(db);
    const resourceId = randomUUID();
    const results = await db.transaction().execute((trx) =>
      insertOperations(trx, [
        { engineInstanceId: instance.id, resourceType: 'Application', resourceId },
        { engineInstanceId: otherInstance.id, resourceType: 'Application', resourceId },
        { engineInstanceId: instance.id, resourceType: 'SyncOperation', resourceId },
        { engineInstanceId: instance.id, resourceType: 'Application', resourceId: randomUUID() },
      ]),
    );
    assert.equal(new Set(results.map((r) => r.operation.id)).size, 4);
    assert.ok(results.every((r) => !r.reused));
  });

  test('two transactions announcing the same resource at once end with one Waiting operation', async () => {
    const change = applicationChange();
    const trx1 = await db.startTransaction().execute();
    const trx2 = await db.startTransaction().execute();
    try {
      const first = await insertOperation(trx1, change);
      const pid2 = await backendPid(trx2);
      const second = insertOperation(trx2, change);
      await waitUntilBlocked(pid2);
      await trx1.commit().execute();
      const secondResult = await second;
      await trx2.commit().execute();
      assert.equal(secondResult.reused, true);
      assert.equal(secondResult.operation.id, first.operation.id);
    } finally {
      await rollBackIfOpen(trx1, trx2);
    }
    const waiting = await db
      .selectFrom('operation')
      .select('id')
      .where('resource_id', '=', change.resourceId)
      .where('state', '=', 'Waiting')
      .execute();
    assert.equal(waiting.length, 1);
  });

  test('a rolled-back transaction leaves no operation', async () => {
    const change = applicationChange();
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await insertOperation(trx, change);
        throw new Error('reconcile failed');
      }),
      /reconcile failed/,
    );
    assert.equal((await operationIdsOf(change.resourceId)).length, 0);
  });

  test('a new announcement makes a Waiting operation in retry backoff due now', async () => {
    const change = applicationChange();
    const { operation } = await announce(change);
    await startOperation(db, operation.id);
    const retry = await retryOperation(db, operation.id, { retryAfterMs: 3_600_000, message: 'try later' });
    assert.equal(retry.status, 'scheduled');
    assert.equal((await startOperation(db, operation.id)).status, 'not-due');
    const again = await announce(change);
    assert.equal(again.operation.id, operation.id);
    assert.equal((await startOperation(db, operation.id)).status, 'started');
  });
});

describe('insertApplicationWithMappingAndOperation', () => {
  test('writes the application, its mapping and the operation announcing it in one statement; a taken name writes nothing', async () => {
    const user = await givenClusterUser(db);
    const cr = {
      uid: randomUUID(),
      name: 'web',
      namespace: user.namespace_name,
      namespaceUid: user.namespace_uid,
    };
    const input = {
      name: `gitopsdepl-${cr.uid}`,
      clusterUserId: user.id,
      engineInstanceId: instance.id,
      managedEnvironmentId: null,
      spec: { source: { repoURL: 'https://example.com/repo.git', path: 'app' } },
    };
    const created = await db
      .transaction()
      .execute((trx) => insertApplicationWithMappingAndOperation(trx, input, cr));
    assert.ok(created, 'the name was free');
    // What it answers is the row as stored.
    assert.deepEqual(created.application, await getApplication(db, created.application.id));
    assert.deepEqual(
      {
        resource: created.operation.resource_id,
        type: created.operation.resource_type,
        instance: created.operation.engine_instance_id,
        tenant: created.operation.owner_user_id,
        owner: [
          created.operation.owner_kind,
          created.operation.owner_namespace,
          created.operation.owner_name,
        ],
        ownerUid: created.operation.owner_uid,
        state: created.operation.state,
      },
      {
        resource: created.application.id,
        type: 'Application',
        instance: instance.id,
        tenant: user.id,
        owner: ['GitOpsDeployment', cr.namespace, cr.name],
        ownerUid: cr.uid,
        state: 'Waiting',
      },
    );
    assert.deepEqual(await getOperation(db, created.operation.id), created.operation);
    const mapping = await getApiCrMappingByUid(db, cr.uid);
    assert.deepEqual(
      [mapping?.application_id, mapping?.cr_kind, mapping?.cr_namespace_uid],
      [created.application.id, 'GitOpsDeployment', user.namespace_uid],
    );

    // The same name again (another incarnation): nothing is written, not even its mapping or operation.
    const other = { ...cr, uid: randomUUID() };
    const again = await db
      .transaction()
      .execute((trx) => insertApplicationWithMappingAndOperation(trx, input, other));
    assert.equal(again, undefined);
    assert.equal(await getApiCrMappingByUid(db, other.uid), undefined);
    assert.deepEqual(await operationIdsOf(created.application.id), [{ id: created.operation.id }]);
  });
});

describe('createApplicationOfNewDeployment', () => {
  /** A tenant placed on `on` with its Workspace environment. */
  async function placedTenant(on: EngineInstanceRow) {
    const user = await givenClusterUser(db, { placedOn: on });
    const workspace = await ensureWorkspaceEnvironment(db, {
      id: user.id,
      namespaceName: user.namespace_name,
    });
    return { user, workspace };
  }
  const crOf = (user: { namespace_name: string; namespace_uid: string }, name = 'web') => ({
    uid: randomUUID(),
    name,
    namespace: user.namespace_name,
    namespaceUid: user.namespace_uid,
  });
  const appOf = (cr: { uid: string }, managedEnvironmentId?: string) => ({
    name: `gitopsdepl-${cr.uid}`,
    spec: { source: { repoURL: 'https://example.com/repo.git', path: 'app' } },
    managedEnvironmentId,
    tenantClusterIdentity: CLUSTER,
  });

  test('a placed tenant on this cluster: the application in its Workspace, its mapping and its operation, in one statement', async () => {
    const { user, workspace } = await placedTenant(instance);
    const cr = crOf(user);
    const created = await createApplicationOfNewDeployment(db, cr, appOf(cr));
    assert.ok(created);
    assert.deepEqual(created.application, await getApplication(db, created.application.id));
    assert.deepEqual(
      [
        created.application.cluster_user_id,
        created.application.engine_instance_id,
        created.application.managed_environment_id,
      ],
      [user.id, instance.id, workspace.id],
    );
    assert.deepEqual(await getOperation(db, created.operation.id), created.operation);
    assert.deepEqual(
      [
        created.operation.resource_id,
        created.operation.owner_uid,
        created.operation.owner_user_id,
        created.operation.state,
      ],
      [created.application.id, cr.uid, user.id, 'Waiting'],
    );
    assert.equal((await getApiCrMappingByUid(db, cr.uid))?.application_id, created.application.id);
  });

  test('writes nothing and leaves it to the transaction: a mapping of the name, an unplaced tenant, another cluster, a taken name, a held lock', async () => {
    const { user } = await placedTenant(instance);
    // An earlier incarnation of the name is mapped.
    const first = crOf(user, 'again');
    assert.ok(await createApplicationOfNewDeployment(db, first, appOf(first)));
    const second = crOf(user, 'again');
    assert.equal(await createApplicationOfNewDeployment(db, second, appOf(second)), undefined);
    assert.equal(await getApiCrMappingByUid(db, second.uid), undefined);

    // A tenant not placed yet.
    const unplaced = await givenClusterUser(db);
    const fresh = crOf(unplaced);
    assert.equal(await createApplicationOfNewDeployment(db, fresh, appOf(fresh)), undefined);
    assert.equal(await getApiCrMappingByUid(db, fresh.uid), undefined);

    // An instance on another cluster: the Workspace would need credentials; an External environment would not.
    const remote = await givenEngineInstance(db, `remote-${randomUUID()}`, {
      clusterIdentity: 'another-cluster',
    });
    const { user: away } = await placedTenant(remote);
    const viaWorkspace = crOf(away);
    assert.equal(await createApplicationOfNewDeployment(db, viaWorkspace, appOf(viaWorkspace)), undefined);
    const { environment: external } = await db.transaction().execute((trx) =>
      insertExternalEnvironment(trx, {
        clusterUserId: away.id,
        name: 'prod',
        credentials: {
          apiUrl: 'https://prod.example:6443',
          bearerTokenSealed: Buffer.from('sealed'),
          allowInsecureSkipTlsVerify: false,
          namespaces: [],
          clusterResources: false,
        },
      }),
    );
    const viaExternal = crOf(away, 'external');
    const created = await createApplicationOfNewDeployment(db, viaExternal, appOf(viaExternal, external.id));
    assert.equal(created?.application.managed_environment_id, external.id);
    assert.equal(created?.application.engine_instance_id, remote.id);

    // The application's name is taken (a row without a mapping).
    const taken = crOf(user, 'taken');
    const squatter = await givenApplication(db, { clusterUser: user, engineInstance: instance });
    assert.equal(
      await createApplicationOfNewDeployment(db, taken, { ...appOf(taken), name: squatter.name }),
      undefined,
    );
    assert.deepEqual(await operationIdsOf(squatter.id), []);

    // Another reconcile of the name holds its lock.
    const locked = crOf(user, 'locked');
    const whileHeld = await db.transaction().execute(async (trx) => {
      await lockCrName(trx, { kind: 'GitOpsDeployment', ...locked });
      return await createApplicationOfNewDeployment(db, locked, appOf(locked));
    });
    assert.equal(whileHeld, undefined);
    assert.equal(await getApiCrMappingByUid(db, locked.uid), undefined);
    assert.ok(
      await createApplicationOfNewDeployment(db, locked, appOf(locked)),
      'once the lock is free it goes',
    );
  });

  test('a uid recorded as deleted gets nothing (a cache behind its delete); records older than a day are forgotten', async () => {
    const { user } = await placedTenant(instance);
    const deleted = crOf(user, 'deleted');
    await recordDeletedCrs(db, [deleted.uid]);
    assert.equal(await isDeletedCr(db, deleted.uid), true);
    assert.equal(await createApplicationOfNewDeployment(db, deleted, appOf(deleted)), undefined);
    assert.equal(await getApiCrMappingByUid(db, deleted.uid), undefined);
    const live = crOf(user, 'live');
    assert.equal(await isDeletedCr(db, live.uid), false);
    assert.ok(await createApplicationOfNewDeployment(db, live, appOf(live)));

    const old = randomUUID();
    const recent = randomUUID();
    await db
      .insertInto('deleted_cr')
      .values([
        { cr_uid: old, deleted_at: sql<Date>`now() - interval '25 hours'` },
        { cr_uid: recent, deleted_at: sql<Date>`now() - interval '23 hours'` },
      ])
      .execute();
    await recordDeletedCrs(db, [randomUUID(), deleted.uid]);
    assert.equal(await isDeletedCr(db, old), false, 'a record older than a day is forgotten');
    assert.equal(await isDeletedCr(db, recent), true);
    assert.equal(await isDeletedCr(db, deleted.uid), true, 'recording a uid again keeps it');
  });
});

describe('claimUndeliveredOperations', () => {
  /** Marks every undelivered operation delivered, so each test starts from an empty relay queue. */
  async function drainRelayQueue() {
    await db
      .updateTable('operation')
      .set({ delivered_at: sql`now()` })
      .where('delivered_at', 'is', null)
      .execute();
  }

  test('two concurrent transactions claim disjoint sets (FOR UPDATE SKIP LOCKED)', async () => {
    await drainRelayQueue();
    const ids = new Set<string>();
    for (let i = 0; i < 10; i++) ids.add((await announce(applicationChange())).operation.id);
    const trxA = await db.startTransaction().execute();
    const trxB = await db.startTransaction().execute();
    try {
      const claimedA = await claimUndeliveredOperations(trxA, 6, CLUSTER);
      const claimedB = await claimUndeliveredOperations(trxB, 6, CLUSTER);
      assert.equal(claimedA.length, 6);
      assert.equal(claimedB.length, 4, 'B gets only what A did not lock');
      const idsA = new Set(claimedA.map((o) => o.id));
      assert.ok(
        claimedB.every((o) => !idsA.has(o.id)),
        'no operation is claimed twice',
      );
      assert.deepEqual(new Set([...idsA, ...claimedB.map((o) => o.id)]), ids);
      assert.ok(claimedA.every((o) => o.engine_instance_namespace === instance.namespace_name));
      assert.equal(await markOperationsDelivered(trxA, [...idsA]), 6);
      await trxA.commit().execute();
      await trxB.rollback().execute();
    } finally {
      await rollBackIfOpen(trxA, trxB);
    }
    const remaining = await db.transaction().execute((trx) => claimUndeliveredOperations(trx, 100, CLUSTER));
    assert.equal(remaining.length, 4, 'operations of the rolled-back claim are claimable again');
  });

  test('concurrent relays deliver every operation exactly once', async () => {
    await drainRelayQueue();
    const ids = new Set<string>();
    for (let i = 0; i < 40; i++) ids.add((await announce(applicationChange())).operation.id);
    const delivered: string[] = [];
    const relay = async () => {
      for (;;) {
        const batch = await db.transaction().execute(async (trx) => {
          const claimed = await claimUndeliveredOperations(trx, 3, CLUSTER);
          await markOperationsDelivered(
            trx,
            claimed.map((o) => o.id),
          );
          return claimed.map((o) => o.id);
        });
        if (batch.length === 0) return;
        delivered.push(...batch);
      }
    };
    await Promise.all([relay(), relay(), relay(), relay()]);
    assert.equal(delivered.length, ids.size, 'no operation delivered twice');
    assert.deepEqual(new Set(delivered), ids);
  });

  test('operations of an engine instance whose agent listens get no CR; they do once its session ends', async () => {
    await drainRelayQueue();
    const other = await givenEngineInstance(db);
    const heard = (await announce(applicationChange())).operation;
    const unheard = (await announce(applicationChange(randomUUID(), other.id))).operation;
    // The agent's LISTEN connection: a session of its own, holding the lock for as long as it lives.
    const agent = await givenListeningAgentSession(testDb.url, instance.id);
    try {
      assert.equal(agent.held, true);
      assert.equal(await isAgentListening(db, instance.id), true);
      assert.equal(await isAgentListening(db, other.id), false);
      // A second agent of the same instance does not get it.
      const second = await givenListeningAgentSession(testDb.url, instance.id);
      await second.end();
      assert.equal(second.held, false);
      const claimed = await db.transaction().execute((trx) => claimUndeliveredOperations(trx, 100, CLUSTER));
      assert.deepEqual(
        claimed.map((o) => o.id),
        [unheard.id],
        'only the instance nobody listens for needs Operation CRs',
      );
    } finally {
      await agent.end();
    }
    // The session ended (an agent crash looks the same to PostgreSQL): the lock is gone with it.
    await eventually('the lock released', async () => !(await isAgentListening(db, instance.id)));
    const after = await db.transaction().execute((trx) => claimUndeliveredOperations(trx, 100, CLUSTER));
    assert.deepEqual(new Set(after.map((o) => o.id)), new Set([heard.id, unheard.id]));
  });

  test('operations of an engine instance on another cluster get no CR (its agent hears them there)', async () => {
    await drainRelayQueue();
    const elsewhere = await givenEngineInstance(db, `elsewhere-${randomUUID()}`, {
      clusterIdentity: 'another-cluster',
    });
    const here = (await announce(applicationChange())).operation;
    const there = (await announce(applicationChange(randomUUID(), elsewhere.id))).operation;
    const claimed = await db.transaction().execute((trx) => claimUndeliveredOperations(trx, 100, CLUSTER));
    assert.deepEqual(
      claimed.map((o) => o.id),
      [here.id],
    );
    const byTheOtherCluster = await db
      .transaction()
      .execute((trx) => claimUndeliveredOperations(trx, 100, 'another-cluster'));
    assert.deepEqual(
      byTheOtherCluster.map((o) => o.id),
      [there.id],
    );
    await drainRelayQueue();
    await announce(applicationChange(randomUUID(), elsewhere.id));
    assert.equal(await hasUndeliveredOperations(db, CLUSTER), false);
  });

  test('hasUndeliveredOperations says whether a claim would find anything', async () => {
    await drainRelayQueue();
    assert.equal(await hasUndeliveredOperations(db, CLUSTER), false);
    const agent = await givenListeningAgentSession(testDb.url, instance.id);
    try {
      await announce(applicationChange());
      assert.equal(await hasUndeliveredOperations(db, CLUSTER), false, 'the listening agent has it');
    } finally {
      await agent.end();
    }
    await eventually('the lock released', async () => !(await isAgentListening(db, instance.id)));
    assert.equal(await hasUndeliveredOperations(db, CLUSTER), true);
    await drainRelayQueue();
    assert.equal(await hasUndeliveredOperations(db, CLUSTER), false);
  });

  test('a relay pass asks whether an agent listens once per engine instance, not once per waiting operation', async () => {
    // A drain leaves thousands of operations waiting for the instances that adopt; each asking reads pg_locks.
    await drainRelayQueue();
    const queries: CompiledQuery[] = [];
    const pool = new pg.Pool({ connectionString: testDb.url, max: 1 });
    const logged = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        if (event.level === 'query') queries.push(event.query);
      },
    });
    const instances = [await givenEngineInstance(db), await givenEngineInstance(db)];
    const agents = await Promise.all(instances.map((i) => givenListeningAgentSession(testDb.url, i.id)));
    try {
      for (const i of instances)
        await sql`insert into operation (engine_instance_id, resource_type, resource_id)
          select ${i.id}::uuid, 'Application', gen_random_uuid() from generate_series(1, 300)`.execute(db);
      assert.equal(await hasUndeliveredOperations(logged, CLUSTER), false, 'their agents listen');
      const [query] = queries;
      assert.ok(query);
      const plan = await pool.query(`explain (analyze, format json) ${query.sql}`, [...query.parameters]);
      const lockScans: number[] = [];
      const walk = (node: Record<string, unknown>) => {
        if (node['Function Name'] === 'pg_lock_status') lockScans.push(Number(node['Actual Loops']));
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk((plan.rows[0]['QUERY PLAN'] as Array<{ Plan: Record<string, unknown> }>)[0]!.Plan);
      assert.ok(lockScans.length > 0, 'the plan reads pg_locks');
      assert.ok(
        lockScans.every((loops) => loops <= instances.length + 1),
        `pg_locks read ${lockScans.join(', ')} times for 600 waiting operations of ${instances.length} instances`,
      );
    } finally {
      await Promise.all(agents.map((a) => a.end()));
      await logged.destroy();
      await drainRelayQueue();
    }
  });

  test('delivered, finished and delivery-backoff operations are not claimed', async () => {
    await drainRelayQueue();
    const finished = (await announce(applicationChange())).operation;
    await startOperation(db, finished.id);
    await failOperation(db, finished.id, 'permanent');
    const backingOff = (await announce(applicationChange())).operation;
    await recordDeliveryFailure(db, backingOff.id, 3_600_000);
    const inProgress = (await announce(applicationChange())).operation;
    await startOperation(db, inProgress.id);
    const claimed = await db.transaction().execute((trx) => claimUndeliveredOperations(trx, 100, CLUSTER));
    assert.deepEqual(
      claimed.map((o) => o.id),
      [inProgress.id],
      'only the unfinished, due operation still needs its CR',
    );
    assert.equal((await getOperation(db, backingOff.id))?.delivery_attempts, 1);
  });
});

describe('operation lifecycle', () => {
  test('only one of two concurrent starts wins', async () => {
    const { operation } = await announce(applicationChange());
    const results = await Promise.all([startOperation(db, operation.id), startOperation(db, operation.id)]);
    assert.deepEqual(results.map((r) => r.status).sort(), ['not-waiting', 'started']);
    const started = await getOperation(db, operation.id);
    assert.equal(started?.state, 'In_Progress');
    assert.equal(started?.attempts, 1);
    assert.ok(started?.last_attempt_at instanceof Date);
  });

  test('starting the due operations of a resource: started, already in progress, not due, not its own', async () => {
    const resourceId = randomUUID();
    const { operation: earlier } = await announce(applicationChange(resourceId));
    await startOperation(db, earlier.id);
    const { operation: later } = await announce(applicationChange(resourceId));
    const { operation: elsewhere } = await announce(applicationChange());
    const done = (await announce(applicationChange(resourceId, instance.id))).operation;
    assert.equal(done.id, later.id, 'one Waiting operation per resource');

    const found = await startDueOperationsOfResource(db, instance.id, {
      type: 'Application',
      id: resourceId,
    });
    assert.deepEqual(
      found.map(({ outcome, operation }) => [outcome, operation.id, operation.state]),
      [
        ['in-progress', earlier.id, 'In_Progress'],
        ['started', later.id, 'In_Progress'],
      ],
    );
    assert.deepEqual(found[1]?.operation, await getOperation(db, later.id));
    assert.equal(found[1]?.operation.attempts, 1);
    assert.equal((await getOperation(db, elsewhere.id))?.state, 'Waiting', 'another resource is left alone');

    // A retry whose time has not come is listed, not started; a finished one is not listed.
    const retried = (await announce(applicationChange())).operation;
    await startOperation(db, retried.id);
    await retryOperation(db, retried.id, { retryAfterMs: 60_000, message: 'later' });
    const notDue = await startDueOperationsOfResource(db, instance.id, {
      type: 'Application',
      id: retried.resource_id,
    });
    assert.deepEqual(
      notDue.map(({ outcome, operation }) => [outcome, operation.state]),
      [['not-due', 'Waiting']],
    );
    await completeOperation(db, earlier.id);
    await completeOperation(db, later.id);
    assert.deepEqual(
      await startDueOperationsOfResource(db, instance.id, { type: 'Application', id: resourceId }),
      [],
    );
  });

  test('of two concurrent starts of a resource, one starts its operation and the other finds it taken', async () => {
    const { operation } = await announce(applicationChange());
    const resource = { type: 'Application', id: operation.resource_id } as const;
    const results = await Promise.all([
      startDueOperationsOfResource(db, instance.id, resource),
      startDueOperationsOfResource(db, instance.id, resource),
    ]);
    const outcomes = results.map((r) => r.map((o) => o.outcome).join());
    const other = outcomes.filter((o) => o !== 'started');
    assert.equal(other.length, 1, `outcomes: ${outcomes.join(' / ')}`);
    assert.ok(other[0] === 'taken' || other[0] === 'in-progress', `outcomes: ${outcomes.join(' / ')}`);
    assert.equal((await getOperation(db, operation.id))?.attempts, 1);
  });

  test('Waiting -> In_Progress -> Waiting (retry) -> In_Progress -> Completed', async () => {
    const { operation } = await announce(applicationChange());
    await startOperation(db, operation.id);
    const retry = await retryOperation(db, operation.id, { retryAfterMs: 0, message: 'Argo CD not ready' });
    assert.equal(retry.status, 'scheduled');
    const restarted = await startOperation(db, operation.id);
    assert.equal(restarted.status, 'started');
    const completed = await completeOperation(db, operation.id);
    assert.equal(completed?.state, 'Completed');
    assert.equal(completed?.attempts, 2);
    assert.ok(completed?.finished_at instanceof Date);
    assert.equal(
      await completeOperation(db, operation.id),
      undefined,
      'a finished operation cannot finish again',
    );
    assert.equal((await startOperation(db, operation.id)).status, 'not-waiting');
  });

  test('several operations finish in one statement, each with its own state and message; one not In_Progress is left alone', async () => {
    const [done, failed, waiting] = [
      (await announce(applicationChange())).operation,
      (await announce(applicationChange())).operation,
      (await announce(applicationChange())).operation,
    ];
    await startOperation(db, done.id);
    await startOperation(db, failed.id);
    const finished = await finishOperations(db, [
      { id: done.id, state: 'Completed', message: '' },
      { id: waiting.id, state: 'Completed', message: '' },
      { id: failed.id, state: 'Failed', message: 'x'.repeat(10_000) },
    ]);
    assert.deepEqual(
      finished.map((row) => row && [row.id, row.state, row.message.length]),
      [
        [done.id, 'Completed', 0],
        undefined,
        [failed.id, 'Failed', boundedOperationMessage('x'.repeat(10_000)).length],
      ],
    );
    assert.equal((await getOperation(db, waiting.id))?.state, 'Waiting');
    assert.ok(finished[0]?.finished_at instanceof Date);
  });

  test('a retry is superseded when a newer Waiting operation exists for the resource', async () => {
    const change = applicationChange();
    const { operation: running } = await announce(change);
    await startOperation(db, running.id);
    const { operation: newer } = await announce(change);
    const retry = await retryOperation(db, running.id, { retryAfterMs: 1000, message: 'conflict' });
    assert.equal(retry.status, 'superseded');
    assert.equal(retry.status === 'superseded' && retry.supersededBy, newer.id);
    const old = await getOperation(db, running.id);
    assert.equal(old?.state, 'Completed');
    assert.match(old?.message ?? '', new RegExp(`superseded by operation ${newer.id}`));
  });

  test('retryOperation refuses to run inside a transaction', async () => {
    await assert.rejects(
      db.transaction().execute((trx) => retryOperation(trx, randomUUID(), { retryAfterMs: 0, message: '' })),
      /must not run inside a transaction/,
    );
  });

  test('failure messages are bounded to the column limit', async () => {
    const { operation } = await announce(applicationChange());
    await startOperation(db, operation.id);
    const failed = await failOperation(db, operation.id, 'x'.repeat(10_000));
    assert.equal(failed?.state, 'Failed');
    assert.equal(failed?.message.length, 2000);
    assert.equal(boundedOperationMessage('short'), 'short');
    assert.ok(!boundedOperationMessage(`${'a'.repeat(1998)}😀😀`).includes('\ud83d…'));
  });

  test('sweeps find due Waiting and stale In_Progress operations of one instance', async () => {
    const sweepInstance = await givenEngineInstance(db);
    const { operation: waiting } = await announce(applicationChange(randomUUID(), sweepInstance.id));
    const { operation: running } = await announce(applicationChange(randomUUID(), sweepInstance.id));
    await startOperation(db, running.id);
    // now() is the transaction start time, so "due for 0 ms" includes rows written by earlier statements.
    const due = await listDueWaitingOperations(db, sweepInstance.id, { dueForMs: 0, limit: 10 });
    assert.deepEqual(
      due.map((o) => o.id),
      [waiting.id],
    );
    assert.deepEqual(
      await listDueWaitingOperations(db, sweepInstance.id, { dueForMs: 3_600_000, limit: 10 }),
      [],
    );
    const stale = await listStaleInProgressOperations(db, sweepInstance.id, { olderThanMs: 0, limit: 10 });
    assert.deepEqual(
      stale.map((o) => o.id),
      [running.id],
    );
    assert.deepEqual(
      await listStaleInProgressOperations(db, sweepInstance.id, { olderThanMs: 3_600_000, limit: 10 }),
      [],
    );
  });

  test('retention deletes finished operations only', async () => {
    const { operation: done } = await announce(applicationChange());
    await startOperation(db, done.id);
    await completeOperation(db, done.id);
    const { operation: failed } = await announce(applicationChange());
    await startOperation(db, failed.id);
    await failOperation(db, failed.id, 'boom');
    const { operation: waiting } = await announce(applicationChange());
    assert.deepEqual(
      await deleteFinishedOperations(db, instance.id, { olderThanMs: 3_600_000, limit: 100 }),
      [],
    );
    const deleted = await deleteFinishedOperations(db, instance.id, { olderThanMs: 0, limit: 1000 });
    assert.ok(deleted.includes(done.id) && deleted.includes(failed.id));
    assert.ok(!deleted.includes(waiting.id));
    assert.equal(await getOperation(db, done.id), undefined);
    assert.equal((await getOperation(db, waiting.id))?.state, 'Waiting');
  });
});

describe('operation foreign keys and constraints', () => {
  test('deleting the tenant keeps its operations, with owner_user_id set to NULL', async () => {
    const user = await givenClusterUser(db);
    const { operation } = await announce({ ...applicationChange(), ownerUserId: user.id });
    assert.equal(await deleteClusterUser(db, user.id), true);
    const kept = await getOperation(db, operation.id);
    assert.equal(kept?.state, 'Waiting');
    assert.equal(kept?.owner_user_id, null);
  });

  test('deleting an engine instance deletes its operations', async () => {
    const doomed = await givenEngineInstance(db);
    const { operation } = await announce(applicationChange(randomUUID(), doomed.id));
    await db.deleteFrom('engine_instance').where('id', '=', doomed.id).execute();
    assert.equal(await getOperation(db, operation.id), undefined);
  });

  test('an operation for an unknown engine instance is rejected', async () => {
    await assert.rejects(announce(applicationChange(randomUUID(), randomUUID())), /foreign key/);
  });

  test('CHECK constraints reject unknown states, partial owners and unbounded messages', async () => {
    const { operation } = await announce(applicationChange());
    await assert.rejects(
      sql`update operation set state = 'Done' where id = ${operation.id}`.execute(db),
      /operation_state_check/,
    );
    await assert.rejects(
      sql`update operation set owner_kind = 'GitOpsDeployment' where id = ${operation.id}`.execute(db),
      /operation_owner_complete_check/,
    );
    await assert.rejects(
      sql`update operation set message = repeat('x', 2001) where id = ${operation.id}`.execute(db),
      /operation_message_length_check/,
    );
    await assert.rejects(
      sql`update operation set state = 'Completed' where id = ${operation.id}`.execute(db),
      /operation_finished_at_check/,
    );
    await assert.rejects(
      sql`insert into operation (engine_instance_id, resource_type, resource_id)
          values (${instance.id}, 'Pod', gen_random_uuid())`.execute(db),
      /operation_resource_type_check/,
    );
  });

  test('the unique index allows only one Waiting row per resource', async () => {
    const change = applicationChange();
    await announce(change);
    await assert.rejects(
      sql`insert into operation (engine_instance_id, resource_type, resource_id)
          values (${change.engineInstanceId}, 'Application', ${change.resourceId})`.execute(db),
      /operation_waiting_resource_key/,
    );
  });
});
