/**
 * Syncs (GitOpsDeploymentSyncRun → sync_operation) as one feature: `SyncOperation` resources are requested
 * from Argo CD one at a time per application, and an Application update wakes its running sync.
 */
import type { AgentFeature, FeatureContext } from '../agent-feature.ts';
import { createSyncOperationReconciler } from './sync-operation.reconciler.ts';

export function createSyncRunFeature(ctx: FeatureContext): AgentFeature {
  const reconciler = createSyncOperationReconciler(ctx, {
    enqueue: (id) => ctx.enqueue('SyncOperation', id),
  });
  ctx.applications.onUpdate((old, app) => reconciler.onApplicationChanged(old, app));
  return {
    name: 'sync-run',
    informers: [ctx.applications],
    handles: {
      SyncOperation: (id, { signal, logger }) => reconciler.reconcileSyncOperation(id, { signal, logger }),
    },
    start: () => undefined,
    stop: async () => undefined,
  };
}
