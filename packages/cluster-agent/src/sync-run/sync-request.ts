/**
 * How a sync_operation row becomes an Argo CD sync request and how its result is recognised (pure).
 * Argo CD copies the requested `operation` into `status.operationState.operation`, so the request carries
 * the row id in `operation.info`; a result whose copy lacks it is matched by `startedAt` (Argo CD writes
 * whole seconds) not before the request.
 */

import { FieldManager } from '@gitops/api';
import type { SyncOperationRow, SyncOutcome } from '@gitops/db';
import { SYNC_OPERATION_INFO, syncOperationIdOf } from '@gitops/db';
import type { KubeObject } from '@gitops/shared';

/** `operation.initiatedBy.username` of every sync we request. */
export const SYNC_INITIATOR = 'gitops-service';
/** Our field manager for the `operation` field and the refresh annotation (not the applier's). */
export const SYNC_FIELD_MANAGER = FieldManager.ClusterAgentSync;
export { REFRESH_ANNOTATION } from '../argocd.ts';

const TERMINAL_PHASES = new Set<string>(['Succeeded', 'Failed', 'Error', 'Terminated']);

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The Application's `spec.source.targetRevision` ("" when absent). */
export function targetRevisionOf(app: KubeObject): string {
  const source = isObject(app.spec) && isObject(app.spec.source) ? app.spec.source : {};
  return typeof source.targetRevision === 'string' ? source.targetRevision : '';
}

/** The top-level `operation` that asks Argo CD for this sync. */
export function syncOperationRequest(
  row: Pick<SyncOperationRow, 'id' | 'revision'>,
  app: KubeObject,
): Record<string, unknown> {
  return {
    initiatedBy: { username: SYNC_INITIATOR },
    info: [{ name: SYNC_OPERATION_INFO, value: row.id }],
    sync: { revision: row.revision || targetRevisionOf(app) },
  };
}

/**
 * Whether `operation` (an Application's `operation`, or Argo CD's copy of it in `status.operationState`) is a
 * sync we requested: automated syncs (`initiatedBy.automated`) and anyone else's are not ours to follow.
 */
export function isOurOperation(operation: unknown): boolean {
  return (
    isObject(operation) &&
    isObject(operation.initiatedBy) &&
    operation.initiatedBy.username === SYNC_INITIATOR
  );
}

/**
 * True while the Application's `operation` is our request for this row and Argo CD has not started it.
 * Argo CD keeps `operation` for as long as the operation runs (it clears it when the operation completes),
 * so a request whose id `status.operationState` already reports is running, not pending.
 */
export function isRequestPending(app: KubeObject, syncOperationId: string): boolean {
  if (syncOperationIdOf(app.operation) !== syncOperationId) return false;
  const state = isObject(app.status) ? app.status.operationState : undefined;
  return !(isObject(state) && syncOperationIdOf(state.operation) === syncOperationId);
}

export interface ObservedSync {
  phase: string;
  message: string;
  finished: boolean;
  /** `syncResult.revision`: the commit Argo CD synced ("" until it knows). */
  revision: string;
  startedAt: Date | null;
  finishedAt: Date | null;
}

function timeOf(value: unknown): Date | null {
  if (typeof value !== 'string' || value === '') return null;
  const time = Date.parse(value);
  return Number.isNaN(time) ? null : new Date(time);
}

/** `status.operationState` when it reports this row's sync; undefined when it reports another one (or none). */
export function observedSync(
  app: KubeObject,
  row: Pick<SyncOperationRow, 'id' | 'requested_at'>,
): ObservedSync | undefined {
  const status = isObject(app.status) ? app.status : {};
  const state = status.operationState;
  if (!isObject(state) || typeof state.phase !== 'string') return undefined;
  const id = syncOperationIdOf(state.operation);
  if (id !== undefined) {
    if (id !== row.id) return undefined;
  } else {
    // No id in the copy: a run started at or after our request (whole seconds) is ours.
    if (!row.requested_at || typeof state.startedAt !== 'string') return undefined;
    const started = Date.parse(state.startedAt);
    if (Number.isNaN(started) || started < Math.floor(row.requested_at.getTime() / 1000) * 1000) {
      return undefined;
    }
  }
  const syncResult = isObject(state.syncResult) ? state.syncResult : {};
  return {
    phase: state.phase,
    message: typeof state.message === 'string' ? state.message : '',
    revision: typeof syncResult.revision === 'string' ? syncResult.revision : '',
    startedAt: timeOf(state.startedAt),
    finishedAt: timeOf(state.finishedAt),
    finished:
      TERMINAL_PHASES.has(state.phase) && typeof state.finishedAt === 'string' && state.finishedAt !== '',
  };
}

/**
 * The sync_operation outcome of a finished Argo CD phase. Argo CD has no phase of its own for a terminated
 * sync (it ends `Failed`, "Operation terminated"), so a sync that did not succeed after we asked Argo CD to
 * terminate it (`terminating`) is `Terminated`.
 */
export function outcomeOfPhase(phase: string, terminating = false): SyncOutcome {
  if (terminating && phase !== 'Succeeded') return 'Terminated';
  switch (phase) {
    case 'Succeeded':
    case 'Failed':
    case 'Terminated':
      return phase;
    default:
      return 'Error';
  }
}
