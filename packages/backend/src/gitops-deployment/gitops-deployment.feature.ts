/**
 * The GitOpsDeployment feature: its CRs (this shard) → the reconciler's work queue; operation state
 * changes (NOTIFY) → the owner's key; a slow sweep for rows whose CR is gone; and the namespace's
 * deployments again when one of its ManagedEnvironments changed (they resolve their destination anew).
 * The informer's periodic relist re-delivers every object (the level-triggered safety net); ones settled at
 * the same resourceVersion are skipped, so an idle resync costs nothing per deployment (docs/performance.md).
 */
import { objectKey } from '@gitops/shared';
import type { BackendContext } from '../backend-feature.ts';
import { type CrController, createCrController } from '../cr-controller.ts';
import { GitOpsDeploymentCr } from '../kinds.ts';
import { createEnvironmentResolver } from '../managed-environment/environment.resolver.ts';
import type { ManagedEnvironmentFeature } from '../managed-environment/managed-environment.feature.ts';
import { createGitOpsDeploymentReconciler } from './gitops-deployment.reconciler.ts';

export type GitOpsDeploymentFeature = CrController;

export function createGitOpsDeploymentFeature(
  ctx: BackendContext,
  deps: { environments: ManagedEnvironmentFeature },
): GitOpsDeploymentFeature {
  const informer = ctx.informer(GitOpsDeploymentCr.resource, { sharded: true });
  const controller = createCrController({
    kind: GitOpsDeploymentCr,
    db: ctx.db,
    informer,
    alsoReads: [deps.environments.informer],
    registry: ctx.registry,
    logger: ctx.logger.child({ controller: 'gitopsdeployment' }),
    concurrency: ctx.config.maxConcurrentReconciles,
    resyncIntervalMs: ctx.config.resyncIntervalMs,
    skipSettledOnRelist: true,
    // The reconcile reads only whether the application's operations are pending or how the last one ended.
    ownerOnlyWhenFinished: true,
    reconcile: createGitOpsDeploymentReconciler({
      db: ctx.db,
      kc: ctx.kc,
      informer,
      engineInstance: ctx.engineInstance,
      events: ctx.events,
      selector: ctx.selector,
      resolveEnvironment: createEnvironmentResolver(ctx.db, deps.environments.informer),
      operationRetryMs: ctx.config.operationRetryMs,
    }),
  });
  deps.environments.onEnvironmentChanged((namespace) => {
    for (const deployment of informer.list(namespace)) controller.queue.add(objectKey(deployment));
  });
  return controller;
}
