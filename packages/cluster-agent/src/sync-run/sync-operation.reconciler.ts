/**
 * SyncOperation resources (one sync_operation row per GitOpsDeploymentSyncRun). Level-based, like the
 * Application reconciler: every run re-reads the row. The syncs of one application run strictly one after
 * another in creation order: only the first unfinished row is requested; the others stay pending until it
 * has an outcome, and finishing one enqueues the next.
 *
 * For the row at the head: refresh (annotation), then set the Application's top-level `operation` (merge
 * patch, own field manager), record `requested_at` (so it happens once, also across restarts), and stay
 * pending until Argo CD reports the result in `status.operationState`. While it runs, what Argo CD reports
 * about this sync (phase, synced revision, start, message) is copied onto the row whenever it changes (the
 * row's trigger wakes the backend, which writes the SyncRun's status); the outcome goes on the row with the
 * final report and the operation is Completed. desired_state Terminated: not requested yet → Terminated
 * without touching Argo CD; still waiting in `operation` → removed; running →
 * `status.operationState.phase: Terminating`, and what Argo CD then ends (Failed) is Terminated.
 * The Application status is read from the agent's Application informer, never written except for that phase.
 * Only the Application that serves the row (its id label, no deletionTimestamp) is asked and heard; a request
 * made on an Application since replaced (another uid than `requested_application_uid`) is made again. A row
 * whose application moved to another engine instance (its tenant moved) is left to that instance.
 */
import {
  type ApplicationRow,
  getApplication,
  getSyncOperation,
  hasUnfinishedOperation,
  listSyncOperationsOfApplication,
  markSyncOperationRequested,
  recordSyncProgress,
  type SyncOperationRow,
  type SyncOutcome,
  type SyncProgress,
  sameSyncProgress,
  setSyncOperationOutcome,
  syncProgressOf,
} from '@gitops/db';
import { type KubeConfig, type KubeObject, type Logger, mergePatch, scrubString } from '@gitops/shared';
import type { AgentContext, ResourceOutcome } from '../agent-context.ts';
import { AgentLabel, applicationRef } from '../argocd.ts';
import {
  isRequestPending,
  type ObservedSync,
  observedSync,
  outcomeOfPhase,
  REFRESH_ANNOTATION,
  SYNC_FIELD_MANAGER,
  syncOperationRequest,
} from './sync-request.ts';

export const SYNC_OPERATION_RESOURCE = 'SyncOperation';

/** Safety-net re-checks; Application events wake a running sync at once. */
const RUNNING_RECHECK_MS = 10_000;
const QUEUED_RECHECK_MS = 15_000;
const MISSING_APPLICATION_RECHECK_MS = 2_000;
const APPLICATION_CHANGE_RECHECK_MS = 500;
const OUTCOME_MESSAGE_MAX = 1_000;

