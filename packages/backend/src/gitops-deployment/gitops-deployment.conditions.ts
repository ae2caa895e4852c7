/**
 * The GitOpsDeployment's status side: its ErrorOccurred condition (owned by this reconciler; Events on
 * transitions) and the states it shows: a failed operation, an engine instance away. Each step is a top-level
 * function over the reconciler's `deps` (`GitOpsDeploymentSteps`), so a test calls it with plain objects.
 */
import {
  ConditionStatus,
  DeploymentEventReason,
  Finalizer,
  GitOpsDeploymentConditionType,
  GitOpsDeploymentReason,
  PlacementMessage,
} from '@gitops/api';
import { getEngineInstance, isAgentListening, type OperationRow } from '@gitops/db';
import { findCondition, type KubeCondition, type Logger, setCondition } from '@gitops/shared';
import { type ErrorState, writeErrorConditions } from '../error-occurred.ts';
import { GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import { applicationOperationsOutcome } from './application.store.ts';
import type { GitOpsDeploymentSteps } from './gitops-deployment.reconciler.ts';

/** ErrorOccurred messages of this reconciler beyond the ones fixed by docs/api.md. */
export const DeploymentErrorMessage = {
  invalidSpec: (problem: string) => `the GitOpsDeployment is invalid: ${problem}`,
  applicationOperationFailed: (message: string) =>
    `the Argo CD Application could not be updated: ${message || 'the operation failed'}`,
  applicationDeleteFailed: (message: string) =>
    `the Argo CD Application could not be deleted, so the deployed resources may remain (the finalizer ${Finalizer.GitOpsDeploymentResources} is kept): ${message || 'the operation failed'}`,
} as const;

/**
 * The conditions with ErrorOccurred set to `state`, or undefined when there is nothing to write: "Resolved"
 * only makes sense for an error that was reported.
 */
export function nextErrorOccurred(
  conditions: readonly KubeCondition[],
  existing: KubeCondition | undefined,
  state: ErrorState,
  now: Date,
): KubeCondition[] | undefined {
  if (state.status === 'error') {
    return setCondition(
      conditions,
      {
        type: GitOpsDeploymentConditionType.ErrorOccurred,
        status: ConditionStatus.True,
        reason: GitOpsDeploymentReason.ErrorOccurred,
        message: state.message,
      },
      now,
    );
  }
  if (!existing) return undefined;
  return setCondition(
    conditions,
    {
      type: GitOpsDeploymentConditionType.ErrorOccurred,
      status: ConditionStatus.False,
      reason: GitOpsDeploymentReason.ErrorOccurredResolved,
      message: '',
    },
    now,
  );
}

/** Sets ErrorOccurred (only writes when it changes); Events on transitions. */
export async function writeErrorOccurred(
  deps: Pick<GitOpsDeploymentSteps, 'kc' | 'events' | 'now' | 'errorReported'>,
  object: GitOpsDeploymentObject,
  state: ErrorState,
  logger: Logger,
) {
  const uid = object.metadata.uid;
  // Before the write: a Completed operation must not be skipped while this error may be on its way.
  if (uid && state.status === 'error') deps.errorReported?.add(uid);
  const conditions = object.status?.conditions ?? [];
  const existing = findCondition(conditions, GitOpsDeploymentConditionType.ErrorOccurred);
  const next = nextErrorOccurred(conditions, existing, state, deps.now());
  if (!next) return;
  const change = { conditions, next, existing, state, reasons: DeploymentEventReason };
  await writeErrorConditions(deps, GitOpsDeploymentCr, object, change, logger);
  if (uid && state.status === 'ok') deps.errorReported?.delete(uid);
}

/** The state a finished operation shows: its failure (with `message` around the agent's), else none. */
export function failedOperationState(
  operation: OperationRow | undefined,
  message: (m: string) => string,
): ErrorState {
  return operation?.state === 'Failed'
    ? { status: 'error', message: message(operation.message) }
    : { status: 'ok' };
}

/** ErrorOccurred from the outcome of the application's operations (a failure shows until the next one). */
export async function reportOperationOutcome(
  deps: GitOpsDeploymentSteps,
  object: GitOpsDeploymentObject,
  uid: string,
  applicationId: string,
  logger: Logger,
) {
  const outcome = await applicationOperationsOutcome(deps.db, uid, applicationId);
  const errorState = outcome.pending
    ? await awayState(deps, outcome.oldestWaiting)
    : failedOperationState(outcome.lastFinished, DeploymentErrorMessage.applicationOperationFailed);
  await writeErrorOccurred(deps, object, errorState, logger);
}

/**
 * A change that has waited longer than `engineInstanceAwayAfterMs` for an instance no agent listens for now
 * is reported (the periodic look in the feature queues such deployments); otherwise waiting is fine.
 */
export async function awayState(
  deps: Pick<GitOpsDeploymentSteps, 'db' | 'engineInstanceAwayAfterMs'>,
  waiting: OperationRow | undefined,
): Promise<ErrorState> {
  const awayAfter = deps.engineInstanceAwayAfterMs;
  if (!waiting || awayAfter === undefined) return { status: 'ok' };
  const waited = Date.now() - waiting.created_at.getTime();
  if (waited < awayAfter || (await isAgentListening(deps.db, waiting.engine_instance_id)))
    return { status: 'ok' };
  const instance = await getEngineInstance(deps.db, waiting.engine_instance_id);
  return {
    status: 'error',
    message: PlacementMessage.instanceAway(
      instance?.name ?? waiting.engine_instance_id,
      Math.floor(waited / 60_000),
    ),
  };
}
