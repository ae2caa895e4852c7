/**
 * Safety nets of processing (docs/data-model.md): due Waiting rows whose Operation CR event was missed,
 * In_Progress rows left behind by a crashed agent, Operation CRs of finished operations left behind, and the
 * retention of finished rows.
 */
import { operationCrName } from '@gitops/api';
import {
  type Db,
  deleteFinishedOperations,
  listDueWaitingOperations,
  listFinishedOperationIds,
  listStaleInProgressOperations,
  retryOperation,
} from '@gitops/db';
import { type Informer, type KubeObject, type Logger, objectKey } from '@gitops/shared';
import { operationIdOf } from './operation-cr.controller.ts';

/** A Waiting row is swept once it has been due this long (the CR event normally comes first). */
const WAITING_GRACE_MS = 2_000;
const SWEEP_BATCH = 500;
const RETENTION_BATCH = 1_000;

export interface SweepOptions {
  db: Db;
  engineInstanceId: string;
  logger: Logger;
  staleAfterMs: number;
  holds(operationId: string): boolean;
  enqueueResource(resourceType: string, resourceId: string): void;
}

/** One sweep: queue due Waiting rows; hand stale In_Progress rows not held by this process back to Waiting. */
export async function sweepOperations(options: SweepOptions): Promise<void> {
  const { db, engineInstanceId } = options;
  const due = await listDueWaitingOperations(db, engineInstanceId, {
    dueForMs: WAITING_GRACE_MS,
    limit: SWEEP_BATCH,
  });
  for (const operation of due) options.enqueueResource(operation.resource_type, operation.resource_id);
  const stale = await listStaleInProgressOperations(db, engineInstanceId, {
    olderThanMs: options.staleAfterMs,
    limit: SWEEP_BATCH,
  });
  for (const operation of stale) {
    if (options.holds(operation.id)) continue;
    const result = await retryOperation(db, operation.id, {
      retryAfterMs: 0,
      message: 'retrying: the agent processing this operation stopped',
    });
    options.logger.info(
      { operationId: operation.id, result: result.status },
      'stale In_Progress operation retried',
    );
    options.enqueueResource(operation.resource_type, operation.resource_id);
  }
}

/** A cached Operation CR is looked at by the sweep once it is this old (its own events handle a newer one). */
export const CR_SWEEP_GRACE_MS = 10_000;

/**
 * Operation CRs of finished operations left behind: a delete refused or cut off, or a finish that committed
 * while the agent saw its connection fail (so it never deleted the CR). Of the CRs in the cache older than
 * CR_SWEEP_GRACE_MS, those whose operations are finished go to the Operation CR controller, which deletes them.
 * One query per sweep while CRs are cached; none without (the usual case: an agent that listens gets no CRs).
 */
export async function sweepFinishedOperationCrs(options: {
  db: Db;
  engineInstanceId: string;
  operationCrs: Pick<Informer<KubeObject>, 'list'>;
  enqueueCr(key: string): void;
  now?: number;
}): Promise<void> {
  const before = (options.now ?? Date.now()) - CR_SWEEP_GRACE_MS;
  const keyOf = new Map<string, string>();
  for (const cr of options.operationCrs.list()) {
    const id = operationIdOf(cr);
    const created = Date.parse(String(cr.metadata.creationTimestamp));
    // Only a CR named after its operation, as the relay names it: the controller deletes no other.
    if (id && cr.metadata.name === operationCrName(id) && created <= before) keyOf.set(id, objectKey(cr));
  }
  const ids = [...keyOf.keys()];
  for (let start = 0; start < ids.length; start += SWEEP_BATCH) {
    const batch = ids.slice(start, start + SWEEP_BATCH);
    for (const id of await listFinishedOperationIds(options.db, options.engineInstanceId, batch)) {
      const key = keyOf.get(id);
      if (key) options.enqueueCr(key);
    }
  }
}

/** Deletes this engine instance's finished operation rows older than the retention, in batches. Returns how many. */
export async function collectFinishedOperations(
  db: Db,
  engineInstanceId: string,
  retentionMs: number,
  signal: AbortSignal,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await deleteFinishedOperations(db, engineInstanceId, {
      olderThanMs: retentionMs,
      limit: RETENTION_BATCH,
    });
    total += deleted.length;
    if (deleted.length < RETENTION_BATCH || signal.aborted) return total;
  }
}
