/**
 * The hostile agent (issue 33, docs/threat-model.md): connected as engine instance B's own role, every attempt
 * against instance A fails — reading, changing, deleting or inserting A's rows in every table, calling the
 * functions that cross over, registering as A, taking another role, switching the policies off, and learning
 * anything from LISTEN on A's channel. Each case also shows B reaching its own rows the same way, so none can
 * pass because the role reaches nothing at all. Real PostgreSQL, real roles and logins.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ErrorCode } from '@gitops/shared';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createDb } from './connection.ts';
import type { Database, EngineInstanceRow } from './database.ts';
import { deleteEngineInstanceIfUnused } from './engine-instance.repository.ts';
import {
  type AdmittedEngineInstance,
  admitEngineInstance,
  agentDatabaseUrl,
  dropEngineInstanceRole,
  engineInstanceChannel,
  ROLE_CONNECTION_LIMIT,
  registerAgent,
  sessionRole,
} from './engine-instance-role.repository.ts';
import { publishInstanceKey } from './instance-sealed-values.repository.ts';
import { generateInstanceKeyPair } from './instance-sealing.ts';
import { type Listener, listen, type Notification } from './notify.ts';
import { insertOperation } from './operation.repository.ts';
import { completeApplicationRelease, moveTenant } from './tenant-move.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenOwnedOperation,
  givenSyncOperation,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

/** Everything one instance serves: one row in every table an agent reads. */
interface Served {
  instance: EngineInstanceRow;
  admitted: AdmittedEngineInstance;
  tenantId: string;
  applicationId: string;
  syncOperationId: string;
  environmentId: string;
  credentialsId: string;
  repositoryCredentialsId: string;
  operationId: string;
}

