/**
 * The relay's side of the operation outbox (operation.repository.ts): which operations still need an Operation
 * CR (undelivered, unfinished, due, and no agent of their engine instance listening: the agent-listening lock),
 * claiming them, and recording their delivery or its failure.
 */
import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database, OperationRow } from './database.ts';

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
