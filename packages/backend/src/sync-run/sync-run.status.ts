/**
 * GitOpsDeploymentSyncRun spec parsing and its single ErrorOccurred condition (pure).
 * Success (requested, running or Succeeded) is `ErrorOccurred/False/""/""`; every problem is
 * `ErrorOccurred/True/ErrorOccurred/<message>`.
 */
import { ConditionStatus, SyncRunConditionType, SyncRunReason } from '@gitops/api';
import type { OperationRow, SyncOperationRow } from '@gitops/db';
import type { ConditionInput } from '@gitops/shared';
import { isJsonObject } from '../json.ts';

export interface SyncRunSpec {
  gitopsDeploymentName: string;
  /** "" = the deployment's targetRevision. */
  revisionID: string;
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
  return { ok: true, spec: { gitopsDeploymentName: name, revisionID: revision } };
}

/** ErrorOccurred messages of the SyncRun reconciler beyond the ones fixed by docs/api.md. */
export const SyncRunErrorMessage = {
  invalidSpec: (problem: string) => `the GitOpsDeploymentSyncRun is invalid: ${problem}`,
  syncFailed: (outcome: string, message: string) =>
    `the sync ended with phase ${outcome}${message ? `: ${message}` : ''}`,
  requestFailed: (message: string) =>
    `the sync could not be requested in Argo CD: ${message || 'the operation failed'}`,
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
