/**
 * Syncs (GitOpsDeploymentSyncRun → sync_operation) as one feature: `SyncOperation` resources are requested
 * from Argo CD one at a time per application, and an Application whose sync moved (its `operation` or
 * `status.operationState` changed) wakes its running sync at once, through a controller of Applications.
 */
import {
  allOf,
  ignoreCreates,
  ignoreDeletes,
  jsonEqual,
  type KubeObject,
  newController,
  splitObjectKey,
  updatePredicate,
} from '@gitops/shared';
import type { AgentFeature, FeatureContext } from '../agent-feature.ts';
import { databaseIdOf } from '../argocd.ts';
import { createSyncOperationReconciler } from './sync-operation.reconciler.ts';
import { isOurOperation } from './sync-request.ts';

const operationStateOf = (app: KubeObject) =>
  (app.status as { operationState?: unknown } | undefined)?.operationState;

/** Whether the Application's requested or reported operation is a sync we requested. */
const followsOurSync = (app: KubeObject) =>
  isOurOperation(app.operation) ||
  isOurOperation((operationStateOf(app) as { operation?: unknown } | undefined)?.operation);

/**
 * The Application's sync moved: Argo CD took, ran or ended the operation we requested. Argo CD's automated
 * syncs move operationState two or three times per change of every Application: they are not a SyncRun's, and
 * looking for one cost a database read each (issue 34).
 */
export const syncMoved = allOf(
  ignoreCreates,
  ignoreDeletes,
  updatePredicate(
    'our operation or its operationState changed',
    (old, app) =>
      (followsOurSync(old) || followsOurSync(app)) &&
      (!jsonEqual(old.operation, app.operation) || !jsonEqual(operationStateOf(old), operationStateOf(app))),
  ),
);

export function createSyncRunFeature(ctx: FeatureContext): AgentFeature {
  const reconciler = createSyncOperationReconciler(ctx, {
    enqueue: (id) => ctx.enqueue('SyncOperation', id),
  });
  const wakeups = newController('cluster-agent-sync-wakeups', ctx)
    .for(ctx.applications, { predicates: [syncMoved] })
    .complete(async (key) => {
      const { namespace, name } = splitObjectKey(key);
      const application = ctx.applications.get(namespace, name);
      const id = application && databaseIdOf(application);
      if (id) await reconciler.wakeRunningSync(id);
    });
  return {
    name: 'sync-run',
    informers: wakeups.informers,
    handles: {
      SyncOperation: (id, { signal, logger }) => reconciler.reconcileSyncOperation(id, { signal, logger }),
    },
    start: wakeups.start,
    stop: wakeups.stop,
  };
}
