import { type Kysely, type QueryCreator, sql, type Transaction } from 'kysely';
import type { Database, OperationRow } from './database.ts';
import { rowBy } from './keyed-rows.ts';
import type { CrKind, OperationResourceType } from './schema-values.ts';

/**
 * The `operation` table: the transactional outbox (docs/data-model.md, "The operation lifecycle").
 *
 *   backend   insertOperation (in the reconcile transaction) -> Waiting                      (this file)
 *   relay     claimUndeliveredOperations + markOperationsDelivered / recordDeliveryFailure,
 *             the agent-listening lock                                       (operation-relay.repository.ts)
 *   agent     startOperation (Waiting -> In_Progress), then completeOperation | failOperation |
 *             retryOperation (-> Waiting again, later); sweeps: listDueWaitingOperations,
 *             listStaleInProgressOperations, listFinishedOperationIds    (operation-lifecycle.repository.ts)
 *   anyone    getOperation, operationOfNotification, the counts, deleteFinishedOperations (retention)
 *                                                                                             (this file)
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

export const getOperation = rowBy('operation', 'id');

/** The JSON object a notification payload holds, or undefined when it holds anything else. */
export function jsonObjectOfPayload(payload: string): Record<string, unknown> | undefined {
  if (!payload.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(payload);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A uuid as PostgreSQL prints it (any case). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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
  const row = jsonObjectOfPayload(payload);
  if (
    row === undefined ||
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
