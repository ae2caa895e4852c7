/**
 * Managed environments as one feature: `ManagedEnvironment` resources → Argo CD cluster Secrets (and the
 * tenant's AppProject), the watch of our cluster Secrets (fast drift repair) and the periodic pass over the
 * External environment rows and the live cluster Secrets.
 */
import { ignoreCreates, periodicJob, resourceVersionChanged } from '@gitops/shared';
import { type AgentFeature, type FeatureContext, keysOfDatabaseId } from '../agent-feature.ts';
import type { ApplicationFeature } from '../application/application.feature.ts';
import { clusterSecretInformer, createClusterSecretReconciler } from './cluster-secret.reconciler.ts';

export function createManagedEnvironmentFeature(
  ctx: FeatureContext,
  deps: { reconcileAppProject: ApplicationFeature['reconcileAppProject'] },
): AgentFeature {
  const { config, logger } = ctx;
  const reconciler = createClusterSecretReconciler({
    kc: ctx.kc,
    db: ctx.db,
    credentials: ctx.credentials,
    namespace: ctx.namespace,
    engineInstanceId: ctx.engineInstanceId,
    enqueueApplication: (id) => ctx.enqueue('Application', id),
    reconcileAppProject: deps.reconcileAppProject,
  });
  const clusterSecrets = clusterSecretInformer({
    kc: ctx.kc,
    namespace: ctx.namespace,
    registry: ctx.registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
  });

  return {
    name: 'managed-environment',
    informers: [clusterSecrets],
    // Edited (not a relist) or deleted: re-check it against its row. Creates are ours (or the periodic pass's).
    watches: (resources) =>
      resources.watches(clusterSecrets, keysOfDatabaseId('ManagedEnvironment'), {
        predicates: [ignoreCreates, resourceVersionChanged],
      }),
    handles: {
      ManagedEnvironment: (id, { ownerUserIds, signal, logger }) =>
        reconciler.reconcileManagedEnvironment(id, { ownerUserIds, signal, logger }),
    },
    ...periodicJob(
      'cluster-secret-resync',
      config.resyncIntervalMs,
      async (signal) => {
        for (const id of await reconciler.driftIds(signal)) ctx.enqueue('ManagedEnvironment', id);
      },
      { logger, jitter: 0.25 },
    ),
  };
}
