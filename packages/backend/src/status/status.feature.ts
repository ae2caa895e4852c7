/**
 * The status path: NOTIFY `gitops_application_state_changed` (payload application id) → api_cr_mapping →
 * the GitOpsDeployment's key → read the current projection → merge-patch `/status` when it differs.
 * Keys, not payloads, are queued, so a burst of changes collapses into one write of the latest state.
 * Writes carry the cached resourceVersion: a concurrent ErrorOccurred write makes ours fail with 409 and
 * the queue retries on fresh data, so neither writer loses the other's conditions.
 */
import { Kind } from '@gitops/api';
import {
  type Database,
  getApiCrMappingByUid,
  getApiCrMappingOfApplication,
  getApiCrMappingOfManagedEnvironment,
  getApplicationState,
} from '@gitops/db';
import { createWorkQueue, objectKey, patchStatus, splitObjectKey, type WorkQueue } from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { BackendContext, BackendFeature } from '../backend-feature.ts';
import type { GitOpsDeploymentFeature } from '../gitops-deployment/gitops-deployment.feature.ts';
import { conditionsOf, isBeingDeleted, statusOf } from '../gitops-deployment/gitops-deployment.object.ts';
import { isJsonObject } from '../json.ts';
import { BACKEND_FIELD_MANAGER, GitOpsDeploymentCr } from '../kinds.ts';
import {
  desiredStatus,
  managedEnvironmentIdOf,
  parseApplicationState,
  statusPatch,
  syncTransitionEvent,
} from './deployment-status.ts';

export interface StatusFeature extends BackendFeature {
  readonly queue: WorkQueue;
  onApplicationStateChanged(applicationId: string): Promise<void>;
  enqueueAll(): void;
}

/** "" for in-cluster and unknown names; the ManagedEnvironment CR's name for `managed-env-<id>`. */
async function userFacingDestinationName(db: Kysely<Database>, name: string | undefined): Promise<string> {
  const environmentId = name ? managedEnvironmentIdOf(name) : undefined;
  if (!environmentId) return '';
  return (await getApiCrMappingOfManagedEnvironment(db, environmentId))?.cr_name ?? '';
}

export function createStatusFeature(
  ctx: BackendContext,
  deps: { deployments: GitOpsDeploymentFeature },
  options: { now?: () => Date } = {},
): StatusFeature {
  const { db, kc } = ctx;
  const informer = deps.deployments.informer;
  const now = options.now ?? (() => new Date());

  const queue = createWorkQueue({
    name: 'gitopsdeployment-status',
    concurrency: ctx.config.maxConcurrentReconciles,
    registry: ctx.registry,
    logger: ctx.logger.child({ controller: 'gitopsdeployment-status' }),
    async reconcile(key, { logger }) {
      const { namespace, name } = splitObjectKey(key);
      const object = namespace === undefined ? undefined : informer.get(namespace, name);
      if (!object || isBeingDeleted(object) || !object.metadata.uid) return;
      const mapping = await getApiCrMappingByUid(db, object.metadata.uid);
      if (!mapping?.application_id) return;
      const row = await getApplicationState(db, mapping.application_id);
      if (!row) return;
      const state = parseApplicationState(row.state);
      if (!isJsonObject(row.state))
        logger.warn({ application: mapping.application_id }, 'malformed application_state');
      const desired = desiredStatus(state, {
        currentConditions: conditionsOf(object),
        destinationName: await userFacingDestinationName(db, state.reconciledState?.destination?.name),
        now: now(),
      });
      const patch = statusPatch(statusOf(object), desired);
      if (patch === undefined) return;
      await patchStatus(
        kc,
        GitOpsDeploymentCr.ref(object),
        { metadata: { resourceVersion: object.metadata.resourceVersion }, status: patch },
        { fieldManager: BACKEND_FIELD_MANAGER },
      );
      logger.debug({ application: mapping.application_id }, 'status updated from the Argo CD Application');
      const event = syncTransitionEvent(statusOf(object).operationState, desired.operationState);
      if (event)
        await ctx.events.event(
          GitOpsDeploymentCr.withTypeMeta(object),
          event.type,
          event.reason,
          event.message,
        );
    },
  });
  const unsubscribe = [
    informer.onAdd((o) => queue.add(objectKey(o))),
    // A periodic relist re-delivers unchanged objects: the status path is driven by NOTIFY (and by resync()
    // after a lost LISTEN connection), so an unchanged object costs no database read here.
    informer.onUpdate((a, b) => {
      if (a.metadata.resourceVersion !== b.metadata.resourceVersion) queue.add(objectKey(b));
    }),
  ];

  async function onApplicationStateChanged(applicationId: string) {
    const mapping = await getApiCrMappingOfApplication(db, applicationId);
    if (mapping?.cr_kind === Kind.GitOpsDeployment) queue.add(`${mapping.cr_namespace}/${mapping.cr_name}`);
  }
  const enqueueAll = () => {
    for (const object of informer.list()) queue.add(objectKey(object));
  };

  return {
    name: queue.name,
    queue,
    informers: [informer],
    notifications: { applicationStateChanged: onApplicationStateChanged },
    start: () => queue.start(),
    resync: enqueueAll,
    onApplicationStateChanged,
    enqueueAll,
    async stop() {
      for (const u of unsubscribe) u();
      await queue.shutdown();
    },
  };
}
