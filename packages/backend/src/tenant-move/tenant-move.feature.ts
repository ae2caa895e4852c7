/**
 * Moving a tenant (docs/architecture.md, "Moving a tenant"): a namespace whose label
 * `managed-gitops.redhat.com/engine-instance` names another instance than the one its tenant is placed on
 * moves there — its applications, repository credentials and environments follow (`moveTenant`, one
 * transaction); the agents of both instances hand the Argo CD Applications over without pruning.
 *
 * Watches only labelled namespaces. Removing the label moves nothing (placement never changes by itself); a
 * label naming an unknown or cordoned instance moves nothing and says so in a Warning Event on the namespace.
 * A move to an instance of another cluster gives the tenant's Workspace environment credentials for its
 * namespace first (workspace-access.ts), so its deployments without an environment keep deploying there; a
 * move back to this cluster drops them and deletes the ServiceAccount they came from.
 * Any backend replica or shard may act: the move locks the tenant row and does nothing when it is done.
 */
import { Label, TenantMoveEventReason, TenantMoveMessage } from '@gitops/api';
import {
  getClusterUserByNamespaceUid,
  getEngineInstance,
  getEngineInstanceByName,
  getWorkspaceEnvironment,
  hasWorkspaceApplications,
  moveTenant,
  sealCredentialsForInstances,
  setWorkspaceCredentials,
} from '@gitops/db';
import {
  anyOf,
  createInformer,
  ignoreDeletes,
  type KubeObject,
  newController,
  relist,
  updatePredicate,
} from '@gitops/shared';
import type { BackendContext, BackendFeature } from '../backend-feature.ts';
import { namespaceIdentity } from '../kube-reads.ts';

export interface TenantMoveFeature extends BackendFeature {
  /** Resolves when no namespace is queued or being looked at (tests). */
  whenIdle(): Promise<void>;
}

async function workspaceHasCredentials(db: Parameters<typeof getWorkspaceEnvironment>[0], tenant: string) {
  return ((await getWorkspaceEnvironment(db, tenant))?.cluster_credentials_id ?? null) !== null;
}

const labelOf = (namespace: KubeObject) => namespace.metadata.labels?.[Label.EngineInstance] ?? '';

export function createTenantMoveFeature(ctx: BackendContext): TenantMoveFeature {
  const { db, logger, registry } = ctx;
  const namespaces = createInformer<KubeObject>({
    kubeConfig: ctx.kc,
    resource: { apiVersion: 'v1', plural: 'namespaces' },
    labelSelector: Label.EngineInstance,
    registry,
    logger,
    resyncPeriodMs: ctx.config.resyncIntervalMs,
    // Only the name, uid and the engine-instance label are read.
    transform: namespaceIdentity,
  });

  /** The namespace's engine-instance label changed. */
  const instanceLabelChanged = updatePredicate<KubeObject>(
    'engine-instance label changed',
    (a, b) => labelOf(a) !== labelOf(b),
  );
  // A relist delivers every namespace again: a move interrupted before its commit is retried then.
  const controller = newController('backend-tenant-move', { registry, logger })
    .for(namespaces, { predicates: [anyOf(instanceLabelChanged, relist), ignoreDeletes] })
    .withOptions({ concurrency: 2 })
    .complete(async (name, { logger: log, signal }) => {
      const namespace = namespaces.get(undefined, name);
      const requested = namespace ? labelOf(namespace) : '';
      if (!namespace?.metadata.uid || requested === '') return;
      const tenant = await getClusterUserByNamespaceUid(db, namespace.metadata.uid);
      // Not placed yet: placement reads the label when the tenant first needs an instance.
      if (!tenant?.engine_instance_id) return;
      const target = await getEngineInstanceByName(db, requested);
      const current = await getEngineInstance(db, tenant.engine_instance_id);
      const from = current?.name ?? tenant.engine_instance_id;
      const ownCluster = ctx.engineInstance().cluster_identity;
      if (target?.id === tenant.engine_instance_id) {
        // Moved back earlier: the account for another cluster's Argo CD may be left if deleting it failed.
        if (target.cluster_identity === ownCluster) await ctx.workspaceAccess.remove(name);
        return;
      }
      if (!target || target.cordoned) {
        const message = !target
          ? TenantMoveMessage.targetUnknown(requested, from)
          : TenantMoveMessage.targetCordoned(requested, from);
        log.warn({ namespace: name, requested, engineInstance: from }, 'tenant not moved');
        await ctx.events.event(namespace, 'Warning', TenantMoveEventReason.MoveRefused, message);
        return;
      }
      const toOwnCluster = target.cluster_identity === ownCluster;
      // Deployments without an environment deploy into this namespace, here, whichever cluster runs the Argo
      // CD: an instance elsewhere needs credentials for it (API calls: before the transaction).
      const workspaceCredentials =
        !toOwnCluster &&
        (await hasWorkspaceApplications(db, tenant.id)) &&
        !(await workspaceHasCredentials(db, tenant.id))
          ? await ctx.workspaceAccess.provision(name, signal)
          : undefined;
      const moved = await db.transaction().execute(async (trx) => {
        // moveTenant first: it locks the tenant row, so a token renewal (workspace-access.feature.ts) waits.
        const move = await moveTenant(trx, tenant.id, target.id);
        const tenantRef = { id: tenant.id, namespaceName: name };
        if (toOwnCluster) await setWorkspaceCredentials(trx, tenantRef, null);
        else if (workspaceCredentials) await setWorkspaceCredentials(trx, tenantRef, workspaceCredentials);
        // The new instance's copy of the tenant's credentials, sealed with its key, in the move's transaction.
        if (move) await sealCredentialsForInstances(trx, ctx.sealer, { clusterUserIds: [tenant.id] });
        return move;
      });
      if (!moved) return;
      if (toOwnCluster) await ctx.workspaceAccess.remove(name, signal);
      log.info(
        {
          namespace: name,
          from,
          to: target.name,
          applications: moved.applicationIds.length,
          repositoryCredentials: moved.repositoryCredentialIds.length,
          managedEnvironments: moved.managedEnvironmentIds.length,
        },
        'tenant moved to another engine instance',
      );
      await ctx.events.event(
        namespace,
        'Normal',
        TenantMoveEventReason.Moved,
        TenantMoveMessage.moved(from, target.name, moved.applicationIds.length),
      );
    });

  return {
    name: 'tenant-move',
    informers: [namespaces],
    start: controller.start,
    stop: controller.stop,
    whenIdle: () => controller.queue.whenIdle(),
  };
}
