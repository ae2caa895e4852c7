import { type Kysely, type QueryCreator, sql, type Transaction } from 'kysely';
import type { Database, OperationRow } from './database.ts';
import type { CrKind, OperationResourceType } from './schema-values.ts';

/**
 * The `operation` table: the transactional outbox (docs/data-model.md, "The operation lifecycle").
 *
 *   backend   insertOperation (in the reconcile transaction) -> Waiting
 *   relay     claimUndeliveredOperations + markOperationsDelivered / recordDeliveryFailure
 *   agent     startOperation (Waiting -> In_Progress), then completeOperation | failOperation |
 *             retryOperation (-> Waiting again, later); sweeps: listDueWaitingOperations,
 *             listStaleInProgressOperations
 *   anyone    deleteFinishedOperations (retention)
 *
 * State changes NOTIFY `gitops_operation_state_changed` through a trigger; inserts NOTIFY
 * `gitops_operation_created`.
 */

/** The schema's CHECK limit on `operation.message`. */
export const OPERATION_MESSAGE_MAX_LENGTH = 2000;

/** Cuts a message to the column's limit (never splitting a UTF-16 surrogate pair). */
export function boundedOperationMessage(message: string): string {
  if (message.length <= OPERATION_MESSAGE_MAX_LENGTH) return message;
  let cut = message.slice(0, OPERATION_MESSAGE_MAX_LENGTH - 1);
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** The user custom resource to re-enqueue when the operation finishes. */
export interface OperationOwnerCr {
  kind: CrKind;
  namespace: string;
  name: string;
  uid: string;
}

export interface OperationRequest {
  engineInstanceId: string;
  resourceType: OperationResourceType;
  /** Id of the row that changed; it may already be deleted (that announces a delete). */
  resourceId: string;
  /** Tenant (cluster_user id). */
  ownerUserId?: string | null;
  ownerCr?: OperationOwnerCr | null;
}

export interface InsertedOperation {
  operation: OperationRow;
  /** True when an existing Waiting operation for the same resource was reused. */
  reused: boolean;
}

/**
 * Announces a change of one resource to one engine instance, inside the transaction that made the change.
 * If a Waiting operation for the same (instance, resource type, resource) exists it is reused instead of
 * adding a second one (the unique index `operation_waiting_resource_key` guarantees at most one): its
 * owner is updated to the latest one given, and a pending retry is made due now (the new data may fix it).
 */
export async function insertOperation(
  trx: Transaction<Database>,
  request: OperationRequest,
): Promise<InsertedOperation> {
  return insertedOperation(await operationInsert(trx, request).executeTakeFirstOrThrow());
}

/** insertOperation's statement, on any query creator (e.g. one with a data-modifying WITH before it). */
export function operationInsert<DB extends Database>(qc: QueryCreator<DB>, request: OperationRequest) {
  const owner = request.ownerCr ?? null;
  return (
    (qc as unknown as QueryCreator<Database>)
      .insertInto('operation')
      .values({
        engine_instance_id: request.engineInstanceId,
        resource_type: request.resourceType,
        resource_id: request.resourceId,
        owner_user_id: request.ownerUserId ?? null,
        owner_kind: owner?.kind ?? null,
        owner_namespace: owner?.namespace ?? null,
        owner_name: owner?.name ?? null,
        owner_uid: owner?.uid ?? null,
      })
      .onConflict((conflict) =>
        conflict
          .columns(['engine_instance_id', 'resource_type', 'resource_id'])
          // The partial index's predicate, as a literal so PostgreSQL can always infer the index.
          .where(sql<boolean>`state = 'Waiting'`)
          .doUpdateSet(({ ref }) => {
            const hasNewOwner = sql<boolean>`${ref('excluded.owner_uid')} is not null`;
            const ownerColumn = <C extends 'owner_kind' | 'owner_namespace' | 'owner_name' | 'owner_uid'>(
              column: C,
            ) =>
              sql<never>`case when ${hasNewOwner} then ${ref(`excluded.${column}`)} else ${ref(`operation.${column}`)} end`;
            return {
              owner_user_id: sql<
                string | null
              >`coalesce(${ref('excluded.owner_user_id')}, ${ref('operation.owner_user_id')})`,
              owner_kind: ownerColumn('owner_kind'),
              owner_namespace: ownerColumn('owner_namespace'),
              owner_name: ownerColumn('owner_name'),
              owner_uid: ownerColumn('owner_uid'),
              next_attempt_at: sql<Date>`least(${ref('operation.next_attempt_at')}, now())`,
            };
          }),
      )
      .returningAll()
      // xmax is 0 for a freshly inserted row version and the locking transaction's id for an upsert.
      .returning(sql<boolean>`xmax <> 0`.as('reused'))
  );
}

/** The answer of operationInsert as an InsertedOperation. */
export function insertedOperation(row: OperationRow & { reused: boolean }): InsertedOperation {
  const { reused, ...operation } = row;
  return { operation, reused };
}

/**
 * insertOperation for several resources, in a fixed order (instance, type, resource) so two transactions
 * announcing overlapping sets cannot deadlock on the Waiting rows they reuse.
 */
export async function insertOperations(
  trx: Transaction<Database>,
  requests: readonly OperationRequest[],
): Promise<InsertedOperation[]> {
  const key = (r: OperationRequest) => `${r.engineInstanceId}/${r.resourceType}/${r.resourceId}`;
  const sorted = [...requests].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  const results: InsertedOperation[] = [];
  for (const request of sorted) results.push(await insertOperation(trx, request));
  return results;
}

export async function getOperation(db: Kysely<Database>, id: string): Promise<OperationRow | undefined> {
  return await db.selectFrom('operation').selectAll().where('id', '=', id).executeTakeFirst();
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The timestamp columns of an operation row: a notification carries them as text. */
const OPERATION_TIMESTAMP_COLUMNS = [
  'created_at',
  'delivered_at',
  'finished_at',
  'last_attempt_at',
  'next_attempt_at',
  'next_delivery_at',
  'updated_at',
] as const satisfies readonly (keyof OperationRow)[];
type TimestampColumn = {
  [K in keyof OperationRow]-?: Date extends OperationRow[K] ? K : never;
}[keyof OperationRow];
// A timestamp column missing from the list above fails `pnpm typecheck` here.
const everyTimestampColumn: Exclude<
  TimestampColumn,
  (typeof OPERATION_TIMESTAMP_COLUMNS)[number]
> extends never
  ? true
  : false = true;
void everyTimestampColumn;

/** The row a notification payload carries (migration 0007), or undefined when it is not one. */
function operationRowOfPayload(payload: string): OperationRow | undefined {
  if (!payload.startsWith('{')) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const row = value as Record<string, unknown>;
  if (
    typeof row.id !== 'string' ||
    !UUID.test(row.id) ||
    typeof row.engine_instance_id !== 'string' ||
    typeof row.resource_type !== 'string' ||
    typeof row.resource_id !== 'string' ||
    typeof row.state !== 'string'
  ) {
    return undefined;
  }
  for (const column of OPERATION_TIMESTAMP_COLUMNS) {
    const text = row[column];
    if (text === null || text === undefined) {
      row[column] = null;
      continue;
    }
    const time = typeof text === 'string' ? new Date(text) : undefined;
    if (!time || Number.isNaN(time.valueOf())) return undefined;
    row[column] = time;
  }
  return row as unknown as OperationRow;
}

/**
 * The operation a `gitops_operation_created` or `gitops_operation_state_changed` notification announces. Since
 * migration 0012 the payload is its id (nothing another engine instance could use), read here through the
 * reader's own role; the row as JSON of 0007 is still understood (a notification sent just before the
 * migration committed) and needs no read. Anything else (not a row, not an id) is undefined.
 */
export async function operationOfNotification(
  db: Kysely<Database>,
  payload: string,
): Promise<OperationRow | undefined> {
  const row = operationRowOfPayload(payload);
  if (row) return row;
  return UUID.test(payload) ? await getOperation(db, payload) : undefined;
}

export interface ClaimedOperation extends OperationRow {
  /** Namespace of the engine instance: where the Operation CR goes. */
  engine_instance_namespace: string;
}

/**
 * A cluster-agent that LISTENs for new operations (`gitops_operation_created`) holds this session-level
 * advisory lock on its LISTEN connection, in the two-key form (this class, `hashtext(engine instance id)`).
 * PostgreSQL releases it when that session ends, so "some agent of this engine instance hears new operations
 * right now" is a fact of the database itself: no heartbeat to write, nothing stale after a crash.
 */
export const AGENT_LISTENING_LOCK_CLASS = 1_734_964_225; // 0x67697401, fits int4

/** Something that runs one statement on a dedicated session (the LISTEN connection's `pg.Client`). */
export interface SessionQuery {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/**
 * Agent, on its LISTEN connection: announces that it hears this engine instance's new operations. Returns
 * false when another session already holds the lock (another agent of the same instance listens).
 */
export async function holdAgentListeningLock(
  session: SessionQuery,
  engineInstanceId: string,
): Promise<boolean> {
  const result = await session.query('select pg_try_advisory_lock($1::int, hashtext($2::text)) as held', [
    AGENT_LISTENING_LOCK_CLASS,
    engineInstanceId,
  ]);
  return result.rows[0]?.held === true;
}

/** True while a session of this database holds the agent-listening lock of `engine_instance_id` (SQL). */
export const agentListening = (engineInstanceIdColumn: string) =>
  sql<boolean>`exists (
    select 1 from pg_locks l
    where l.locktype = 'advisory' and l.granted and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = ${sql.lit(AGENT_LISTENING_LOCK_CLASS)}
      and l.objid::bigint = (hashtext(${sql.ref(engineInstanceIdColumn)}::text)::bigint & 4294967295)
  )`;

/** Whether an agent of the engine instance holds the listening lock now. */
export async function isAgentListening(db: Kysely<Database>, engineInstanceId: string): Promise<boolean> {
  const row = await db
    .selectFrom(sql<{ id: string }>`(select ${engineInstanceId}::uuid as id)`.as('e'))
    .select(agentListening('e.id').as('listening'))
    .executeTakeFirstOrThrow();
  return row.listening;
}

/**
 * Locks up to `limit` operations that still need an Operation CR (undelivered, not finished, delivery
 * due), oldest first. `FOR UPDATE SKIP LOCKED`: concurrent relays (several backend replicas) get disjoint
 * sets. The rows stay locked until `trx` ends: create the CRs, then markOperationsDelivered in `trx`.
 *
 * An operation whose engine instance has a listening agent needs no CR: that agent was woken by the
 * operation's NOTIFY when it committed (and sweeps Waiting rows after any reconnect). Such operations are
 * left alone; should the agent stop listening while one is still unfinished, the next pass delivers it.
 */
export async function claimUndeliveredOperations(
  trx: Transaction<Database>,
  limit: number,
  /** Only instances on this cluster (the relay's own, `clusterIdentity`): their namespaces are the ones it can write. */
  clusterIdentity: string,
): Promise<ClaimedOperation[]> {
  return await deliverable(trx, clusterIdentity)
    .selectAll('o')
    .select('e.namespace_name as engine_instance_namespace')
    .orderBy('o.created_at')
    .orderBy('o.id')
    .limit(limit)
    .forUpdate('o')
    .skipLocked()
    .execute();
}

/**
 * Whether claimUndeliveredOperations would find anything now (one statement, no transaction): a relay pass
 * first asks this, so a pass with nothing to deliver (the usual case while the agent listens) costs one
 * round trip instead of three.
 */
export async function hasUndeliveredOperations(
  db: Kysely<Database>,
  clusterIdentity: string,
): Promise<boolean> {
  const row = await deliverable(db, clusterIdentity)
    .select((eb) => eb.lit(1).as('one'))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Operations that need an Operation CR now: undelivered, unfinished, delivery due, no agent listening, and of
 * an instance on `clusterIdentity`'s cluster (an instance elsewhere hears its operations only through its
 * agent's LISTEN and sweep: they wait there until an agent is back).
 */
function deliverable(db: Kysely<Database>, clusterIdentity: string) {
  return withUnheardInstances(db, clusterIdentity)
    .selectFrom('operation as o')
    .innerJoin('engine_instance as e', 'e.id', 'o.engine_instance_id')
    .where('o.engine_instance_id', 'in', (eb) => eb.selectFrom('unheard').select('unheard.id'))
    .where('o.delivered_at', 'is', null)
    .where('o.state', 'in', ['Waiting', 'In_Progress'])
    .where('o.next_delivery_at', '<=', sql<Date>`now()`);
}

/**
 * A query builder with `unheard`: the ids of the engine instances (of `clusterIdentity`'s cluster, when given)
 * no agent listens for now, read once (MATERIALIZED). Filter operations by `engine_instance_id in unheard`
 * rather than by agentListening per row: inlined, the planner runs the pg_locks scan once per operation row
 * (95 ms with 6,000 operations waiting, as a drain leaves them, against 2 ms).
 */
export function withUnheardInstances(db: Kysely<Database>, clusterIdentity?: string) {
  return db.with(
    (cte) => cte('unheard').materialized(),
    (qb) => {
      const all = qb
        .selectFrom('engine_instance as i')
        .select('i.id')
        .where(sql<boolean>`not ${agentListening('i.id')}`);
      return clusterIdentity === undefined ? all : all.where('i.cluster_identity', '=', clusterIdentity);
    },
  );
}

/** Records that the Operation CRs exist. Returns the number of rows changed. */
export async function markOperationsDelivered(db: Kysely<Database>, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db
    .updateTable('operation')
    .set({ delivered_at: sql<Date>`now()` })
    .where('id', 'in', ids)
    .where('delivered_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Creating the Operation CR failed: try again after `retryAfterMs`. */
export async function recordDeliveryFailure(
  db: Kysely<Database>,
  id: string,
  retryAfterMs: number,
): Promise<void> {
  await db
    .updateTable('operation')
    .set((eb) => ({
      delivery_attempts: eb('delivery_attempts', '+', 1),
      next_delivery_at: sql<Date>`now() + make_interval(secs => ${retryAfterMs / 1000})`,
    }))
    .where('id', '=', id)
    .execute();
}

export type StartOperationResult =
  | { status: 'started'; operation: OperationRow }
  | { status: 'not-found' }
  /** Someone else started it, or it finished. */
  | { status: 'not-waiting'; operation: OperationRow }
  /** Waiting for a retry whose time has not come. */
  | { status: 'not-due'; operation: OperationRow };

/** Agent: Waiting -> In_Progress (counts an attempt). Atomic, so only one worker can start an operation. */
export async function startOperation(db: Kysely<Database>, id: string): Promise<StartOperationResult> {
  const started = await db
    .updateTable('operation')
    .set((eb) => ({
      state: 'In_Progress',
      attempts: eb('attempts', '+', 1),
      last_attempt_at: sql<Date>`now()`,
    }))
    .where('id', '=', id)
    .where('state', '=', 'Waiting')
    .where('next_attempt_at', '<=', sql<Date>`now()`)
    .returningAll()
    .executeTakeFirst();
  if (started) return { status: 'started', operation: started };
  const operation = await getOperation(db, id);
  if (!operation) return { status: 'not-found' };
  return operation.state === 'Waiting'
    ? { status: 'not-due', operation }
    : { status: 'not-waiting', operation };
}

async function finishOperation(
  db: Kysely<Database>,
  id: string,
  state: 'Completed' | 'Failed',
  message: string,
): Promise<OperationRow | undefined> {
  return (await finishOperations(db, [{ id, state, message }]))[0];
}

/**
 * Agent: In_Progress -> Completed or Failed for several operations in one statement; one answer per item, in
 * order (undefined for one that was not In_Progress). `message` must not hold secrets.
 */
export async function finishOperations(
  db: Kysely<Database>,
  items: readonly { id: string; state: 'Completed' | 'Failed'; message: string }[],
): Promise<(OperationRow | undefined)[]> {
  const { rows } = await sql<OperationRow>`
    update operation o
    set state = v.state, message = v.message, finished_at = now()
    from unnest(${items.map((i) => i.id)}::uuid[], ${items.map((i) => i.state)}::text[],
                ${items.map((i) => boundedOperationMessage(i.message))}::text[]) as v(id, state, message)
    where o.id = v.id and o.state = 'In_Progress'
    returning o.*`.execute(db);
  const byId = new Map(rows.map((row) => [row.id, row]));
  return items.map((item) => byId.get(item.id));
}

/** Agent: In_Progress -> Completed. Returns undefined if the operation was not In_Progress. */
export async function completeOperation(
  db: Kysely<Database>,
  id: string,
  message = '',
): Promise<OperationRow | undefined> {
  return await finishOperation(db, id, 'Completed', message);
}

/** Agent: In_Progress -> Failed (permanent error or attempts exhausted). `message` must not hold secrets. */
export async function failOperation(
  db: Kysely<Database>,
  id: string,
  message: string,
): Promise<OperationRow | undefined> {
  return await finishOperation(db, id, 'Failed', message);
}

export type RetryOperationResult =
  | { status: 'scheduled'; operation: OperationRow }
  /** A newer Waiting operation for the same resource exists; it does the work, this one is Completed. */
  | { status: 'superseded'; operation: OperationRow; supersededBy: string }
  /** The operation was not In_Progress. */
  | { status: 'not-in-progress' };

const UNIQUE_VIOLATION = '23505';

/**
 * Agent: In_Progress -> Waiting, due again after `retryAfterMs` (the caller computes the backoff).
 * While this operation ran, the backend may have added a new Waiting operation for the same resource; the
 * unique index then forbids a second Waiting row, and this one is marked Completed as superseded (the
 * newer one re-reads the current rows, so nothing is lost).
 *
 * Runs its own statements and retries a lost race on the unique index, so it must not be called inside a
 * transaction (a failed statement would abort it).
 */
export async function retryOperation(
  db: Kysely<Database>,
  id: string,
  options: { retryAfterMs: number; message: string },
): Promise<RetryOperationResult> {
  if (db.isTransaction) throw new Error('retryOperation must not run inside a transaction');
  const message = boundedOperationMessage(options.message);
  for (let attempt = 1; ; attempt++) {
    const current = await getOperation(db, id);
    if (current?.state !== 'In_Progress') return { status: 'not-in-progress' };
    const sibling = await db
      .selectFrom('operation')
      .select('id')
      .where('engine_instance_id', '=', current.engine_instance_id)
      .where('resource_type', '=', current.resource_type)
      .where('resource_id', '=', current.resource_id)
      .where('state', '=', 'Waiting')
      .executeTakeFirst();
    if (sibling) {
      const operation = await finishOperation(
        db,
        id,
        'Completed',
        `superseded by operation ${sibling.id}; ${message}`,
      );
      if (!operation) return { status: 'not-in-progress' };
      return { status: 'superseded', operation, supersededBy: sibling.id };
    }
    try {
      const operation = await db
        .updateTable('operation')
        .set({
          state: 'Waiting',
          message,
          next_attempt_at: sql<Date>`now() + make_interval(secs => ${options.retryAfterMs / 1000})`,
        })
        .where('id', '=', id)
        .where('state', '=', 'In_Progress')
        .returningAll()
        .executeTakeFirst();
      if (!operation) return { status: 'not-in-progress' };
      return { status: 'scheduled', operation };
    } catch (error) {
      // A Waiting sibling was committed between our check and the update: look again.
      if ((error as { code?: string }).code !== UNIQUE_VIOLATION || attempt >= 3) throw error;
    }
  }
}

/** What `startDueOperationsOfResource` found for one unfinished operation. */
export type ResourceOperation =
  /** It was Waiting and due: this call made it In_Progress (an attempt counted). */
  | { outcome: 'started'; operation: OperationRow }
  /** It was In_Progress already (started earlier by this agent, or by another). */
  | { outcome: 'in-progress'; operation: OperationRow }
  /** Waiting for a retry whose time has not come. */
  | { outcome: 'not-due'; operation: OperationRow }
  /** Another worker started or finished it meanwhile. */
  | { outcome: 'taken'; operation: OperationRow };

/**
 * Agent: starts the due Waiting operations of one resource on an engine instance (Waiting -> In_Progress,
 * atomically, as `startOperation`) and lists them with its other unfinished ones, oldest first: one statement
 * where a list and one start per operation were several. The processor finishes all it holds after one
 * reconcile of the resource.
 */
export async function startDueOperationsOfResource(
  db: Kysely<Database>,
  engineInstanceId: string,
  resource: { type: OperationResourceType; id: string },
): Promise<ResourceOperation[]> {
  const { rows } = await sql<OperationRow & { outcome: ResourceOperation['outcome'] }>`
    WITH unfinished AS (
      SELECT * FROM operation
      WHERE engine_instance_id = ${engineInstanceId} AND resource_type = ${resource.type}
        AND resource_id = ${resource.id} AND state IN ('Waiting', 'In_Progress')
    ), started AS (
      UPDATE operation o SET state = 'In_Progress', attempts = o.attempts + 1, last_attempt_at = now()
      FROM unfinished u
      WHERE o.id = u.id AND o.state = 'Waiting' AND o.next_attempt_at <= now()
      RETURNING o.*
    )
    SELECT 'started' AS outcome, s.* FROM started s
    UNION ALL
    SELECT CASE
             WHEN u.state = 'In_Progress' THEN 'in-progress'
             WHEN u.next_attempt_at > now() THEN 'not-due'
             ELSE 'taken'
           END,
           u.*
    FROM unfinished u WHERE u.id NOT IN (SELECT id FROM started)
    ORDER BY created_at, id`.execute(db);
  return rows.map(({ outcome, ...operation }) => ({ outcome, operation }) as ResourceOperation);
}

/**
 * Agent safety net: Waiting operations of an instance that have been due for at least `dueForMs`
 * (their Operation CR event was missed or has not arrived), oldest first.
 */
export async function listDueWaitingOperations(
  db: Kysely<Database>,
  engineInstanceId: string,
  options: { dueForMs: number; limit: number },
): Promise<OperationRow[]> {
  return await db
    .selectFrom('operation')
    .selectAll()
    .where('engine_instance_id', '=', engineInstanceId)
    .where('state', '=', 'Waiting')
    .where('next_attempt_at', '<=', sql<Date>`now() - make_interval(secs => ${options.dueForMs / 1000})`)
    .orderBy('next_attempt_at')
    .limit(options.limit)
    .execute();
}

/**
 * Agent recovery: In_Progress operations of an instance whose last attempt started more than
 * `olderThanMs` ago (the agent died mid-operation). Hand each to retryOperation.
 */
export async function listStaleInProgressOperations(
  db: Kysely<Database>,
  engineInstanceId: string,
  options: { olderThanMs: number; limit: number },
): Promise<OperationRow[]> {
  return await db
    .selectFrom('operation')
    .selectAll()
    .where('engine_instance_id', '=', engineInstanceId)
    .where('state', '=', 'In_Progress')
    .where('last_attempt_at', '<', sql<Date>`now() - make_interval(secs => ${options.olderThanMs / 1000})`)
    .orderBy('last_attempt_at')
    .limit(options.limit)
    .execute();
}

/**
 * Retention: deletes up to `limit` operations finished more than `olderThanMs` ago (Completed and Failed
 * alike). Returns the deleted ids. Call repeatedly until fewer than `limit` come back.
 */
export async function deleteFinishedOperations(
  db: Kysely<Database>,
  engineInstanceId: string,
  options: { olderThanMs: number; limit: number },
): Promise<string[]> {
  const rows = await db
    .deleteFrom('operation')
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('operation')
        .select('id')
        // Each agent collects its own engine instance's rows: another instance's agent may still need them.
        .where('engine_instance_id', '=', engineInstanceId)
        .where('finished_at', '<', sql<Date>`now() - make_interval(secs => ${options.olderThanMs / 1000})`)
        .orderBy('finished_at')
        .limit(options.limit),
    )
    .returning('id')
    .execute();
  return rows.map((row) => row.id);
}

/** How many operations are not finished (Waiting or In_Progress), of every engine instance. */
export async function countUnfinishedOperations(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('operation')
    .select(sql<string>`count(*)`.as('n'))
    .where('state', 'in', ['Waiting', 'In_Progress'])
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Whether a change is still on its way to Argo CD (an operation Waiting or In_Progress): of one resource
 * (`resourceId`), or of any of a tenant's resources of the type (`ownerUserId`, e.g. new repository credentials
 * its Applications' refresh needs).
 */
export async function hasUnfinishedOperation(
  db: Kysely<Database>,
  of: { engineInstanceId: string; resourceType: OperationResourceType } & (
    | { resourceId: string }
    | { ownerUserId: string }
  ),
): Promise<boolean> {
  const row = await db
    .selectFrom('operation')
    .select('id')
    .where('engine_instance_id', '=', of.engineInstanceId)
    .where('resource_type', '=', of.resourceType)
    .$call((query) =>
      'resourceId' in of
        ? query.where('resource_id', '=', of.resourceId)
        : query.where('owner_user_id', '=', of.ownerUserId),
    )
    .where('state', 'in', ['Waiting', 'In_Progress'])
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
