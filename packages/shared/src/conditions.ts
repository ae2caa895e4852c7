/**
 * Condition bookkeeping, one module for every kind. A condition's times change only when its status,
 * reason or message changes, so writing the same condition again changes nothing and causes no status
 * write (an idle system makes no API writes). Two flavours exist in our APIs:
 * - the original GitOps API's conditions (`lastProbeTime` and `lastTransitionTime`, no generation):
 *   `setCondition`. `lastProbeTime` is when the controller last wrote its verdict (a new status, reason or
 *   message); `lastTransitionTime` when the status last changed (a new message with the same status moves
 *   only `lastProbeTime`). Re-writing an unchanged verdict only to refresh `lastProbeTime` would cost a status
 *   write per object on every resync, so it is not done;
 * - Kubernetes' metav1.Condition (`observedGeneration`, `lastTransitionTime`): `nextCondition` /
 *   `setKubeCondition`.
 */

export type ConditionStatusValue = 'True' | 'False' | 'Unknown';

/** The fields any of our conditions may carry. */
export interface KubeCondition {
  type: string;
  status: ConditionStatusValue;
  observedGeneration?: number;
  reason?: string;
  message?: string;
  lastProbeTime?: string;
  lastTransitionTime?: string;
}

export interface ConditionInput {
  type: string;
  status: ConditionStatusValue;
  reason: string;
  message: string;
}

/** RFC 3339 without fractions, as Kubernetes writes metav1.Time. */
export function kubeTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function findCondition<C extends KubeCondition>(
  conditions: readonly C[] | undefined,
  type: string,
): C | undefined {
  return conditions?.find((c) => c.type === type);
}

const statuses: ReadonlySet<unknown> = new Set(['True', 'False', 'Unknown']);

/** The well-formed conditions of a `status` (anything from the API server; malformed entries dropped). */
export function conditionsOfStatus(status: unknown): KubeCondition[] {
  const raw =
    typeof status === 'object' && status !== null ? (status as { conditions?: unknown }).conditions : [];
  if (!Array.isArray(raw)) return [];
  const conditions: KubeCondition[] = [];
  for (const item of raw) {
    if (typeof item !== 'object' || item === null) continue;
    const c = item as Record<string, unknown>;
    if (typeof c.type !== 'string' || !statuses.has(c.status)) continue;
    const condition: KubeCondition = { type: c.type, status: c.status as ConditionStatusValue };
    if (typeof c.observedGeneration === 'number') condition.observedGeneration = c.observedGeneration;
    for (const field of ['reason', 'message', 'lastProbeTime', 'lastTransitionTime'] as const) {
      if (typeof c[field] === 'string') condition[field] = c[field];
    }
    conditions.push(condition);
  }
  return conditions;
}

function sameCondition(existing: KubeCondition, input: ConditionInput): boolean {
  return (
    existing.status === input.status &&
    (existing.reason ?? '') === input.reason &&
    (existing.message ?? '') === input.message
  );
}

/**
 * GitOps API flavour: returns `conditions` with `input` set: unchanged when an equal condition exists (same
 * array contents); replaced in place when its status, reason or message differs (`lastProbeTime` = `now`;
 * `lastTransitionTime` = `now` only when the status differs, else kept); appended when new (both `now`).
 */
export function setCondition(
  conditions: readonly KubeCondition[] | undefined,
  input: ConditionInput,
  now: Date,
): KubeCondition[] {
  const list = [...(conditions ?? [])];
  const index = list.findIndex((c) => c.type === input.type);
  const existing = index >= 0 ? list[index] : undefined;
  if (existing && sameCondition(existing, input)) return list;
  const time = kubeTime(now);
  const transition = existing?.status !== input.status || !existing.lastTransitionTime;
  const condition: KubeCondition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message: input.message,
    lastProbeTime: time,
    lastTransitionTime: transition ? time : existing.lastTransitionTime,
  };
  if (index >= 0) list[index] = condition;
  else list.push(condition);
  return list;
}

/**
 * metav1.Condition flavour: the condition `input` becomes, given the one of the same type that exists:
 * its `lastTransitionTime` is kept when status, reason and message are unchanged, else `now`;
 * `observedGeneration` is the generation this verdict is about (when known).
 */
export function nextCondition(
  existing: KubeCondition | undefined,
  input: ConditionInput & { observedGeneration?: number },
  now: Date,
): KubeCondition {
  const unchanged = existing !== undefined && sameCondition(existing, input);
  return {
    type: input.type,
    status: input.status,
    ...(input.observedGeneration !== undefined ? { observedGeneration: input.observedGeneration } : {}),
    reason: input.reason,
    message: input.message,
    lastTransitionTime:
      unchanged && existing.lastTransitionTime ? existing.lastTransitionTime : kubeTime(now),
  };
}

/** metav1.Condition flavour of setCondition: `input` replaces the condition of its type (or is appended). */
export function setKubeCondition(
  conditions: readonly KubeCondition[],
  input: ConditionInput & { observedGeneration?: number },
  now: Date,
): KubeCondition[] {
  const list = [...conditions];
  const index = list.findIndex((c) => c.type === input.type);
  const condition = nextCondition(index >= 0 ? list[index] : undefined, input, now);
  if (index >= 0) list[index] = condition;
  else list.push(condition);
  return list;
}
