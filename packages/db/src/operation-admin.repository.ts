import { type Kysely, sql } from 'kysely';
import type { Database, OperationRow } from './database.ts';
import { boundedOperationMessage } from './operation.repository.ts';
import { agentListening } from './operation-relay.repository.ts';

/**
 * Operations as operators look at them (the admin CLI's `kubectl gitops operations`): the ones stuck or failed,
 * and putting them back to work. The agent's own lifecycle is in operation.repository.ts
 * (docs/data-model.md, "The operation lifecycle").
 */

/** An operation with its engine instance's name and whether an agent of that instance listens now. */
export interface OperationInView extends OperationRow {
  engine_instance_name: string;
  agent_listening: boolean;
}

export interface OperationsNeedingAttentionFilter {
  /** Waiting or In_Progress operations created longer ago than this (undefined: none of them). */
  stuckForMs?: number;
  /** Failed operations (kept for OPERATION_RETENTION, 24 h, after they failed). */
  failed?: boolean;
  /** Only operations of this engine instance (by name). */
  engineInstanceName?: string;
  /** At most this many, oldest first (default 500). */
  limit?: number;
}

/**
 * Operations that need an operator's eye: unfinished ones older than `stuckForMs` (the change they announce
 * has not reached Argo CD in that time) and Failed ones (the agent gave up), oldest first, each with whether
 * an agent of its instance listens now (without one, nothing will take them).
 */
export async function listOperationsNeedingAttention(
  db: Kysely<Database>,
  filter: OperationsNeedingAttentionFilter,
): Promise<OperationInView[]> {
  if (filter.stuckForMs === undefined && !filter.failed) return [];
  let query = db
    .selectFrom('operation as o')
    .innerJoin('engine_instance as e', 'e.id', 'o.engine_instance_id')
    .selectAll('o')
    .select(['e.name as engine_instance_name', agentListening('o.engine_instance_id').as('agent_listening')])
    .where((eb) => {
      const either = [];
      if (filter.stuckForMs !== undefined) {
        either.push(
          eb.and([
            eb('o.state', 'in', ['Waiting', 'In_Progress']),
            eb('o.created_at', '<', sql<Date>`now() - make_interval(secs => ${filter.stuckForMs / 1000})`),
          ]),
        );
      }
      if (filter.failed) either.push(eb('o.state', '=', 'Failed'));
      return eb.or(either);
    });
  if (filter.engineInstanceName !== undefined) query = query.where('e.name', '=', filter.engineInstanceName);
  const rows = await query
    .orderBy('o.created_at')
    .orderBy('o.id')
    .limit(filter.limit ?? 500)
    .execute();
  return rows.map((row) => ({ ...row, agent_listening: row.agent_listening === true }));
}

/** Operations of one engine instance in one state that is not Completed, for /metrics. */
export interface OperationStateCount {
  engine_instance_name: string;
  state: 'Waiting' | 'In_Progress' | 'Failed';
  count: number;
  /** Seconds since the oldest of them was created. */
  oldest_seconds: number;
}

/**
 * How many operations are Waiting, In_Progress and Failed per engine instance (by name), with the age of the
 * oldest of each: one grouped read (Completed rows, the bulk, are not counted). States with none are absent.
 */
export async function countOperationsByState(db: Kysely<Database>): Promise<OperationStateCount[]> {
  const rows = await db
    .selectFrom('operation as o')
    .innerJoin('engine_instance as e', 'e.id', 'o.engine_instance_id')
    .select([
      'e.name as engine_instance_name',
      'o.state',
      sql<string>`count(*)`.as('count'),
      sql<string>`extract(epoch from now() - min(o.created_at))`.as('oldest_seconds'),
    ])
    .where('o.state', 'in', ['Waiting', 'In_Progress', 'Failed'])
    .groupBy(['e.name', 'o.state'])
    .execute();
  return rows.map((row) => ({
    engine_instance_name: row.engine_instance_name,
    state: row.state as OperationStateCount['state'],
    count: Number(row.count),
    oldest_seconds: Math.max(0, Number(row.oldest_seconds)),
  }));
}