export interface SyncOperationReconciler {
  reconcileSyncOperation(
    id: string,
    options: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome>;
  /** Queues the application's running sync (its first unfinished one), if any, to be looked at again. */
  wakeRunningSync(applicationId: string): Promise<void>;
}

function isUnfinished(row: SyncOperationRow): boolean {
  // A Terminated row that was never requested finishes without Argo CD: it never blocks the queue.
  return row.outcome === null && !(row.desired_state === 'Terminated' && row.requested_at === null);
}

async function patchApplication(
  kc: KubeConfig,
  namespace: string,
  name: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
) {
  await mergePatch(kc, applicationRef(namespace, name), body, { fieldManager: SYNC_FIELD_MANAGER, signal });
}

export function createSyncOperationReconciler(
  ctx: AgentContext,
  options: { enqueue: (syncOperationId: string) => void },
): SyncOperationReconciler {
  const { kc, db, namespace } = ctx;

  /** Argo CD's report as the row keeps it (messages can quote repository URLs with credentials: scrubbed). */
  function progressOf(observed: ObservedSync): SyncProgress {
    return {
      argocdPhase: observed.phase,
      syncedRevision: observed.revision,
      startedAt: observed.startedAt,
      finishedAt: observed.finishedAt,
      argocdMessage: scrubString(observed.message).slice(0, OUTCOME_MESSAGE_MAX),
    };
  }

  /**
   * Ends the sync. `observed`: Argo CD's final report; without one (ended without Argo CD) the row keeps
   * what Argo CD last reported and finishes now.
   */
  async function finish(
    row: SyncOperationRow,
    outcome: SyncOutcome,
    message: string,
    logger: Logger,
    observed?: ObservedSync,
  ) {
    const text = scrubString(message).slice(0, OUTCOME_MESSAGE_MAX);
    const progress = observed ? progressOf(observed) : { ...syncProgressOf(row), finishedAt: new Date() };
    await setSyncOperationOutcome(db, row.id, outcome, text, progress);
    logger.info({ syncOperation: row.id, outcome }, 'sync finished');
    await enqueueHead(row.application_id);
    return { status: 'done', changed: true, message: `sync ${outcome}` } as const;
  }

  /** Enqueues the first unfinished sync of the application (the next to run). */
  async function enqueueHead(applicationId: string | null) {
    if (!applicationId) return;
    const next = (await listSyncOperationsOfApplication(db, applicationId)).find(isUnfinished);
    if (next) options.enqueue(next.id);
  }

  /**
   * The row's application, and its live Argo CD Application when that is the one serving the row now; else the
   * outcome (finished, elsewhere, or waiting: an earlier sync runs, or the Application is missing or replaced).
   */
  async function locate(
    row: SyncOperationRow,
    logger: Logger,
  ): Promise<{ outcome: ResourceOutcome } | { application: ApplicationRow; live: KubeObject }> {
    const application = row.application_id ? await getApplication(db, row.application_id) : undefined;
    if (!application) {
      return {
        outcome: await finish(
          row,
          'Error',
          "the GitOpsDeployment's Argo CD Application no longer exists",
          logger,
        ),
      };
    }
    if (application.engine_instance_id !== ctx.engineInstanceId) {
      // Its tenant moved: the new instance was told (moveTenant) and runs the sync on its Application; one
      // running here ends when this instance releases the old Application.
      return {
        outcome: { status: 'done', changed: false, message: 'the application is on another engine instance' },
      };
    }
    const head = (await listSyncOperationsOfApplication(db, application.id)).find(isUnfinished);
    if (head && head.id !== row.id) {
      return {
        outcome: {
          status: 'pending',
          reason: 'an earlier sync of the application runs',
          requeueAfterMs: QUEUED_RECHECK_MS,
        },
      };
    }
    const live = ctx.applications.get(namespace, application.name);
    if (!live) {
      return {
        outcome: {
          status: 'pending',
          reason: 'the Argo CD Application does not exist yet',
          requeueAfterMs: MISSING_APPLICATION_RECHECK_MS,
        },
      };
    }

    // Only the Application that now serves this row is asked, and only it reports the result: one being
    // deleted (Argo CD may still run a sync on it, then prune what it synced) or one of another row under
    // the same name is on its way out, and the agent re-creates the right one once it is gone.
    if (live.metadata.deletionTimestamp || live.metadata.labels?.[AgentLabel.DatabaseId] !== application.id) {
      return {
        outcome: {
          status: 'pending',
          reason: 'the Argo CD Application is being replaced',
          requeueAfterMs: MISSING_APPLICATION_RECHECK_MS,
        },
      };
    }
    return { application, live };
  }

  /** Not requested on the live Application yet: ask Argo CD once (a refresh, then the operation). */
  async function requestSync(
    row: SyncOperationRow,
    application: ApplicationRow,
    live: KubeObject,
    { signal, logger }: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const liveUid = live.metadata.uid ?? '';
    if (row.desired_state === 'Terminated') {
      return await finish(row, 'Terminated', 'terminated before it was requested in Argo CD', logger);
    }
    if (
      await hasUnfinishedOperation(db, {
        engineInstanceId: ctx.engineInstanceId,
        resourceType: 'Application',
        resourceId: application.id,
      })
    ) {
      // A change of the Application is on its way (e.g. a new path, then a SyncRun at once): sync what it
      // becomes, not what it was.
      return {
        status: 'pending',
        reason: 'a change of the Argo CD Application is being applied first',
        requeueAfterMs: APPLICATION_CHANGE_RECHECK_MS,
      };
    }
    // A previous process may have patched Argo CD and died before recording it: never request twice.
    if (!isRequestPending(live, row.id) && !observedSync(live, { id: row.id, requested_at: null })) {
      await patchApplication(
        kc,
        namespace,
        application.name,
        { metadata: { annotations: { [REFRESH_ANNOTATION]: 'normal' } } },
        signal,
      );
      await patchApplication(
        kc,
        namespace,
        application.name,
        { operation: syncOperationRequest(row, live) },
        signal,
      );
      logger.info({ syncOperation: row.id, application: application.name }, 'sync requested in Argo CD');
    }
    await markSyncOperationRequested(db, row.id, liveUid);
    return {
      status: 'pending',
      reason: 'Argo CD runs the sync',
      requeueAfterMs: RUNNING_RECHECK_MS,
      changed: true,
    };
  }

  /** Requested on the live Application: report what Argo CD did with it, and carry out a termination. */
  async function followSync(
    row: SyncOperationRow,
    application: ApplicationRow,
    live: KubeObject,
    { signal, logger }: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const observed = observedSync(live, row);
    if (observed?.finished) {
      const outcome = outcomeOfPhase(observed.phase, row.desired_state === 'Terminated');
      return await finish(row, outcome, observed.message, logger, observed);
    }
    if (observed) {
      const progress = progressOf(observed);
      if (!sameSyncProgress(progress, syncProgressOf(row))) await recordSyncProgress(db, row.id, progress);
    }
    if (row.desired_state === 'Terminated') {
      if (isRequestPending(live, row.id)) {
        await patchApplication(kc, namespace, application.name, { operation: null }, signal);
        return await finish(row, 'Terminated', 'terminated before Argo CD started it', logger);
      }
      if (observed && observed.phase === 'Running') {
        await patchApplication(
          kc,
          namespace,
          application.name,
          { status: { operationState: { phase: 'Terminating' } } },
          signal,
        );
        logger.info({ syncOperation: row.id }, 'sync terminating');
        return {
          status: 'pending',
          reason: 'Argo CD terminates the sync',
          requeueAfterMs: RUNNING_RECHECK_MS,
          changed: true,
        };
      }
    }
    return { status: 'pending', reason: 'Argo CD runs the sync', requeueAfterMs: RUNNING_RECHECK_MS };
  }

  async function reconcileSyncOperation(
    id: string,
    context: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const { logger } = context;
    const row = await getSyncOperation(db, id);
    if (!row) return { status: 'done', changed: false, message: 'the sync no longer exists' };
    if (row.outcome !== null) return { status: 'done', changed: false, message: `sync ${row.outcome}` };
    if (row.desired_state === 'Terminated' && row.requested_at === null) {
      return await finish(row, 'Terminated', 'terminated before it was requested in Argo CD', logger);
    }
    const located = await locate(row, logger);
    if ('outcome' in located) return located.outcome;
    const { application, live } = located;
    const liveUid = live.metadata.uid ?? '';
    // A request made on an Application that was replaced since died with it (rows requested before the uid
    // was recorded count as this Application's).
    const requestedHere = row.requested_at !== null && (row.requested_application_uid ?? liveUid) === liveUid;
    return requestedHere
      ? await followSync(row, application, live, context)
      : await requestSync(row, application, live, context);
  }

  return { reconcileSyncOperation, wakeRunningSync: enqueueHead };
}