async function givenServed(db: Kysely<Database>, name: string): Promise<Served> {
  const admitted = await admitEngineInstance(db, { name, namespaceName: `argocd-${name}` });
  const instance = admitted.instance;
  // Its agent's key, published through its own role (migration 0013).
  const asInstance = createDb(agentDatabaseUrl(testDb.url, admitted), { max: 1 });
  await publishInstanceKey(asInstance, await generateInstanceKeyPair()).finally(() => asInstance.destroy());
  const tenant = await givenClusterUser(db, { placedOn: instance });
  const credentials = await db
    .insertInto('cluster_credentials')
    .values({
      cluster_user_id: tenant.id,
      api_url: `https://${name}.example:6443`,
      bearer_token_sealed: Buffer.from(`sealed-token-of-${name}`),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const environment = await db
    .insertInto('managed_environment')
    .values({
      cluster_user_id: tenant.id,
      kind: 'External',
      name: 'prod',
      cluster_credentials_id: credentials.id,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const application = await givenApplication(db, {
    clusterUser: tenant,
    engineInstance: instance,
    managedEnvironmentId: environment.id,
  });
  await db
    .insertInto('application_state')
    .values({ application_id: application.id, state: { health: 'Healthy' } })
    .execute();
  const sync = await givenSyncOperation(db, { clusterUser: tenant, application });
  const repository = await db
    .insertInto('repository_credentials')
    .values({
      cluster_user_id: tenant.id,
      engine_instance_id: instance.id,
      repository_url: `https://git.example/${name}.git`,
      normalized_repository_url: `https://git.example/${name}`,
      secret_name: `repo-${name}`,
      password_sealed: Buffer.from(`sealed-password-of-${name}`),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const operation = await db.transaction().execute((trx) =>
    givenOwnedOperation(trx, {
      tenant,
      engineInstanceId: instance.id,
      cr: { uid: randomUUID(), name: `deployment-of-${name}`, namespace: tenant.namespace_name },
      row: { kind: 'GitOpsDeployment', applicationId: application.id },
    }),
  );
  return {
    instance,
    admitted,
    tenantId: tenant.id,
    applicationId: application.id,
    syncOperationId: sync.id,
    environmentId: environment.id,
    credentialsId: credentials.id,
    repositoryCredentialsId: repository.id,
    operationId: operation.id,
  };
}

/**
 * Each table an agent reads, the id of the row of `served` in it, and a column to try to change: one the agent's
 * role may write where there is one (so only the policy stands in the way), else any.
 */
function rowsOf(served: Served): { table: keyof Database; column: string; id: string; writable: string }[] {
  return [
    { table: 'engine_instance', column: 'id', id: served.instance.id, writable: 'cordoned' },
    { table: 'cluster_user', column: 'id', id: served.tenantId, writable: 'namespace_name' },
    {
      table: 'application',
      column: 'id',
      id: served.applicationId,
      writable: 'releasing_engine_instance_id',
    },
    { table: 'application_state', column: 'application_id', id: served.applicationId, writable: 'state' },
    { table: 'sync_operation', column: 'id', id: served.syncOperationId, writable: 'outcome_message' },
    { table: 'managed_environment', column: 'id', id: served.environmentId, writable: 'name' },
    { table: 'cluster_credentials', column: 'id', id: served.credentialsId, writable: 'bearer_token_sealed' },
    {
      table: 'repository_credentials',
      column: 'id',
      id: served.repositoryCredentialsId,
      writable: 'password_sealed',
    },
    { table: 'api_cr_mapping', column: 'application_id', id: served.applicationId, writable: 'cr_name' },
    { table: 'operation', column: 'id', id: served.operationId, writable: 'message' },
    {
      table: 'engine_instance_key',
      column: 'engine_instance_id',
      id: served.instance.id,
      writable: 'public_key',
    },
  ];
}

/** Runs `statement`; the rows it affected, or 'refused' when PostgreSQL refused it. */
async function attempt(
  run: () => Promise<{ numAffectedRows?: bigint; rows: unknown[] }>,
): Promise<number | 'refused'> {
  try {
    const result = await run();
    return result.numAffectedRows !== undefined ? Number(result.numAffectedRows) : result.rows.length;
  } catch (err) {
    const code = (err as { code?: string }).code;
    // insufficient_privilege, or a row-level security WITH CHECK violation.
    if (code === '42501') return 'refused';
    throw err;
  }
}

describe('an agent connected as instance B reaches nothing of instance A', () => {
  let a: Served;
  let b: Served;
  let asB: Kysely<Database>;
  const listeners: Listener[] = [];

  beforeAll(async () => {
    a = await givenServed(testDb.db, `a-${randomUUID().slice(0, 8)}`);
    b = await givenServed(testDb.db, `b-${randomUUID().slice(0, 8)}`);
    asB = createDb(agentDatabaseUrl(testDb.url, b.admitted), { max: 2 });
  });
  afterAll(async () => {
    for (const listener of listeners) await listener.close();
    await asB?.destroy();
  });

  test('the database knows B by its role: its instance, not the owner of the tables', async () => {
    const me = await sessionRole(asB);
    assert.equal(me.role, b.admitted.role);
    assert.equal(me.engineInstanceId, b.instance.id);
    assert.equal(me.ownsTables, false);
    // Nor can it take every connection of the server.
    const limit = await sql<{
      n: number;
    }>`select rolconnlimit as n from pg_roles where rolname = ${b.admitted.role}`.execute(testDb.db);
    assert.equal(limit.rows[0]?.n, ROLE_CONNECTION_LIMIT);
  });

  test("selecting A's rows in every table finds none; B's own are found", async () => {
    for (const { table, column, id } of rowsOf(a)) {
      const found =
        await sql`select * from ${sql.table(table)} where ${sql.ref(column)} = ${id}::uuid`.execute(asB);
      assert.equal(found.rows.length, 0, `${table}: A's row visible to B`);
    }
    for (const { table, column, id } of rowsOf(b)) {
      const found =
        await sql`select * from ${sql.table(table)} where ${sql.ref(column)} = ${id}::uuid`.execute(asB);
      assert.equal(found.rows.length, 1, `${table}: B's own row not visible to B`);
    }
    // Nor by scanning: every row B sees is B's.
    const applications = await asB.selectFrom('application').select('engine_instance_id').execute();
    assert.deepEqual(new Set(applications.map((row) => row.engine_instance_id)), new Set([b.instance.id]));
  });

  test("updating and deleting A's rows changes nothing; A's rows are intact", async () => {
    for (const { table, column, id, writable } of rowsOf(a)) {
      const updated = await attempt(() =>
        sql`update ${sql.table(table)} set ${sql.ref(writable)} = ${sql.ref(writable)} where ${sql.ref(column)} = ${id}::uuid`.execute(
          asB,
        ),
      );
      assert.ok(updated === 0 || updated === 'refused', `${table}: B updated ${updated} of A's rows`);
      const deleted = await attempt(() =>
        sql`delete from ${sql.table(table)} where ${sql.ref(column)} = ${id}::uuid`.execute(asB),
      );
      assert.ok(deleted === 0 || deleted === 'refused', `${table}: B deleted ${deleted} of A's rows`);
    }
    // What an agent does write, tried on A's rows through the columns it may write.
    const stolen = await attempt(() =>
      asB
        .updateTable('operation')
        .set({ state: 'Completed', finished_at: new Date() })
        .where('id', '=', a.operationId)
        .execute()
        .then((r) => ({ rows: [], numAffectedRows: r[0]?.numUpdatedRows })),
    );
    assert.equal(stolen, 0);
    const syncSteered = await attempt(() =>
      asB
        .updateTable('sync_operation')
        .set({ outcome: 'Failed' })
        .where('id', '=', a.syncOperationId)
        .execute()
        .then((r) => ({ rows: [], numAffectedRows: r[0]?.numUpdatedRows })),
    );
    assert.equal(syncSteered, 0);
    for (const { table, column, id } of rowsOf(a)) {
      const kept =
        await sql`select 1 from ${sql.table(table)} where ${sql.ref(column)} = ${id}::uuid`.execute(
          testDb.db,
        );
      assert.equal(kept.rows.length, 1, `${table}: A's row is gone`);
    }
    const operation = await testDb.db
      .selectFrom('operation')
      .select('state')
      .where('id', '=', a.operationId)
      .executeTakeFirstOrThrow();
    assert.equal(operation.state, 'Waiting');
  });

  test("inserting rows for A's tenant or A's instance is refused", async () => {
    const tries: [string, () => Promise<{ rows: unknown[] }>][] = [
      [
        'an operation for A',
        () =>
          sql`insert into operation (engine_instance_id, resource_type, resource_id) values (${a.instance.id}::uuid, 'Application', ${a.applicationId}::uuid)`.execute(
            asB,
          ),
      ],
      [
        'an operation for B itself',
        () =>
          sql`insert into operation (engine_instance_id, resource_type, resource_id) values (${b.instance.id}::uuid, 'Application', ${b.applicationId}::uuid)`.execute(
            asB,
          ),
      ],
      [
        "a state for A's application",
        () =>
          sql`insert into application_state (application_id, state) values (${a.applicationId}::uuid, '{}'::jsonb)`.execute(
            asB,
          ),
      ],
      [
        "an application for A's tenant",
        () =>
          sql`insert into application (name, cluster_user_id, engine_instance_id, spec) values ('x', ${a.tenantId}::uuid, ${b.instance.id}::uuid, '{}'::jsonb)`.execute(
            asB,
          ),
      ],
      [
        "A's tenant placed on B",
        () =>
          sql`update cluster_user set engine_instance_id = ${b.instance.id}::uuid where id = ${a.tenantId}::uuid`.execute(
            asB,
          ),
      ],
      [
        'a tenant',
        () =>
          sql`insert into cluster_user (namespace_uid, namespace_name, engine_instance_id) values ('u', 'n', ${b.instance.id}::uuid)`.execute(
            asB,
          ),
      ],
      [
        "credentials for A's tenant",
        () =>
          sql`insert into repository_credentials (cluster_user_id, engine_instance_id, repository_url, normalized_repository_url, secret_name) values (${a.tenantId}::uuid, ${b.instance.id}::uuid, 'u', 'u', 's')`.execute(
            asB,
          ),
      ],
      [
        "a key of A's, to be sealed for",
        () =>
          sql`insert into engine_instance_key (engine_instance_id, key_id, public_key) values (${a.instance.id}::uuid, 'stolen', ${Buffer.alloc(32)})`.execute(
            asB,
          ),
      ],
      [
        'an instance',
        () =>
          sql`insert into engine_instance (name, namespace_name, namespace_uid, cluster_identity) values ('x', 'x', 'x', 'x')`.execute(
            asB,
          ),
      ],
      [
        "A's instance cordoned",
        () => sql`update engine_instance set cordoned = true where id = ${a.instance.id}::uuid`.execute(asB),
      ],
      [
        "B's own row renamed to A",
        () =>
          sql`update engine_instance set name = ${a.instance.name} where id = ${b.instance.id}::uuid`.execute(
            asB,
          ),
      ],
    ];
    for (const [what, run] of tries) {
      assert.equal(await attempt(run), 'refused', `${what}: not refused`);
    }
  });

  test("the deletion guard: B cannot forge a proof of deletion, confirm its own holds, or see or hold A's", async () => {
    /** What PostgreSQL makes of B's statement: the rows it touched, or 'refused'. */
    const asBTries = (statement: { execute(): Promise<unknown[]> }) =>
      attempt(() => statement.execute().then((rows) => ({ rows })));
    const proofFor = (instanceId: string) => ({
      application_id: randomUUID(),
      engine_instance_id: instanceId,
      cluster_user_id: b.tenantId,
      application_name: 'x',
    });
    // A proof is the backend's word: no agent writes one, not even for itself.
    assert.equal(
      await asBTries(asB.insertInto('application_deletion').values(proofFor(b.instance.id))),
      'refused',
    );
    const hold = (instanceId: string, confirmed: boolean) => ({
      application_id: randomUUID(),
      engine_instance_id: instanceId,
      application_name: 'x',
      reason: 'Unproven' as const,
      message: 'held',
      ...(confirmed ? { confirmed_at: new Date() } : {}),
    });
    // Its own hold, yes; one for A, or one already confirmed, no.
    const own = hold(b.instance.id, false);
    await asB.insertInto('application_deletion_hold').values(own).execute();
    for (const forbidden of [hold(a.instance.id, false), hold(b.instance.id, true)]) {
      assert.equal(await asBTries(asB.insertInto('application_deletion_hold').values(forbidden)), 'refused');
    }
    // Confirming is an operator's: refused to the agent.
    assert.equal(
      await asBTries(
        asB
          .updateTable('application_deletion_hold')
          .set({ confirmed_at: new Date() })
          .where('application_id', '=', own.application_id),
      ),
      'refused',
    );
    // A's proofs and holds are invisible to B.
    const theirs = proofFor(a.instance.id);
    await testDb.db.insertInto('application_deletion').values(theirs).execute();
    await testDb.db.insertInto('application_deletion_hold').values(hold(a.instance.id, false)).execute();
    assert.equal(
      (await asB.selectFrom('application_deletion').select('engine_instance_id').execute()).some(
        (r) => r.engine_instance_id === a.instance.id,
      ),
      false,
    );
    assert.deepEqual(
      new Set(
        (await asB.selectFrom('application_deletion_hold').select('engine_instance_id').execute()).map(
          (r) => r.engine_instance_id,
        ),
      ),
      new Set([b.instance.id]),
    );
    // Stamping or deleting A's proof changes nothing.
    await asB
      .updateTable('application_deletion')
      .set({ pruned_at: new Date() })
      .where('application_id', '=', theirs.application_id)
      .execute();
    await asB
      .deleteFrom('application_deletion')
      .where('application_id', '=', theirs.application_id)
      .execute();
    const intact = await testDb.db
      .selectFrom('application_deletion')
      .selectAll()
      .where('application_id', '=', theirs.application_id)
      .executeTakeFirst();
    assert.equal(intact?.pruned_at, null);
  });

  test("functions do not cross over: A's release, another role's grants, a register as A", async () => {
    // B cannot hand over (or learn about) an application A releases.
    await testDb.db
      .updateTable('application')
      .set({ releasing_engine_instance_id: a.instance.id })
      .where('id', '=', a.applicationId)
      .execute();
    try {
      await assert.rejects(completeApplicationRelease(asB, a.applicationId, a.instance.id), {
        code: '42501',
      });
      assert.equal(await completeApplicationRelease(asB, a.applicationId, b.instance.id), false);
    } finally {
      await testDb.db
        .updateTable('application')
        .set({ releasing_engine_instance_id: null })
        .where('id', '=', a.applicationId)
        .execute();
    }
    await assert.rejects(sql`select gitops_grant_engine_instance_role(${b.admitted.role})`.execute(asB), {
      code: '42501',
    });
    // Registering as A: refused with both names, nothing written.
    await assert.rejects(
      registerAgent(asB, {
        name: a.instance.name,
        namespaceName: a.instance.namespace_name,
        namespaceUid: 'x',
        clusterIdentity: 'x',
      }),
      (err: Error & { code?: string }) =>
        err.code === ErrorCode.configInvalid &&
        err.message.includes(a.instance.name) &&
        err.message.includes(b.instance.name),
    );
    // Its own name with A's namespace, or another cluster once recorded: refused too.
    await registerAgent(asB, {
      name: b.instance.name,
      namespaceName: b.instance.namespace_name,
      namespaceUid: 'ns-uid',
      clusterIdentity: 'cluster-b',
    });
    await assert.rejects(
      registerAgent(asB, {
        name: b.instance.name,
        namespaceName: a.instance.namespace_name,
        namespaceUid: 'ns-uid',
        clusterIdentity: 'cluster-b',
      }),
      /admitted for Argo CD namespace/,
    );
    await assert.rejects(
      registerAgent(asB, {
        name: b.instance.name,
        namespaceName: b.instance.namespace_name,
        namespaceUid: 'ns-uid',
        clusterIdentity: 'the-hub',
      }),
      /registered on cluster cluster-b/,
    );
    const after = await testDb.db
      .selectFrom('engine_instance')
      .selectAll()
      .where('id', 'in', [a.instance.id, b.instance.id])
      .execute();
    const { name, namespace_name, namespace_uid, cluster_identity, db_role } = a.instance;
    const afterA = after.find((row) => row.id === a.instance.id);
    assert.deepEqual(
      {
        name: afterA?.name,
        namespace_name: afterA?.namespace_name,
        namespace_uid: afterA?.namespace_uid,
        cluster_identity: afterA?.cluster_identity,
        db_role: afterA?.db_role,
      },
      { name, namespace_name, namespace_uid, cluster_identity, db_role },
    );
    assert.equal(after.find((row) => row.id === b.instance.id)?.cluster_identity, 'cluster-b');
  });

  test('a temporary table named like ours does not make the database take B for A', async () => {
    // One session: a temporary table lives as long as its session, and pg_temp is searched first for tables.
    const session = createDb(agentDatabaseUrl(testDb.url, b.admitted), { max: 1 });
    try {
      await sql`create temp table engine_instance (id uuid, db_role text, name text, namespace_name text, cluster_identity text, namespace_uid text)`.execute(
        session,
      );
      await sql`insert into pg_temp.engine_instance values (${a.instance.id}::uuid, session_user, ${a.instance.name}, ${a.instance.namespace_name}, '', '')`.execute(
        session,
      );
      await sql`create temp table backend_channel (singleton boolean, name text)`.execute(session);
      assert.equal((await sessionRole(session)).engineInstanceId, b.instance.id);
      const seen = await sql`select id from application where id = ${a.applicationId}::uuid`.execute(session);
      assert.deepEqual(seen.rows, []);
      await assert.rejects(
        sql`select * from gitops_agent_register(${a.instance.namespace_name}, 'x', 'x')`.execute(session),
        /admitted for Argo CD namespace/,
      );
      assert.equal(await completeApplicationRelease(session, a.applicationId, b.instance.id), false);
    } finally {
      await session.destroy();
    }
  });

  test("taking A's role, or switching the policies off, is refused", async () => {
    await assert.rejects(sql`set role ${sql.id(a.admitted.role)}`.execute(asB), { code: '42501' });
    await assert.rejects(sql`set session authorization ${sql.id(a.admitted.role)}`.execute(asB), {
      code: '42501',
    });
    await assert.rejects(sql`alter table application disable row level security`.execute(asB), {
      code: '42501',
    });
    await assert.rejects(sql`create policy everything on application for select using (true)`.execute(asB), {
      code: '42501',
    });
    await assert.rejects(sql`set row_security = off; select * from application`.execute(asB));
    // A's password does not log in as B's role's neighbour either: it is not B's to know, and B's is not A's.
    const wrong = createDb(
      agentDatabaseUrl(testDb.url, { role: a.admitted.role, password: b.admitted.password }),
      { max: 1 },
    );
    try {
      await assert.rejects(sql`select 1`.execute(wrong), { code: '28P01' });
    } finally {
      await wrong.destroy();
    }
  });

  test("LISTEN on A's channel tells B no more than that A has work: no row, no owner, nothing B can read", async () => {
    const received: Notification[] = [];
    const listener = listen(
      agentDatabaseUrl(testDb.url, b.admitted),
      [engineInstanceChannel(a.instance.id), 'gitops_operation_created', 'gitops_operation_state_changed'],
      (n) => void received.push(n),
    );
    listeners.push(listener);
    await listener.ready;
    const resourceId = randomUUID();
    const { operation } = await testDb.db.transaction().execute((trx) =>
      insertOperation(trx, {
        engineInstanceId: a.instance.id,
        resourceType: 'Application',
        resourceId,
        ownerUserId: a.tenantId,
        ownerCr: {
          kind: 'GitOpsDeployment',
          namespace: 'tenant-of-a',
          name: 'secret-project',
          uid: randomUUID(),
        },
      }),
    );
    // A change of state that is announced (an operation's start is not: migration 0019).
    await testDb.db
      .updateTable('operation')
      .set({ state: 'Completed', finished_at: new Date() })
      .where('id', '=', operation.id)
      .execute();
    const deadline = Date.now() + 10_000;
    while (received.length < 3 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(received.length, 3);
    const ids = /^([A-Za-z]+\/)?[0-9a-f-]{36}$/;
    for (const { payload } of received) {
      assert.match(payload, ids);
      assert.ok(!payload.includes('tenant-of-a') && !payload.includes('secret-project'));
    }
    const read = await asB.selectFrom('operation').selectAll().where('id', '=', operation.id).execute();
    assert.deepEqual(read, []);
    // The backend's own channels (the rows themselves) cannot be named: their names are not B's to read.
    await assert.rejects(sql`select name from backend_channel`.execute(asB), { code: '42501' });
    await assert.rejects(sql`select state_name from backend_channel`.execute(asB), { code: '42501' });
  });

  test('a move hands the tenant to the new instance in its transaction; the old one loses it when its release is done', async () => {
    const c = await givenServed(testDb.db, `c-${randomUUID().slice(0, 8)}`);
    const asC = createDb(agentDatabaseUrl(testDb.url, c.admitted), { max: 1 });
    try {
      const seesApplication = async (db: Kysely<Database>) =>
        (await db.selectFrom('application').select('id').where('id', '=', c.applicationId).execute())
          .length === 1;
      const seesCredentials = async (db: Kysely<Database>) =>
        (await db.selectFrom('cluster_credentials').select('id').where('id', '=', c.credentialsId).execute())
          .length === 1;
      assert.equal(await seesApplication(asB), false);
      await testDb.db.transaction().execute((trx) => moveTenant(trx, c.tenantId, b.instance.id));
      // B (new) sees it at once; C (old) still does while it releases the Application.
      assert.equal(await seesApplication(asB), true);
      assert.equal(await seesCredentials(asB), true);
      assert.equal(await seesApplication(asC), true);
      // B cannot end C's release; C can, and then sees nothing of the tenant.
      await assert.rejects(completeApplicationRelease(asB, c.applicationId, c.instance.id), {
        code: '42501',
      });
      assert.equal(await completeApplicationRelease(asC, c.applicationId, c.instance.id), true);
      assert.equal(await seesApplication(asC), false);
      assert.equal(await seesCredentials(asC), false);
      const told = await asB
        .selectFrom('operation')
        .select('resource_id')
        .where('resource_id', '=', c.applicationId)
        .where('state', '=', 'Waiting')
        .execute();
      assert.equal(told.length, 1);
    } finally {
      await asC.destroy();
    }
  });

  test("a retired instance's role is dropped: it can no longer connect", async () => {
    const d = await admitEngineInstance(testDb.db, {
      name: `d-${randomUUID().slice(0, 8)}`,
      namespaceName: 'argocd-d',
    });
    const asD = createDb(agentDatabaseUrl(testDb.url, d), { max: 1 });
    try {
      assert.equal((await sessionRole(asD)).engineInstanceId, d.instance.id);
      await asD.destroy();
      // Retired (its row deleted once nothing is placed on it): its role goes with it.
      assert.equal(await deleteEngineInstanceIfUnused(testDb.db, d.instance.name), 'deleted');
      assert.equal(await dropEngineInstanceRole(testDb.db, d.instance.id), false, 'the role was left behind');
      const again = createDb(agentDatabaseUrl(testDb.url, d), { max: 1 });
      try {
        await assert.rejects(sql`select 1`.execute(again), { code: '28P01' });
      } finally {
        await again.destroy();
      }
    } finally {
      await asD.destroy().catch(() => {});
    }
  });
});