/** The ids of the Failed operations (of one instance, by name), oldest first. */
export async function listFailedOperationIds(
  db: Kysely<Database>,
  filter: { engineInstanceName?: string } = {},
): Promise<string[]> {
  let query = db
    .selectFrom('operation as o')
    .innerJoin('engine_instance as e', 'e.id', 'o.engine_instance_id')
    .select('o.id')
    .where('o.state', '=', 'Failed');
  if (filter.engineInstanceName !== undefined) query = query.where('e.name', '=', filter.engineInstanceName);
  const rows = await query.orderBy('o.created_at').orderBy('o.id').execute();
  return rows.map((row) => row.id);
}

/** What `retryOperationNow` did. */
export type OperationRetryResult =
  /** It was Failed: it is Waiting again, due now, with a fresh set of attempts. */
  | { status: 'retried'; operation: OperationRow }
  /** It was Waiting (perhaps for a retry later): it is due now. */
  | { status: 'due-now'; operation: OperationRow }
  /**
   * It was Failed and a newer Waiting operation for the same resource exists (at most one may wait): that one
   * is made due now and does the work (it re-reads the rows); this one stays Failed.
   */
  | { status: 'superseded'; operation: OperationRow; by: OperationRow }
  /** In_Progress (an agent works on it) or Completed: nothing to do. */
  | { status: 'not-retryable'; operation: OperationRow }
  | { status: 'not-found' };

const UNIQUE_VIOLATION = '23505';

/**
 * An operator's retry: puts a Failed operation back to Waiting, due now, its attempts counted from zero again
 * (the agent gives up after OPERATION_MAX_ATTEMPTS) and its delivery reset (without a listening agent the
 * relay creates its Operation CR again), or makes a Waiting one due now. The agent's Waiting sweep (every
 * OPERATION_SWEEP_INTERVAL, 5 s) and its start-up sweep take it from there; nothing else needs telling.
 *
 * Not in a transaction (like retryOperation): a Waiting row the backend inserts for the same resource meanwhile
 * makes the update fail on `operation_waiting_resource_key`, and the next round finds it as the sibling.
 */
export async function retryOperationNow(db: Kysely<Database>, id: string): Promise<OperationRetryResult> {
  if (db.isTransaction) throw new Error('retryOperationNow must not run inside a transaction');
  for (let attempt = 1; ; attempt++) {
    if (attempt > 5) throw new Error(`operation ${id} kept changing while it was being retried`);
    const current = await db.selectFrom('operation').selectAll().where('id', '=', id).executeTakeFirst();
    if (!current) return { status: 'not-found' };
    if (current.state === 'Waiting') {
      const operation = await db
        .updateTable('operation')
        .set({ next_attempt_at: sql<Date>`least(next_attempt_at, now())` })
        .where('id', '=', id)
        .where('state', '=', 'Waiting')
        .returningAll()
        .executeTakeFirst();
      if (operation) return { status: 'due-now', operation };
      continue;
    }
    if (current.state !== 'Failed') return { status: 'not-retryable', operation: current };
    const sibling = await db
      .updateTable('operation')
      .set({ next_attempt_at: sql<Date>`least(next_attempt_at, now())` })
      .where('engine_instance_id', '=', current.engine_instance_id)
      .where('resource_type', '=', current.resource_type)
      .where('resource_id', '=', current.resource_id)
      .where('state', '=', 'Waiting')
      .returningAll()
      .executeTakeFirst();
    if (sibling) return { status: 'superseded', operation: current, by: sibling };
    try {
      const operation = await db
        .updateTable('operation')
        .set({
          state: 'Waiting',
          attempts: 0,
          next_attempt_at: sql<Date>`now()`,
          finished_at: null,
          delivered_at: null,
          delivery_attempts: 0,
          next_delivery_at: sql<Date>`now()`,
          message: boundedOperationMessage(`retried by an operator; it had failed: ${current.message}`),
        })
        .where('id', '=', id)
        .where('state', '=', 'Failed')
        .returningAll()
        .executeTakeFirst();
      if (operation) return { status: 'retried', operation };
    } catch (error) {
      // A Waiting sibling was committed between the two statements: look again (it is found next round).
      if ((error as { code?: string }).code !== UNIQUE_VIOLATION || attempt >= 3) throw error;
    }
  }
}
