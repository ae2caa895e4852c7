/**
 * The GitOpsDeploymentSyncRun feature: its CRs (this shard) → the reconciler's work queue; a
 * GitOpsDeployment that appears (or changes generation) → the SyncRuns referencing it (a SyncRun created
 * before its parent proceeds); SyncOperation state changes and changes of what a sync_operation row reports
 * (NOTIFY gitops_sync_operation_changed: Argo CD's phase, revision, times, message, outcome) → the owning
 * SyncRun, whose status then says it within milliseconds; changes of an Application's state (NOTIFY
 * gitops_application_state_changed) → the SyncRuns whose status shows that Application's health and sync
 * status (remembered in memory by their reconciles: no database read per notification); and a slow sweep for
 * rows whose SyncRun is gone.
 */
import { getApiCrMappingOfSyncOperation } from '@gitops/db';
import {
  allOf,
  anyOf,
  generationChanged,
  ignoreDeletes,
  isJsonObject,
  type KubeObject,
  keysFromIndex,
  namespacedIndexValue,
  objectKey,
  uidChanged,
} from '@gitops/shared';
import type { BackendContext } from '../backend-feature.ts';
import { type CrController, createCrController } from '../cr-controller.ts';
import type { GitOpsDeploymentFeature } from '../gitops-deployment/gitops-deployment.feature.ts';
import { SyncRunCr } from '../kinds.ts';
import { createSyncRunReconciler } from './sync-run.reconciler.ts';

export type SyncRunFeature = CrController;

function parentNameOf(syncRun: KubeObject): string | undefined {
  const name = isJsonObject(syncRun.spec) ? syncRun.spec.gitopsDeploymentName : undefined;
  return typeof name === 'string' ? name : undefined;
}

/** Index of the SyncRun cache: `namespace/name` of the GitOpsDeployment a SyncRun references. */
export const SYNC_RUN_PARENT_INDEX = 'parent';

/** The SyncRuns referencing a GitOpsDeployment look again when it appears, is replaced or changes generation. */
export const parentChanged = allOf(anyOf(generationChanged, uidChanged), ignoreDeletes);

export function createSyncRunFeature(
  ctx: BackendContext,
  deps: { deployments: GitOpsDeploymentFeature },
): SyncRunFeature {
  const informer = ctx.informer(SyncRunCr.resource, { sharded: true });
  informer.addIndexers({
    [SYNC_RUN_PARENT_INDEX]: (syncRun) => {
      const parent = parentNameOf(syncRun);
      return parent === undefined ? [] : [namespacedIndexValue(syncRun.metadata.namespace, parent)];
    },
  });
  const deployments = deps.deployments.informer;
  /** Application id → the SyncRun keys that show its health and sync status, and back. */
  const followers = new Map<string, Set<string>>();
  const followed = new Map<string, string>();
  const follow = (key: string, applicationId: string | undefined) => {
    const previous = followed.get(key);
    if (previous === applicationId) return;
    if (previous !== undefined) {
      const keys = followers.get(previous);
      keys?.delete(key);
      if (keys?.size === 0) followers.delete(previous);
    }
    if (applicationId === undefined) {
      followed.delete(key);
      return;
    }
    followed.set(key, applicationId);
    const keys = followers.get(applicationId) ?? new Set<string>();
    keys.add(key);
    followers.set(applicationId, keys);
  };
  const controller = createCrController(ctx, {
    kind: SyncRunCr,
    informer,
    reconcile: createSyncRunReconciler({
      db: ctx.db,
      kc: ctx.kc,
      informer,
      deployments,
      events: ctx.events,
      selector: ctx.selector,
      follow,
    }),
    watches: (builder) =>
      builder.watches(deployments, keysFromIndex(informer, SYNC_RUN_PARENT_INDEX, objectKey), {
        predicates: [parentChanged],
      }),
  });
  /** The SyncRun of a sync_operation row whose report changed (also a deleted one: its rows are released). */
  async function onSyncOperationChanged(syncOperationId: string) {
    const mapping = await getApiCrMappingOfSyncOperation(ctx.db, syncOperationId);
    if (mapping?.cr_kind === SyncRunCr.kind)
      controller.queue.add(`${mapping.cr_namespace}/${mapping.cr_name}`);
  }
  function onApplicationStateChanged(applicationId: string) {
    for (const key of followers.get(applicationId) ?? []) controller.queue.add(key);
  }
  return {
    ...controller,
    notifications: {
      ...controller.notifications,
      syncOperationChanged: onSyncOperationChanged,
      applicationStateChanged: onApplicationStateChanged,
    },
  };
}
