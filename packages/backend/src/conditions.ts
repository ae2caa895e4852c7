/**
 * Condition bookkeeping for GitOpsDeployment status: a condition's `lastTransitionTime` (and
 * `lastProbeTime`) change only when its status, reason or message changes, so writing the same
 * condition again changes nothing and causes no status write.
 */
import type { GitOpsDeploymentCondition } from '@gitops/api';

export interface ConditionInput {
  type: string;
  status: GitOpsDeploymentCondition['status'];
  reason: string;
  message: string;
}

/** RFC 3339 without fractions, as Kubernetes writes metav1.Time. */
export function kubeTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function findCondition(
  conditions: readonly GitOpsDeploymentCondition[] | undefined,
  type: string,
): GitOpsDeploymentCondition | undefined {
  return conditions?.find((c) => c.type === type);
}

function sameCondition(existing: GitOpsDeploymentCondition, input: ConditionInput): boolean {
  return (
    existing.status === input.status &&
    (existing.reason ?? '') === input.reason &&
    (existing.message ?? '') === input.message
  );
}

/**
 * Returns `conditions` with `input` set: unchanged when an equal condition exists (same array contents),
 * replaced in place when it differs (times set to `now`), appended when new.
 */
export function setCondition(
  conditions: readonly GitOpsDeploymentCondition[] | undefined,
  input: ConditionInput,
  now: Date,
): GitOpsDeploymentCondition[] {
  const list = [...(conditions ?? [])];
  const index = list.findIndex((c) => c.type === input.type);
  const existing = index >= 0 ? list[index] : undefined;
  if (existing && sameCondition(existing, input)) return list;
  const time = kubeTime(now);
  const condition: GitOpsDeploymentCondition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message: input.message,
    lastProbeTime: time,
    lastTransitionTime: time,
  };
  if (index >= 0) list[index] = condition;
  else list.push(condition);
  return list;
}
