/**
 * GitOpsDeploymentSyncRun spec parsing, its single ErrorOccurred condition and the sync's own status fields
 * (pure). Success (requested, running or Succeeded) is `ErrorOccurred/False/""/""`; every problem is
 * `ErrorOccurred/True/ErrorOccurred/<message>`. `phase`, `revision`, `startedAt`, `finishedAt` and `message`
 * say where the sync is and how it ended, from the sync_operation row (what Argo CD reported about it);
 * `health` and `syncStatus` what the Application shows for this sync (the agent's application_state).
 */
import {
  ConditionStatus,
  type GitOpsDeploymentSyncRunStatus,
  SyncRunConditionType,
  SyncRunReason,
} from '@gitops/api';
import type { OperationRow, SyncOperationRow } from '@gitops/db';
import { syncOperationIdOf } from '@gitops/db';
import type { ConditionInput } from '@gitops/shared';
import { isJsonObject } from '../json.ts';

export interface SyncRunSpec {
  gitopsDeploymentName: string;
  /** "" = the deployment's targetRevision. */
  revisionID: string;
  /** The user asked to stop the sync (it stays stopped). */
  terminate: boolean;
}

export type SyncRunSpecParseResult = { ok: true; spec: SyncRunSpec } | { ok: false; problem: string };

/** `spec` of a SyncRun (`revisionId` is the doc's alias of `revisionID`). */
export function parseSyncRunSpec(spec: unknown): SyncRunSpecParseResult {
  if (!isJsonObject(spec)) return { ok: false, problem: 'spec: must be an object' };
  const name = spec.gitopsDeploymentName;
  if (typeof name !== 'string' || name === '') {
    return { ok: false, problem: 'spec.gitopsDeploymentName: must be a non-empty string' };
  }
  const revision = spec.revisionID ?? spec.revisionId ?? '';
  if (typeof revision !== 'string') return { ok: false, problem: 'spec.revisionID: must be a string' };
  const terminate = spec.terminate ?? false;
  if (typeof terminate !== 'boolean') return { ok: false, problem: 'spec.terminate: must be a boolean' };
  return { ok: true, spec: { gitopsDeploymentName: name, revisionID: revision, terminate } };
}

/** ErrorOccurred messages of the SyncRun reconciler beyond the ones fixed by docs/api.md. */
export const SyncRunErrorMessage = {
  invalidSpec: (problem: string) => `the GitOpsDeploymentSyncRun is invalid: ${problem}`,
  syncFailed: (outcome: string, message: string) =>
    `the sync ended with phase ${outcome}${message ? `: ${message}` : ''}`,
  requestFailed: (message: string) =>
    `the sync could not be requested in Argo CD: ${message || 'the operation failed'}`,
} as const;

/** Why a sync ended without Argo CD (status.message). */
export const SyncRunSyncMessage = {
  terminatedBeforeRequest: 'terminated before the sync was requested',
} as const;

export type SyncRunErrorState = { status: 'error'; message: string } | { status: 'ok' };

/** What the SyncRun's condition says about its sync row and the last operation announcing it. */
export function syncRunErrorState(
  row: Pick<SyncOperationRow, 'outcome' | 'outcome_message'>,
  lastOperation: Pick<OperationRow, 'state' | 'message'> | undefined,
): SyncRunErrorState {
  if (row.outcome !== null && row.outcome !== 'Succeeded') {
    return { status: 'error', message: SyncRunErrorMessage.syncFailed(row.outcome, row.outcome_message) };
  }
  if (row.outcome === null && lastOperation?.state === 'Failed') {
    return { status: 'error', message: SyncRunErrorMessage.requestFailed(lastOperation.message) };
  }
  return { status: 'ok' };
}

/** The single condition for an error state. */
export function syncRunCondition(state: SyncRunErrorState): ConditionInput {
  return state.status === 'error'
    ? {
        type: SyncRunConditionType.ErrorOccurred,
        status: ConditionStatus.True,
        reason: SyncRunReason.ErrorOccurred,
        message: state.message,
      }
    : { type: SyncRunConditionType.ErrorOccurred, status: ConditionStatus.False, reason: '', message: '' };
}

export const SyncRunPhase = {
  Pending: 'Pending',
  Running: 'Running',
  Succeeded: 'Succeeded',
  Failed: 'Failed',
  Terminated: 'Terminated',
} as const;
export type SyncRunPhase = (typeof SyncRunPhase)[keyof typeof SyncRunPhase];

/** The phases after which nothing changes any more. */
export const FINISHED_SYNC_RUN_PHASES: ReadonlySet<SyncRunPhase> = new Set([
  SyncRunPhase.Succeeded,
  SyncRunPhase.Failed,
  SyncRunPhase.Terminated,
]);

/**
 * The SyncRun's status fields besides conditions. `null` = absent (a merge patch removes it), so the fields
 * of a status always say the same as the row (and, for `health` and `syncStatus`, as the Application).
 */
export interface SyncRunSyncStatus {
  phase: SyncRunPhase;
  revision: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  message: string | null;
  /** Argo CD's Application `status.health.status` for this sync (see {@link syncRunApplicationStatus}). */
  health: string | null;
  /** Argo CD's Application `status.sync.status` for this sync. */
  syncStatus: string | null;
}

const SYNC_STATUS_FIELDS = [
  'phase',
  'revision',
  'startedAt',
  'finishedAt',
  'message',
  'health',
  'syncStatus',
] as const;

/** Kubernetes date-time: whole seconds, like Argo CD's and metadata timestamps. */
function kubeTime(date: Date | null): string | null {
  return date === null ? null : `${date.toISOString().slice(0, 19)}Z`;
}

