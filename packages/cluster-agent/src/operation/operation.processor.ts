/**
 * Operation processing (docs/data-model.md, lifecycle step 3). One work queue keyed by resource
 * (`<resource_type>/<resource_id>`), so work for one resource is serialised and different resources run
 * concurrently up to the configured limit. A reconcile of a key:
 *   1. starts the resource's due Waiting operations of this engine instance (Waiting → In_Progress);
 *   2. makes Argo CD match the database for the resource (level-based: the same call repairs drift);
 *   3. Completed (and the Operation CR deleted), or still In_Progress while Argo CD finishes a delete, or on
 *      error: retry with capped exponential backoff + jitter, Failed after OPERATION_MAX_ATTEMPTS or at once
 *      for a TerminalError. State changes NOTIFY through the schema's trigger.
 * A key without operations (drift resync, informer events) runs the same reconcile; what it had to change is
 * counted in `drift_corrected_total{kind}`.
 */
import { API_GROUP_VERSION, Kind, Label, operationCrName, Plural } from '@gitops/api';
import {
  boundedOperationMessage,
  type Db,
  FINISHED_OPERATION_STATES,
  finishOperations,
  noteOperationsWaiting,
  OPERATION_RESOURCE_TYPES,
  type OperationRow,
  retryOperation,
} from '@gitops/db';
import {
  backoffDelay,
  collectionPath,
  createBatcher,
  deleteIfExists,
  errorCode,
  GitOpsError,
  getOrCreateCounter,
  HttpMethod,
  type Informer,
  isTerminalError,
  type KeyController,
  type KeyControllerBuilder,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  newController,
  type Registry,
  scrubString,
  type WorkQueue,
} from '@gitops/shared';
import {
  parseResourceKey,
  type ResourceHandler,
  type ResourceOutcome,
  resourceKey,
} from '../agent-context.ts';

/** Operation CRs deleted by one request at most, and how long a batch collects before it is sent. */
const CR_DELETE_BATCH = 100;
const CR_DELETE_WINDOW_MS = 200;

/**
 * An operation still pending this long after its attempt began gets the reason as its message (`waiting:
 * …`). Most pending operations end sooner (a delete Argo CD finishes in a moment): they cost no write.
 */
export const PENDING_NOTE_AFTER_MS = 5_000;

/** The message of an operation that waits (PENDING_NOTE_AFTER_MS): the reason of the pending outcome. */
export const pendingOperationMessage = (reason: string) => `waiting: ${scrubString(reason)}`;

/** First retry delay of a failed operation; doubles per attempt up to OPERATION_RETRY_MAX_DELAY. */
const RETRY_INITIAL_DELAY_MS = 1_000;

/** What both work queues of the instance's operations (the processor, the Operation CR controller) run with. */
export interface OperationQueueContext {
  db: Db;
  kc: KubeConfig;
  logger: Logger;
  registry: Registry;
  namespace: string;
  engineInstanceId: string;
  concurrency: number;
}

export interface OperationProcessorOptions extends OperationQueueContext {
  maxAttempts: number;
  retryMaxDelayMs: number;
  handle: ResourceHandler;
  /** Adds the informers whose events wake resources (each feature's `watches`) to the queue's controller. */
  watches?: (resources: KeyControllerBuilder) => void;
  /** The Operation CR cache: a CR carrying its operation-id label is deleted in a batch. */
  operationCrs?: Pick<Informer<KubeObject>, 'get'>;
}

export interface OperationProcessor {
  /** The resource queue's controller (`forKeys()`): its watches, its queue, started and stopped as a feature. */
  readonly controller: KeyController;
  readonly queue: WorkQueue;
  /** Queues the resource of an operation (or any resource, for drift repair). */
  enqueue(resourceType: string, resourceId: string): void;
  /** True while this process holds the In_Progress operation (the stale sweep leaves it alone). */
  holds(operationId: string): boolean;
  /** Deletes the Operation CR of a finished operation (best effort). */
  deleteOperationCr(operationId: string): Promise<void>;
}

/** The Operation CR of an operation row: `operation-<id>` in the engine instance namespace. */
export function operationCrRef(operationId: string, namespace: string) {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: Kind.Operation,
    name: operationCrName(operationId),
    namespace,
  };
}

