/**
 * Wires the GitOpsDeploymentSyncRun reconciler: SyncRun informer events → work queue keys; a
 * GitOpsDeployment that appears (or changes) → the SyncRuns referencing it (a SyncRun created before its
 * parent proceeds); SyncOperation operation state changes (NOTIFY) → the owning SyncRun; and a slow
 * jittered sweep for rows whose SyncRun is gone (a delete event missed while the backend was down).
 */
import type { Database } from '@gitops/db';
import {
  createWorkQueue,
  type Informer,
  type KubeObject,
  type Logger,
  objectKey,
  type Reconciler,
  type Registry,
  type WorkQueue,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { type CrControllerLifecycle, crControllerLifecycle } from '../cr-controller.ts';
import { isJsonObject, jsonEqual } from '../json.ts';
import { SYNC_RUN_KIND } from './sync-run.store.ts';

export interface SyncRunControllerOptions {
  db: Kysely<Database>;
  informer: Informer<KubeObject>;
  deployments: Informer<KubeObject>;
  reconcile: Reconciler;
  registry: Registry;
  logger: Logger;
  concurrency: number;
  resyncIntervalMs: number;
}

export interface SyncRunController extends CrControllerLifecycle {
  readonly queue: WorkQueue;
}

/** Our own status writes do not need a reconcile. */
function needsReconcile(oldObject: KubeObject, newObject: KubeObject): boolean {
  const a = oldObject.metadata;
  const b = newObject.metadata;
  if (a.resourceVersion === b.resourceVersion) return true; // periodic relist
  return (
    a.uid !== b.uid ||
    a.generation !== b.generation ||
    a.deletionTimestamp !== b.deletionTimestamp ||
    !jsonEqual(oldObject.spec, newObject.spec)
  );
}

function parentNameOf(syncRun: KubeObject): string | undefined {
  const name = isJsonObject(syncRun.spec) ? syncRun.spec.gitopsDeploymentName : undefined;
  return typeof name === 'string' ? name : undefined;
}

export function createSyncRunController(options: SyncRunControllerOptions): SyncRunController {
  const { db, informer, deployments, logger } = options;
  const queue = createWorkQueue({
    name: 'gitopsdeploymentsyncrun',
    reconcile: options.reconcile,
    concurrency: options.concurrency,
    registry: options.registry,
    logger,
  });

  /** The SyncRuns of the namespace that reference this GitOpsDeployment. */
  const enqueueReferencing = (deployment: KubeObject) => {
    for (const syncRun of informer.list()) {
      if (
        syncRun.metadata.namespace === deployment.metadata.namespace &&
        parentNameOf(syncRun) === deployment.metadata.name
      ) {
        queue.add(objectKey(syncRun));
      }
    }
  };

  const unsubscribe = [
    informer.onAdd((o) => queue.add(objectKey(o))),
    informer.onUpdate((a, b) => {
      if (needsReconcile(a, b)) queue.add(objectKey(b));
    }),
    informer.onDelete((o) => queue.add(objectKey(o))),
    deployments.onAdd(enqueueReferencing),
    deployments.onUpdate((a, b) => {
      if (a.metadata.generation !== b.metadata.generation || a.metadata.uid !== b.metadata.uid) {
        enqueueReferencing(b);
      }
    }),
  ];
  return {
    queue,
    ...crControllerLifecycle({
      kind: SYNC_RUN_KIND,
      db: db,
      informer,
      queue,
      unsubscribe,
      resyncIntervalMs: options.resyncIntervalMs,
      logger: logger,
    }),
  };
}
