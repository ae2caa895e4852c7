/**
 * Reading GitOpsDeployment objects from the informer cache (typed `KubeObject`, contents `unknown`):
 * the few fields the backend relies on, parsed leniently so a malformed object never throws.
 */
import type { GitOpsDeploymentCondition } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { isJsonObject } from '../json.ts';

/** `status` as a plain object ({} when absent or malformed). */
export function statusOf(object: KubeObject): Record<string, unknown> {
  return isJsonObject(object.status) ? object.status : {};
}

const conditionStatuses = new Set(['True', 'False', 'Unknown']);

/** The well-formed conditions of `status.conditions` (malformed entries are dropped). */
export function conditionsOf(object: KubeObject): GitOpsDeploymentCondition[] {
  const raw = statusOf(object).conditions;
  if (!Array.isArray(raw)) return [];
  const conditions: GitOpsDeploymentCondition[] = [];
  for (const item of raw) {
    if (!isJsonObject(item) || typeof item.type !== 'string' || !conditionStatuses.has(String(item.status))) {
      continue;
    }
    const condition: GitOpsDeploymentCondition = {
      type: item.type,
      status: item.status as GitOpsDeploymentCondition['status'],
    };
    for (const field of ['reason', 'message', 'lastProbeTime', 'lastTransitionTime'] as const) {
      if (typeof item[field] === 'string') condition[field] = item[field];
    }
    conditions.push(condition);
  }
  return conditions;
}

export function isBeingDeleted(object: KubeObject): boolean {
  return typeof object.metadata.deletionTimestamp === 'string' && object.metadata.deletionTimestamp !== '';
}

export function finalizersOf(object: KubeObject): string[] {
  const finalizers = object.metadata.finalizers;
  return Array.isArray(finalizers) ? finalizers.filter((f): f is string => typeof f === 'string') : [];
}
