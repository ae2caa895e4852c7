/**
 * The three conditions of a GitOpsDeploymentRepositoryCredential (pure): always ErrorOccurred,
 * ValidRepositoryURL, ValidRepositoryCredential in this order; standard metav1.Condition fields.
 * `lastTransitionTime` changes only when a condition's status, reason or message changes, so writing the same
 * outcome again changes nothing (and causes no status write).
 */
import {
  type Condition,
  ConditionStatus,
  RepositoryCredentialReason as Reason,
  RepositoryCredentialMessage,
  repositoryCredentialConditionOrder,
  RepositoryCredentialConditionType as Type,
} from '@gitops/api';
import { findCondition, nextCondition } from '@gitops/shared';

/** What a reconcile found out. Messages never contain a credential. */
export type RepositoryCredentialOutcome =
  | { kind: 'valid'; repository: string }
  | { kind: 'secretNotSpecified' }
  | { kind: 'secretNotFound'; secret: string }
  | { kind: 'secretInvalidType'; secret: string; type: string }
  | { kind: 'secretInvalidContent'; secret: string; problem: string }
  | { kind: 'invalidRepositoryUrl'; repository: string; detail: string }
  | { kind: 'invalidCredentials'; repository: string; secret: string }
  | { kind: 'error'; message: string };

export const RepositoryCredentialErrorMessage = {
  secretNotSpecified: 'Secret field is missing value: spec.secret must name a Secret in this namespace',
  secretNotFound: (secret: string) =>
    `Secret '${secret}' not found in the namespace of the RepositoryCredential`,
  secretInvalidType: (secret: string, type: string) =>
    `Secret '${secret}' has type '${type}'; the type must be 'managed-gitops.redhat.com/repository-credential' or 'Opaque' (no type)`,
  secretInvalidContent: (secret: string, problem: string) => `Secret '${secret}' is invalid: ${problem}`,
  invalidRepositoryUrl: (repository: string, detail: string) =>
    `Repository ${repository} does not exist or cannot be reached: ${detail}`,
  operationFailed: (message: string) =>
    `the Argo CD repository Secret could not be updated: ${message || 'the operation failed'}`,
  invalidCredentials: (repository: string, secret: string) =>
    `The credentials in Secret '${secret}' were rejected by repository ${repository}`,
} as const;

interface Desired {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
}

/** The three desired conditions of an outcome (without times). */
export function desiredConditions(outcome: RepositoryCredentialOutcome): Desired[] {
  const { True, False } = ConditionStatus;
  const failure = (reason: string, message: string): Desired[] => [
    { type: Type.ErrorOccurred, status: True, reason, message },
    { type: Type.ValidRepositoryURL, status: False, reason, message },
    { type: Type.ValidRepositoryCredential, status: False, reason, message },
  ];
  switch (outcome.kind) {
    case 'valid':
      return [
        {
          type: Type.ErrorOccurred,
          status: False,
          reason: Reason.RepositoryCredentialUpToDate,
          message: RepositoryCredentialMessage.Valid,
        },
        {
          type: Type.ValidRepositoryURL,
          status: True,
          reason: Reason.ValidRepositoryUrl,
          message: RepositoryCredentialMessage.repositoryExists(outcome.repository),
        },
        {
          type: Type.ValidRepositoryCredential,
          status: True,
          reason: Reason.RepositoryCredentialUpToDate,
          message: RepositoryCredentialMessage.Valid,
        },
      ];
    case 'secretNotSpecified':
      return failure(Reason.SecretNotSpecified, RepositoryCredentialErrorMessage.secretNotSpecified);
    case 'secretNotFound':
      return failure(Reason.SecretNotFound, RepositoryCredentialErrorMessage.secretNotFound(outcome.secret));
    case 'secretInvalidType':
      return failure(
        Reason.SecretInvalidType,
        RepositoryCredentialErrorMessage.secretInvalidType(outcome.secret, outcome.type),
      );
    case 'secretInvalidContent':
      return failure(
        Reason.SecretInvalidType,
        RepositoryCredentialErrorMessage.secretInvalidContent(outcome.secret, outcome.problem),
      );
    case 'invalidRepositoryUrl':
      return failure(
        Reason.InvalidRepositoryUrl,
        RepositoryCredentialErrorMessage.invalidRepositoryUrl(outcome.repository, outcome.detail),
      );
    case 'invalidCredentials': {
      const message = RepositoryCredentialErrorMessage.invalidCredentials(outcome.repository, outcome.secret);
      return [
        { type: Type.ErrorOccurred, status: True, reason: Reason.InvalidCredentials, message },
        {
          type: Type.ValidRepositoryURL,
          status: True,
          reason: Reason.ValidRepositoryUrl,
          message: RepositoryCredentialMessage.repositoryExists(outcome.repository),
        },
        { type: Type.ValidRepositoryCredential, status: False, reason: Reason.InvalidCredentials, message },
      ];
    }
    case 'error':
      return failure(Reason.ErrorOccurred, outcome.message);
  }
}

/**
 * The conditions to write: the three desired ones in order, each keeping its existing
 * `lastTransitionTime` when status, reason and message are unchanged (other condition types are dropped).
 */
export function nextConditions(
  existing: readonly Condition[],
  outcome: RepositoryCredentialOutcome,
  now: Date,
  observedGeneration: number | undefined,
  /** The agent could not write the repository Secret: ErrorOccurred says so, the other two keep the validation. */
  operationFailure?: string,
): Condition[] {
  const desired = desiredConditions(outcome);
  if (operationFailure !== undefined) {
    desired[0] = {
      type: Type.ErrorOccurred,
      status: ConditionStatus.True,
      reason: Reason.ErrorOccurred,
      message: RepositoryCredentialErrorMessage.operationFailed(operationFailure),
    };
  }
  return repositoryCredentialConditionOrder.map((type) => {
    const want = desired.find((d) => d.type === type)!;
    return nextCondition(findCondition(existing, type), { ...want, observedGeneration }, now) as Condition;
  });
}
