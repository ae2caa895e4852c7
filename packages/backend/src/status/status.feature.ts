/**
 * The status path: NOTIFY on the backend's own state channel (migration 0017: the application's state and its
 * engine instance's name) → api_cr_mapping → the GitOpsDeployment's key → merge-patch `/status` when it differs.
 * Keys are queued, so a burst of changes collapses into one write of the latest state; the latest state a
 * notification carried is kept per key until a reconcile of that key used it, so a change costs no read. The
 * row is read back only when the payload did not carry it (too large, or moveTenant's), when the object itself
 * changed (someone else's write, an edit), and after a lost LISTEN connection (resync forgets every carried
 * state: newer ones may have been missed). The states Argo CD passes through on its way to a settled one are
 * held back by the agent before they reach application_state (cluster-agent's status/on-the-way.ts), so each
 * NOTIFY here is a state to show. Built with the controller builder `for` the GitOpsDeployment cache: a real
 * change of an object wakes it, not a relist, not a delete and not the echo of its own status write
 * (`createOwnWrites`).
 * Writes carry the cached resourceVersion: a concurrent ErrorOccurred write makes ours fail with 409 and
 * the queue retries on fresh data, so neither writer loses the other's conditions.
 */
import { Kind } from '@gitops/api';
import {
  type ApplicationStateWithEngineInstance,
  type Database,
  getApiCrMappingByUid,
  getApiCrMappingOfApplication,
  getApiCrMappingOfManagedEnvironment,
  getApplicationStateWithEngineInstance,
} from '@gitops/db';
import {
  createOwnWrites,
  getOrCreateCounter,
  ignoreDeletes,
  isJsonObject,
  type KubeObject,
  newController,
  type Predicate,
  patchStatus,
  type Reconciler,
  resourceVersionChanged,
  splitObjectKey,
  type WorkQueue,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { BackendContext, BackendFeature, NotificationReads } from '../backend-feature.ts';
import type { GitOpsDeploymentFeature } from '../gitops-deployment/gitops-deployment.feature.ts';
import { BACKEND_FIELD_MANAGER, GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import {
  desiredStatus,
  managedEnvironmentIdOf,
  parseApplicationState,
  statusPatch,
  syncTransitionEvent,
} from './deployment-status.ts';

export interface StatusFeature extends BackendFeature {
  readonly queue: WorkQueue;
  onApplicationStateChanged(payload: string, reads: NotificationReads): Promise<void>;
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

  /** GitOpsDeployment uid ↔ application id, recorded by the reconciler and here (deployment-applications.ts). */
  const { applications } = deps.deployments;

  /** Our last status write of each object, until the informer delivers that version (its echo). */
  const ownWrites = createOwnWrites();

  /**
   * The latest state a notification carried, by object key, until a reconcile of that key used it (or found no
   * object). One entry per key with a change on its way: a burst of changes keeps the last.
   */
  const carried = new Map<string, { applicationId: string; row: ApplicationStateWithEngineInstance }>();
  const used = getOrCreateCounter(ctx.registry, {
    name: 'gitops_status_application_states_total',
    help: 'Application states the status path used, by where it took them (notification: carried by the NOTIFY; database: read back)',
    labelNames: ['source'],
  });
  for (const source of ['notification', 'database']) used.inc({ source }, 0);

  /** The state of application `applicationId`: the one carried for `key` when it is that application's, else read. */
  async function rowOf(key: string, applicationId: string) {
    const held = carried.get(key);
    if (held?.applicationId === applicationId) {
      used.inc({ source: 'notification' });
      return held.row;
    }
    used.inc({ source: 'database' });
    return await getApplicationStateWithEngineInstance(db, applicationId);
  }

  /** The projection of the object's application: from the remembered id, else through its mapping. */
  async function stateOf(uid: string, key: string) {
    const known = applications.applicationOf(uid);
    if (known) {
      const row = await rowOf(key, known);
      if (row) return { applicationId: known, row };
    }
    const mapping = await getApiCrMappingByUid(db, uid);
    if (!mapping?.application_id) return undefined;
    applications.remember(uid, mapping.application_id, key);
    const row = await rowOf(key, mapping.application_id);
    return row ? { applicationId: mapping.application_id, row } : undefined;
  }

  const reconcile: Reconciler = async (key, context) => {
    const held = carried.get(key);
    await reconcileStatus(key, context);
    // Done with it (a failed write throws before this line and is retried with it); a newer one stays.
    if (held && carried.get(key) === held) carried.delete(key);
  };

  const reconcileStatus: Reconciler = async (key, { logger }) => {
    const { namespace, name } = splitObjectKey(key);
    const object = namespace === undefined ? undefined : informer.get(namespace, name);
    if (!object || object.metadata.deletionTimestamp || !object.metadata.uid) return;
    const found = await stateOf(object.metadata.uid, key);
    if (!found) return;
    const { applicationId, row } = found;
    const state = parseApplicationState(row.state);
    if (!isJsonObject(row.state)) logger.warn({ application: applicationId }, 'malformed application_state');
    const desired = desiredStatus(state, {
      currentConditions: object.status?.conditions ?? [],
      destinationName: await userFacingDestinationName(db, state.reconciledState?.destination?.name),
      engineInstance: row.engine_instance_name,
      now: now(),
    });
    const patch = statusPatch(object.status ?? {}, desired);
    if (patch === undefined) return;
    ownWrites.begin(key);
    let written: KubeObject | undefined;
    try {
      written = await patchStatus(
        kc,
        GitOpsDeploymentCr.ref(object),
        { metadata: { resourceVersion: object.metadata.resourceVersion }, status: patch },
        { fieldManager: BACKEND_FIELD_MANAGER },
      );
    } finally {
      // Versions of the object that were not our write arrived meanwhile: look again.
      if (ownWrites.end(key, written)) controller.enqueue(key);
    }
    logger.debug(
      {
        application: applicationId,
        sync: isJsonObject(desired.sync) ? desired.sync.status : undefined,
        health: isJsonObject(desired.health) ? desired.health.status : undefined,
        phase: isJsonObject(desired.operationState) ? desired.operationState.phase : undefined,
      },
      'status updated from the Argo CD Application',
    );
    const event = syncTransitionEvent(object.status?.operationState, desired.operationState);
    if (event)
      await ctx.events.event(
        GitOpsDeploymentCr.withTypeMeta(object),
        event.type,
        event.reason,
        event.message,
      );
  };
  /**
   * A GitOpsDeployment created while this cache watches has no projection yet: its application row is written
   * after a cache holds the object, so its first state arrives by NOTIFY, and looking for it on creation would
   * only cost a read. Objects of the cache's first list are looked at (their state may have changed meanwhile).
   */
  const notNewlyCreated: Predicate<GitOpsDeploymentObject> = {
    name: 'not created while watched',
    create: (object) => !informer.hasSynced() || object.status !== undefined,
  };
  const controller = newController('gitopsdeployment-status', {
    registry: ctx.registry,
    logger: ctx.logger.child({ controller: 'gitopsdeployment-status' }),
  })
    // A periodic relist re-delivers unchanged objects: the status path is driven by NOTIFY (and by resync()
    // after a lost LISTEN connection), so an unchanged object costs no database read here. The echo of our own
    // status write is what the projection asked for, so it needs no second look either.
    .for(informer, {
      predicates: [resourceVersionChanged, ownWrites.predicate, ignoreDeletes, notNewlyCreated],
    })
    .withOptions({ concurrency: ctx.config.maxConcurrentReconciles })
    .complete(reconcile);
  const { queue, enqueueAll } = controller;

  /**
   * A change Argo CD reported is written after GITOPS_STATUS_COALESCE_WINDOW, counted from the first change of
   * the object not written yet (a later one does not push it back): the states a sync passes through within
   * the window (OutOfSync, Running, Synced/Progressing, Healthy) become one write of the latest.
   */
  const coalesceMs = ctx.config.statusCoalesceMs;
  async function onApplicationStateChanged(_payload: string, reads: NotificationReads) {
    const change = reads.applicationState();
    if (!change) return;
    const { applicationId } = change;
    let key = applications.keyOf(applicationId);
    if (!key) {
      const mapping = await getApiCrMappingOfApplication(db, applicationId);
      if (mapping?.cr_kind !== Kind.GitOpsDeployment) return;
      key = `${mapping.cr_namespace}/${mapping.cr_name}`;
      applications.remember(mapping.cr_uid, applicationId, key);
    }
    // A notification without the state (too large; the instance changed) makes the next reconcile read it.
    if (change.carried) carried.set(key, { applicationId, row: change.carried });
    else carried.delete(key);
    queue.addAfter(key, coalesceMs);
  }

  /** After a lost LISTEN connection: the carried states may be older than the rows, so every object reads. */
  function resync() {
    carried.clear();
    enqueueAll();
  }

  return {
    name: queue.name,
    queue,
    informers: [informer],
    notifications: { applicationStateChanged: onApplicationStateChanged },
    start: controller.start,
    resync,
    onApplicationStateChanged,
    enqueueAll,
    async stop() {
      await controller.stop();
    },
  };
}
