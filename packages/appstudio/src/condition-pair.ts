/**
 * The condition pair of an Environment (`status.conditions`) and of a binding (`status.bindingConditions`),
 * as the original wrote it: `ErrorOccurred` and `Reconciled`, always together, inserted in that order.
 * Times change only when status, reason or message change, so writing the same verdict again is a no-op.
 */
import { AppStudioConditionType, ErrorOccurredReason, resolvedReason } from '@gitops/api';
import { conditionsOfStatus, jsonEqual, type KubeCondition, setKubeCondition } from '@gitops/shared';

export function parseConditions(value: unknown): KubeCondition[] {
  return conditionsOfStatus({ conditions: value });
}

/** ErrorOccurred True / `ErrorOccurred` / message, Reconciled False / `reason` / message. */
export function withError(
  conditions: readonly KubeCondition[],
  reason: string,
  message: string,
  now: Date,
): KubeCondition[] {
  const list = setKubeCondition(
    conditions,
    { type: AppStudioConditionType.ErrorOccurred, status: 'True', reason: ErrorOccurredReason, message },
    now,
  );
  return setKubeCondition(
    list,
    { type: AppStudioConditionType.Reconciled, status: 'False', reason, message },
    now,
  );
}

/** ErrorOccurred False / `ErrorOccurred` / "", Reconciled True / `reason` / "" (a binding's successful pass). */
export function withSuccess(
  conditions: readonly KubeCondition[],
  reason: string,
  now: Date,
): KubeCondition[] {
  const list = setKubeCondition(
    conditions,
    { type: AppStudioConditionType.ErrorOccurred, status: 'False', reason: ErrorOccurredReason, message: '' },
    now,
  );
  return setKubeCondition(
    list,
    { type: AppStudioConditionType.Reconciled, status: 'True', reason, message: '' },
    now,
  );
}

/**
 * An Environment's clean pass: only conditions that exist are touched. ErrorOccurred becomes False and
 * Reconciled True, each with reason `<its old reason>Resolved` and an empty message (unless already so).
 */
export function resolved(conditions: readonly KubeCondition[], now: Date): KubeCondition[] {
  let list = [...conditions];
  for (const [type, status] of [
    [AppStudioConditionType.ErrorOccurred, 'False'],
    [AppStudioConditionType.Reconciled, 'True'],
  ] as const) {
    const existing = list.find((c) => c.type === type);
    if (!existing || existing.status === status) continue;
    list = setKubeCondition(
      list,
      { type, status, reason: resolvedReason(existing.reason ?? ''), message: '' },
      now,
    );
  }
  return list;
}

export function sameConditions(a: readonly KubeCondition[], b: readonly KubeCondition[]): boolean {
  return jsonEqual(a, b);
}
