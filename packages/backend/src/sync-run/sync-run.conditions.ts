/**
 * The SyncRun's status side: its single ErrorOccurred condition with the sync's own status fields in one
 * patch (Events on transitions and on a new phase), what the Application shows for the sync, and the outcome
 * of a sync requested already. Each step is a top-level function over the reconciler's `deps`
 * (`SyncRunSteps`), so a test calls it with plain objects; the pure decisions are in `sync-run.status.ts`.
 */
import { SyncRunConditionType, SyncRunEventReason } from '@gitops/api';
import {
  getApplicationState,
  getLatestOperationOfOwner,
  listSyncOperationsOfApplication,
  type SyncOperationRow,
} from '@gitops/db';
import { findCondition, type Logger, setCondition } from '@gitops/shared';
import { writeErrorConditions } from '../error-occurred.ts';
import { SyncRunCr, type SyncRunObject } from '../kinds.ts';
import { parseApplicationState } from '../status/deployment-status.ts';
import type { SyncRunSteps } from './sync-run.reconciler.ts';
import {
  FINISHED_SYNC_RUN_PHASES,
  type SyncRunErrorState,
  type SyncRunPhase,
  type SyncRunSyncStatus,
  syncRunApplicationStatus,
  syncRunCondition,
  syncRunErrorState,
  syncRunSyncStatus,
  syncStartedInArgoCd,
  syncStatusChanges,
} from './sync-run.status.ts';
import { terminateSync } from './sync-run.store.ts';

/** The Event of a new phase (none for Pending). */
const phaseEvents: Partial<Record<SyncRunPhase, { type: 'Normal' | 'Warning'; reason: string }>> = {
  Running: { type: 'Normal', reason: SyncRunEventReason.SyncStarted },
  Succeeded: { type: 'Normal', reason: SyncRunEventReason.SyncSucceeded },
  Failed: { type: 'Warning', reason: SyncRunEventReason.SyncFailed },
  Terminated: { type: 'Warning', reason: SyncRunEventReason.SyncTerminated },
};

/** The Event of the phase a status change sets, if it sets one that has an Event. */
export function phaseEventOf(
  changes: { phase?: SyncRunPhase | null },
  sync: SyncRunSyncStatus | undefined,
): { type: 'Normal' | 'Warning'; reason: string; message: string } | undefined {
  const event = changes.phase ? phaseEvents[changes.phase] : undefined;
  if (!sync || !event) return undefined;
  return {
    ...event,
    message: `The sync is ${sync.phase}${sync.revision ? ` at revision ${sync.revision}` : ''}${sync.message ? `: ${sync.message}` : ''}`,
  };
}

/**
 * Sets the single ErrorOccurred condition and, when given, the sync's status fields (one patch, written
 * only when something changes); Events on transitions.
 */
export async function writeCondition(
  deps: Pick<SyncRunSteps, 'kc' | 'events' | 'now'>,
  object: SyncRunObject,
  state: SyncRunErrorState,
  logger: Logger,
  sync?: SyncRunSyncStatus,
) {
  const conditions = object.status?.conditions ?? [];
  const existing = findCondition(conditions, SyncRunConditionType.ErrorOccurred);
  const changes = sync ? syncStatusChanges(object.status, sync) : {};
  const next = setCondition(
    conditions.filter((c) => c.type === SyncRunConditionType.ErrorOccurred),
    syncRunCondition(state),
    deps.now(),
  );
  const change = { conditions, next, existing, state, reasons: SyncRunEventReason, alsoStatus: changes };
  await writeErrorConditions(deps, SyncRunCr, object, change, logger);
  const event = phaseEventOf(changes, sync);
  if (sync && event) {
    if (FINISHED_SYNC_RUN_PHASES.has(sync.phase)) logger.info({ phase: sync.phase }, 'sync ended');
    await deps.events.event(SyncRunCr.withTypeMeta(object), event.type, event.reason, event.message);
  }
}

/** `status.health` / `status.syncStatus` for the SyncRun `key` whose sync is `row`. */
export async function applicationStatusOf(
  deps: Pick<SyncRunSteps, 'db' | 'follow'>,
  key: string,
  row: SyncOperationRow,
  object: SyncRunObject,
) {
  let rows: SyncOperationRow[] | undefined;
  let application: ReturnType<typeof parseApplicationState> | undefined;
  if (row.application_id !== null && syncStartedInArgoCd(row)) {
    // Before reading: a change committed after this point wakes the SyncRun again.
    deps.follow(key, row.application_id);
    rows = await listSyncOperationsOfApplication(deps.db, row.application_id);
    const state = await getApplicationState(deps.db, row.application_id);
    application = state ? parseApplicationState(state.state) : undefined;
  }
  const shown = syncRunApplicationStatus(row, rows, application, object.status);
  if (!shown.follow) deps.follow(key, undefined);
  return { health: shown.health, syncStatus: shown.syncStatus };
}

/** A SyncRun whose sync was requested already: updates never create a second one; only its outcome shows. */
export async function reportRequested(
  deps: SyncRunSteps,
  object: SyncRunObject,
  existing: SyncOperationRow,
  terminate: boolean,
  logger: Logger,
): Promise<void> {
  const { namespace = '', name, uid = '' } = object.metadata;
  if (terminate) {
    const operation = await terminateSync(deps.db, { namespace, name, uid });
    if (operation) logger.info({ syncOperation: existing.id, operation: operation.id }, 'sync terminating');
  }
  const lastOperation = await getLatestOperationOfOwner(deps.db, uid, SyncRunCr.resourceType);
  await writeCondition(deps, object, syncRunErrorState(existing, lastOperation), logger, {
    ...syncRunSyncStatus(existing, lastOperation),
    ...(await applicationStatusOf(deps, `${namespace}/${name}`, existing, object)),
  });
}
