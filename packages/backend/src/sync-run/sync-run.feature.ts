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
import type { BackendContext, NotificationReads } from '../backend-feature.ts';
import { type CrController, createCrController } from '../cr-controller.ts';
import type { GitOpsDeploymentFeature } from '../gitops-deployment/gitops-deployment.feature.ts';
import { SyncRunCr, type SyncRunObject } from '../kinds.ts';
import { createSyncRunReconciler } from './sync-run.reconciler.ts';
import { createApplicationFollowers, parentChanged, syncRunsOfParent } from './sync-run.watches.ts';

export type SyncRunFeature = CrController<SyncRunObject>;

export function createSyncRunFeature(
  ctx: BackendContext,
  deps: { deployments: GitOpsDeploymentFeature },
): SyncRunFeature {
  const informer = ctx.kindInformer(SyncRunCr);
  const deployments = deps.deployments.informer;
  const ofParent = syncRunsOfParent(informer);
  const followers = createApplicationFollowers();
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
      follow: followers.follow,
    }),
    watches: (builder) => builder.watches(deployments, ofParent, { predicates: [parentChanged] }),
  });
  /** The SyncRun of a sync_operation row whose report changed (also a deleted one: its rows are released). */
  async function onSyncOperationChanged(syncOperationId: string) {
    const mapping = await getApiCrMappingOfSyncOperation(ctx.db, syncOperationId);
    if (mapping?.cr_kind === SyncRunCr.kind)
      controller.queue.add(`${mapping.cr_namespace}/${mapping.cr_name}`);
  }
  function onApplicationStateChanged(_payload: string, reads: NotificationReads) {
    const applicationId = reads.applicationState()?.applicationId;
    if (applicationId === undefined) return;
    for (const key of followers.keysOf(applicationId)) controller.queue.add(key);
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