/**
 * Where the sync is. No row: nothing was requested (the parent is missing or automated: Pending, as the
 * SyncRun proceeds once that is fixed) unless the user terminated it first. With a row: Argo CD's outcome
 * (Failed and Error are both Failed), Running once Argo CD reports the sync running (or terminating),
 * Failed when the agent gave up requesting it, else Pending.
 */
export function syncRunSyncStatus(
  row:
    | Pick<
        SyncOperationRow,
        | 'outcome'
        | 'outcome_message'
        | 'argocd_phase'
        | 'synced_revision'
        | 'started_at'
        | 'finished_at'
        | 'argocd_message'
      >
    | undefined,
  lastOperation: Pick<OperationRow, 'state' | 'message'> | undefined,
  terminated = false,
): SyncRunSyncStatus {
  const none = { revision: null, startedAt: null, finishedAt: null, health: null, syncStatus: null };
  if (!row) {
    return terminated
      ? { phase: SyncRunPhase.Terminated, ...none, message: SyncRunSyncMessage.terminatedBeforeRequest }
      : { phase: SyncRunPhase.Pending, ...none, message: null };
  }
  let phase: SyncRunPhase;
  let message = row.outcome !== null ? row.outcome_message : row.argocd_message;
  if (row.outcome === 'Succeeded') phase = SyncRunPhase.Succeeded;
  else if (row.outcome === 'Terminated') phase = SyncRunPhase.Terminated;
  else if (row.outcome !== null) phase = SyncRunPhase.Failed;
  else if (lastOperation?.state === 'Failed') {
    phase = SyncRunPhase.Failed;
    message = SyncRunErrorMessage.requestFailed(lastOperation.message);
  } else if (row.argocd_phase === 'Running' || row.argocd_phase === 'Terminating')
    phase = SyncRunPhase.Running;
  else phase = SyncRunPhase.Pending;
  return {
    phase,
    revision: row.synced_revision || null,
    startedAt: kubeTime(row.started_at),
    finishedAt: kubeTime(row.finished_at),
    message: message || null,
    health: null,
    syncStatus: null,
  };
}

type SyncRowProgress = Pick<SyncOperationRow, 'id' | 'argocd_phase' | 'started_at'>;

/** Argo CD has reported this sync (running, terminating or ended): the Application now shows its effect. */
export function syncStartedInArgoCd(row: SyncRowProgress): boolean {
  return row.argocd_phase !== null || row.started_at !== null;
}

/**
 * `status.health` and `status.syncStatus` of a SyncRun: the Application's health and sync status from the
 * moment Argo CD starts this sync until Argo CD starts a later sync of the same Application (`rowsOfApplication`,
 * in creation order); from then on, what was shown stays (it described this sync). So a finished sync's
 * SyncRun still turns `Healthy` when what it deployed becomes healthy after the sync, and `Synced` once Argo CD
 * compared again. Before Argo CD starts the sync (queued, requested, never requested) both are absent: the
 * Application's state says nothing about this sync yet. The Application's `operationState` naming another of
 * our syncs counts too: the state can show a later sync before that sync's own progress is recorded.
 *
 * `follow`: the Application is this sync's (its state changes must wake the SyncRun); `keep`: the values stay
 * as the SyncRun's status has them (a later sync started, or the Application is gone).
 */
export function syncRunApplicationStatus(
  row: (SyncRowProgress & Pick<SyncOperationRow, 'application_id'>) | undefined,
  rowsOfApplication: readonly SyncRowProgress[] | undefined,
  application:
    | {
        health?: { status: string };
        sync?: { status: string };
        operationState?: { operation?: unknown };
      }
    | undefined,
  currentStatus: GitOpsDeploymentSyncRunStatus | undefined,
): { health: string | null; syncStatus: string | null; follow: boolean } {
  if (!row || !syncStartedInArgoCd(row)) return { health: null, syncStatus: null, follow: false };
  const index = rowsOfApplication?.findIndex((r) => r.id === row.id) ?? -1;
  // The Application's state may already show another of our syncs before that sync's progress is recorded
  // (two controllers of the agent write them): a later one (or one not listed yet) supersedes this sync; an
  // earlier one means the state is older than this sync's start. Either way it says nothing about this sync.
  const shownSync = syncOperationIdOf(application?.operationState?.operation);
  const shownIndex =
    shownSync === undefined ? -1 : (rowsOfApplication?.findIndex((r) => r.id === shownSync) ?? -1);
  const showsOther = shownSync !== undefined && shownSync !== row.id;
  const superseded =
    index >= 0 &&
    (rowsOfApplication!.slice(index + 1).some(syncStartedInArgoCd) ||
      (showsOther && shownIndex < 0) ||
      shownIndex > index);
  if (row.application_id === null || index < 0 || superseded || showsOther || !application) {
    return {
      health: currentStatus?.health || null,
      syncStatus: currentStatus?.syncStatus || null,
      follow: !superseded && row.application_id !== null && index >= 0,
    };
  }
  return {
    health: application.health?.status || null,
    syncStatus: application.sync?.status || null,
    follow: true,
  };
}

/** The fields of `next` that differ from `status` (absent and null are the same); {} when none. */
export function syncStatusChanges(
  status: GitOpsDeploymentSyncRunStatus | undefined,
  next: SyncRunSyncStatus,
): Partial<SyncRunSyncStatus> {
  const changes: Record<string, unknown> = {};
  for (const field of SYNC_STATUS_FIELDS) {
    if ((status?.[field] ?? null) !== next[field]) changes[field] = next[field];
  }
  return changes as Partial<SyncRunSyncStatus>;
}
