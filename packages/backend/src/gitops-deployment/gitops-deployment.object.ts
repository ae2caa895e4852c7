/**
 * Reading GitOpsDeployment objects from the informer cache (typed `KubeObject`, contents `unknown`):
 * the few fields the backend relies on, parsed leniently so a malformed object never throws.
 */
import type { GitOpsDeploymentCondition } from '@gitops/api';
import { conditionsOfStatus, type KubeObject } from '@gitops/shared';
import { isJsonObject } from '../json.ts';

/** `status` as a plain object ({} when absent or malformed). */
export function statusOf(object: KubeObject): Record<string, unknown> {
  return isJsonObject(object.status) ? object.status : {};
}

/** The well-formed conditions of `status.conditions` (malformed entries are dropped). */
export function conditionsOf(object: KubeObject): GitOpsDeploymentCondition[] {
  return conditionsOfStatus(object.status) as GitOpsDeploymentCondition[];
}

export function isBeingDeleted(object: KubeObject): boolean {
  return typeof object.metadata.deletionTimestamp === 'string' && object.metadata.deletionTimestamp !== '';
}

export function finalizersOf(object: KubeObject): string[] {
  const finalizers = object.metadata.finalizers;
  return Array.isArray(finalizers) ? finalizers.filter((f): f is string => typeof f === 'string') : [];
}
