/**
 * Safety nets of processing (docs/data-model.md): due Waiting rows whose Operation CR event was missed,
 * In_Progress rows left behind by a crashed agent, and the retention of finished rows.
 */
import {
  type Db,
  deleteFinishedOperations,
  listDueWaitingOperations,
  listStaleInProgressOperations,
  retryOperation,
} from '@gitops/db';
import type { Logger } from '@gitops/shared';

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
