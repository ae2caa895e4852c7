/**
 * The GitOpsDeployment feature: its CRs (this shard) → the reconciler's work queue; operation state
 * changes (NOTIFY) → the owner's key; a slow sweep for rows whose CR is gone; and the namespace's
 * deployments again when one of its ManagedEnvironments changed (they resolve their destination anew).
 * The informer's periodic relist re-delivers every object (the level-triggered safety net); ones settled at
 * the same resourceVersion are skipped, so an idle resync costs nothing per deployment (docs/performance.md).
 */
import { ConditionStatus, GitOpsDeploymentConditionType } from '@gitops/api';
import { listOwnersWaitingForAbsentAgents } from '@gitops/db';
import { findCondition, objectKey, type Periodic, runPeriodically } from '@gitops/shared';
import type { BackendContext } from '../backend-feature.ts';
import { type CrController, createCrController } from '../cr-controller.ts';
import { GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import { namespaceIdentity } from '../kube-reads.ts';
import { createEnvironmentResolver } from '../managed-environment/environment.resolver.ts';
import {
  connectionChanged,
  type ManagedEnvironmentFeature,
} from '../managed-environment/managed-environment.feature.ts';
import { createDeploymentApplications, type DeploymentApplications } from './deployment-applications.ts';
import { createGitOpsDeploymentReconciler } from './gitops-deployment.reconciler.ts';

export interface GitOpsDeploymentFeature extends CrController<GitOpsDeploymentObject> {
  /** Which application row each live GitOpsDeployment has (the status path reads it). */
  readonly applications: DeploymentApplications;
}

export function createGitOpsDeploymentFeature(
  ctx: BackendContext,
  deps: { environments: ManagedEnvironmentFeature },
): GitOpsDeploymentFeature {
  const informer = ctx.kindInformer(GitOpsDeploymentCr);
  // Every namespace's identity (`namespaceIdentity`): a new deployment's reconcile reads none of the API server.
  const namespaces = ctx.informer(
    { apiVersion: 'v1', plural: 'namespaces' },
    // The tenant-move feature watches the labelled ones: its metrics keep `namespaces`.
    { transform: namespaceIdentity, metricsLabel: 'namespaces.identity' },
  );
  const applications = createDeploymentApplications(informer);
  /** Uids whose ErrorOccurred=True this process wrote (its own write may not be in the cache yet). */
  const errorReported = new Set<string>();
  informer.onDelete((object) => {
    if (object.metadata.uid) errorReported.delete(object.metadata.uid);
  });
  const controller = createCrController(ctx, {
    kind: GitOpsDeploymentCr,
    informer,
    skipSettledOnRelist: true,
    // An environment's connection changed, or it is gone: the namespace's deployments look again.
    watches: (builder) =>
      builder.watches(
        deps.environments.informer,
        (environment) =>
          environment.metadata.namespace ? informer.list(environment.metadata.namespace).map(objectKey) : [],
        { predicates: [connectionChanged] },
      ),
    // The reconcile reads only whether the application's operations are pending or how the last one ended.
    ownerOnlyWhenFinished: true,
    // A Completed operation changes nothing for a live deployment that shows no error: no reconcile (it would
    // read five rows to find that out). Failed ones, deletions and deployments with an error still go.
    ownerNeedsNothing: (operation, owner) =>
      operation.state === 'Completed' &&
      owner !== undefined &&
      owner.metadata.uid === operation.owner_uid &&
      !owner.metadata.deletionTimestamp &&
      findCondition(owner.status?.conditions, GitOpsDeploymentConditionType.ErrorOccurred)?.status !==
        ConditionStatus.True &&
      !errorReported.has(operation.owner_uid),
    reconcile: createGitOpsDeploymentReconciler({
      db: ctx.db,
      kc: ctx.kc,
      tenantClusterIdentity: () => ctx.engineInstance().cluster_identity,
      workspaceAccess: ctx.workspaceAccess,
      informer,
      events: ctx.events,
      selector: ctx.selector,
      resolveEnvironment: createEnvironmentResolver(ctx.db, deps.environments.informer),
      operationRetryMs: ctx.config.operationRetryMs,
      engineInstanceAwayAfterMs: ctx.config.engineInstanceAwayAfterMs,
      errorReported,
      applications,
      namespaces,
    }),
  });
  // The reconcile of an environment changed its rows: the same.
  deps.environments.onEnvironmentChanged((namespace) => {
    for (const deployment of informer.list(namespace)) controller.queue.add(objectKey(deployment));
  });
  // Deployments whose change waits for an engine instance no agent listens for: nothing else wakes them when
  // the wait grows too long, so look every half of GITOPS_ENGINE_INSTANCE_AWAY_AFTER (one query).
  const awayAfter = ctx.config.engineInstanceAwayAfterMs;
  let away: Periodic | undefined;
  return {
    ...controller,
    applications,
    start() {
      namespaces.start();
      controller.start();
      away = runPeriodically(
        'engine-instance-away',
        Math.max(1_000, Math.min(awayAfter / 2, 60_000)),
        async () => {
          const owners = await listOwnersWaitingForAbsentAgents(ctx.db, GitOpsDeploymentCr.kind, awayAfter);
          for (const owner of owners) {
            if (informer.get(owner.namespace, owner.name))
              controller.queue.add(`${owner.namespace}/${owner.name}`);
          }
        },
        { logger: ctx.logger },
      );
    },
    async stop() {
      await away?.stop();
      await controller.stop();
      await namespaces.stop();
    },
  };
}