/**
 * The message stored on a failed/retried operation. Our own errors carry messages written for this (and
 * scrubbed again); anything else (driver errors) may carry data, so only its code is shown.
 */
export function operationErrorMessage(err: unknown): string {
  if (err instanceof GitOpsError) return scrubString(err.message);
  return `internal error (${errorCode(err)}); details are in the cluster-agent logs`;
}

export function createOperationProcessor(options: OperationProcessorOptions): OperationProcessor {
  const { db, kc, namespace } = options;
  const held = new Set<string>();
  const finished = getOrCreateCounter(options.registry, {
    name: 'operations_finished_total',
    help: 'Operations finished by the cluster-agent, by resource type and final state',
    labelNames: ['resource_type', 'state'],
  });
  // Every series exists from the start at 0: `increase()` (GitOpsOperationsFailing) counts a series' first
  // sample as its baseline, so a series born at 1 would hide the first failure after every start.
  for (const resource_type of OPERATION_RESOURCE_TYPES)
    for (const state of FINISHED_OPERATION_STATES) finished.inc({ resource_type, state }, 0);
  const retried = getOrCreateCounter(options.registry, {
    name: 'operations_retried_total',
    help: 'Operation attempts that failed and were scheduled again',
    labelNames: ['resource_type'],
  });
  const driftCorrected = getOrCreateCounter(options.registry, {
    name: 'drift_corrected_total',
    help: 'Argo CD objects created, fixed or deleted because they differed from the database (no operation asked)',
    labelNames: ['kind'],
  });

  async function deleteOneOperationCr(operationId: string): Promise<void> {
    try {
      await deleteIfExists(kc, operationCrRef(operationId, namespace));
    } catch (err) {
      // The sweep finds it (operation.sweeps.ts, sweepFinishedOperationCrs) and its controller deletes it.
      options.logger.warn({ err, operationId }, 'could not delete the Operation CR of a finished operation');
    }
  }

  /**
   * CRs of operations finished meanwhile, deleted together: one DELETECOLLECTION request selecting their
   * operation-id labels instead of one DELETE each (fewer API writes when many operations finish at once).
   */
  let batch: { ids: string[]; done: Promise<void> } | undefined;
  async function flush(ids: readonly string[]): Promise<void> {
    try {
      await kubeRequest(kc, {
        method: HttpMethod.DELETE,
        path: collectionPath({ apiVersion: API_GROUP_VERSION, plural: Plural.Operation, namespace }),
        query: { labelSelector: `${Label.OperationId} in (${ids.join(',')})` },
      });
    } catch (err) {
      options.logger.debug({ err, operations: ids.length }, 'batched Operation CR delete failed; one by one');
      for (const id of ids) await deleteOneOperationCr(id);
    }
  }
  async function deleteOperationCr(operationId: string): Promise<void> {
    if (!options.operationCrs) return deleteOneOperationCr(operationId);
    const cached = options.operationCrs.get(namespace, operationCrName(operationId));
    // Usually there is none (the agent heard the operation; the relay created no CR). One created a moment
    // ago and not in the cache yet is deleted by the Operation CR controller when it arrives (its row is
    // finished by then).
    if (!cached) return;
    // A CR without the label (an older relay) is deleted by name.
    if (cached.metadata.labels?.[Label.OperationId] !== operationId) return deleteOneOperationCr(operationId);
    if (batch && batch.ids.length < CR_DELETE_BATCH) {
      batch.ids.push(operationId);
      return batch.done;
    }
    const ids = [operationId];
    // The batch collects what finishes in the next CR_DELETE_WINDOW_MS; nobody waits for it (see finish).
    const done = new Promise<void>((resolve) => setTimeout(resolve, CR_DELETE_WINDOW_MS)).then(() => {
      if (batch?.ids === ids) batch = undefined;
      return flush(ids);
    });
    batch = { ids, done };
    return done;
  }

  /** Operations finishing while others are being written go together (one statement under a burst). */
  const finishing = createBatcher({
    run: (items: Parameters<typeof finishOperations>[1]) => finishOperations(db, items),
  });

  async function finish(operation: OperationRow, state: 'Completed' | 'Failed', message: string) {
    const row = await finishing.submit({ id: operation.id, state, message });
    held.delete(operation.id);
    if (row) finished.inc({ resource_type: operation.resource_type, state });
    // Not awaited: the row is final and its NOTIFY sent; the CR goes with the next batch (never throws; one
    // whose delete failed is found by the sweep).
    void deleteOperationCr(operation.id);
  }

  /** Operations pending for PENDING_NOTE_AFTER_MS say why (best effort: a failed write is only logged). */
  async function noteWaiting(operations: readonly OperationRow[], reason: string, logger: Logger) {
    const message = boundedOperationMessage(pendingOperationMessage(reason));
    const now = Date.now();
    const due = operations.filter(
      (o) =>
        o.message !== message && now - (o.last_attempt_at ?? o.created_at).getTime() >= PENDING_NOTE_AFTER_MS,
    );
    if (due.length === 0) return;
    try {
      await noteOperationsWaiting(
        db,
        due.map((o) => o.id),
        message,
      );
    } catch (err) {
      logger.debug({ err }, 'could not note why the operations wait');
    }
  }

  async function recordFailure(
    key: string,
    operations: readonly OperationRow[],
    err: unknown,
    logger: Logger,
  ) {
    const message = operationErrorMessage(err);
    const terminal = isTerminalError(err);
    for (const operation of operations) {
      if (terminal || operation.attempts >= options.maxAttempts) {
        const text = terminal ? message : `failed after ${operation.attempts} attempts: ${message}`;
        logger.warn({ err, code: errorCode(err), operationId: operation.id }, 'operation failed');
        await finish(operation, 'Failed', text);
        continue;
      }
      const delay = backoffDelay(operation.attempts, RETRY_INITIAL_DELAY_MS, options.retryMaxDelayMs);
      const result = await retryOperation(db, operation.id, { retryAfterMs: delay, message });
      held.delete(operation.id);
      retried.inc({ resource_type: operation.resource_type });
      logger.warn(
        {
          err,
          code: errorCode(err),
          operationId: operation.id,
          attempts: operation.attempts,
          retryInMs: delay,
        },
        'operation attempt failed, retrying',
      );
      if (result.status === 'superseded') await deleteOperationCr(operation.id);
      queue.addAfter(key, delay);
    }
  }

  const resources = newController('cluster-agent-resources', {
    registry: options.registry,
    logger: options.logger,
  }).forKeys();
  options.watches?.(resources);
  const controller = resources
    .withOptions({ concurrency: options.concurrency })
    .complete(async (key, { signal, logger }) => {
      const resource = parseResourceKey(key);
      if (!resource) {
        logger.warn('malformed resource key ignored');
        return;
      }
      const begun = await options.handle(resource);
      const operations: OperationRow[] = [];
      for (const { outcome, operation } of begun.found) {
        if (outcome === 'started') {
          held.add(operation.id);
          operations.push(operation);
        } else if (outcome === 'in-progress') {
          if (held.has(operation.id)) operations.push(operation);
        } else if (outcome === 'not-due') {
          queue.addAfter(key, Math.max(10, operation.next_attempt_at.getTime() - Date.now()));
        }
      }

      let outcome: ResourceOutcome;
      try {
        outcome = await begun.run({ operations, signal, logger });
      } catch (err) {
        // Without operations this is drift repair: the queue's own backoff retries (not a TerminalError).
        if (operations.length === 0) throw err;
        await recordFailure(key, operations, err, logger);
        return;
      }
      if (outcome.status === 'pending') {
        if (operations.length === 0 && outcome.changed) driftCorrected.inc({ kind: resource.type });
        logger.debug({ reason: outcome.reason, operations: operations.length }, 'resource pending');
        await noteWaiting(operations, outcome.reason, logger);
        return { requeueAfter: outcome.requeueAfterMs };
      }
      for (const operation of operations) await finish(operation, 'Completed', outcome.message ?? '');
      if (operations.length > 0) {
        logger.info({ operations: operations.map((o) => o.id) }, 'operations completed');
      } else if (outcome.changed) {
        driftCorrected.inc({ kind: resource.type });
        logger.info('drift corrected');
      }
    });
  const queue = controller.queue;

  return {
    controller,
    queue,
    enqueue: (type, id) => queue.add(resourceKey(type, id)),
    holds: (id) => held.has(id),
    deleteOperationCr,
  };
}
