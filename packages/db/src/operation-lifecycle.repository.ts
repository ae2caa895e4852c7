/**
 * The agent's side of the operation outbox (operation.repository.ts): an operation's state changes
 * (Waiting -> In_Progress -> Completed | Failed, or Waiting again later) and the sweeps that find the ones
 * due or stale.
 */
import { type Kysely, sql } from 'kysely';
import type { Database, OperationRow } from './database.ts';
import { boundedOperationMessage, getOperation } from './operation.repository.ts';
import type { OperationResourceType } from './schema-values.ts';

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

/**
 * Agent: says on In_Progress operations why they are not finished yet (what the agent waits for), so that
 * `kubectl gitops operations` shows it. Writes only rows whose message differs; no state change, so no
 * NOTIFY. `message` must not hold secrets.
 */
export async function noteOperationsWaiting(
  db: Kysely<Database>,
  ids: readonly string[],
  message: string,
): Promise<number> {
  if (ids.length === 0) return 0;
  const text = boundedOperationMessage(message);
  const result = await db
    .updateTable('operation')
    .set({ message: text })
    .where('id', 'in', ids)
    .where('state', '=', 'In_Progress')
    .where('message', 'is distinct from', text)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
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
    WITH ${dueOperationsStart(engineInstanceId, resource)}
    SELECT o.* FROM ${resourceOperations} o ORDER BY o.created_at, o.id`.execute(db);
  return rows.map(resourceOperationOfRow);
}

/**
 * The CTEs `unfinished` and `started` of `startDueOperationsOfResource`, for a statement that also reads what
 * the resource's reconcile needs (startDueOperationsOfApplication); select from `resourceOperations`.
 */
export function dueOperationsStart(
  engineInstanceId: string,
  resource: { type: OperationResourceType; id: string },
) {
  return sql`unfinished AS (
      SELECT * FROM operation
      WHERE engine_instance_id = ${engineInstanceId} AND resource_type = ${resource.type}
        AND resource_id = ${resource.id} AND state IN ('Waiting', 'In_Progress')
    ), started AS (
      UPDATE operation o SET state = 'In_Progress', attempts = o.attempts + 1, last_attempt_at = now()
      FROM unfinished u
      WHERE o.id = u.id AND o.state = 'Waiting' AND o.next_attempt_at <= now()
      RETURNING o.*
    )`;
}

/** The operations of `dueOperationsStart`, each with its `outcome` (a subquery). */
export const resourceOperations = sql`(
    SELECT 'started' AS outcome, s.* FROM started s
    UNION ALL
    SELECT CASE
             WHEN u.state = 'In_Progress' THEN 'in-progress'
             WHEN u.next_attempt_at > now() THEN 'not-due'
             ELSE 'taken'
           END,
           u.*
    FROM unfinished u WHERE u.id NOT IN (SELECT id FROM started))`;

/** A row of `resourceOperations` as what it found. */
export function resourceOperationOfRow({
  outcome,
  ...operation
}: OperationRow & { outcome: ResourceOperation['outcome'] }): ResourceOperation {
  return { outcome, operation } as ResourceOperation;
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
 * Agent sweep of Operation CRs: of `ids` (the operations of CRs its cache holds), those of its instance that
 * are finished, whose CRs are left over (a delete refused or lost).
 */
export async function listFinishedOperationIds(
  db: Kysely<Database>,
  engineInstanceId: string,
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom('operation')
    .select('id')
    .where('engine_instance_id', '=', engineInstanceId)
    .where('id', 'in', ids)
    .where('state', 'in', ['Completed', 'Failed'])
    .execute();
  return rows.map((row) => row.id);
}
