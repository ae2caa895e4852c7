/**
 * Wires the GitOpsDeployment reconciler: informer events → work queue keys, operation state changes
 * (NOTIFY) → the owner's key, and a slow jittered sweep that finds rows whose GitOpsDeployment is gone
 * (a delete event missed while the backend was down). The informer's own periodic relist re-delivers
 * every object, which re-reconciles everything (the level-triggered safety net).
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
import { jsonEqual } from '../json.ts';
import { GITOPS_DEPLOYMENT_KIND } from './application.store.ts';

export interface GitOpsDeploymentControllerOptions {
  db: Kysely<Database>;
  informer: Informer<KubeObject>;
  reconcile: Reconciler;
  registry: Registry;
  logger: Logger;
  concurrency: number;
  resyncIntervalMs: number;
}

export interface GitOpsDeploymentController extends CrControllerLifecycle {
  readonly queue: WorkQueue;
}

/** Only changes that matter to the database or the finalizer (not our own status writes). */
function needsReconcile(oldObject: KubeObject, newObject: KubeObject): boolean {
  const a = oldObject.metadata;
  const b = newObject.metadata;
  if (a.resourceVersion === b.resourceVersion) return true; // periodic relist: the resync
  return (
    a.uid !== b.uid ||
    a.generation !== b.generation ||
    a.deletionTimestamp !== b.deletionTimestamp ||
    !jsonEqual(a.finalizers, b.finalizers) ||
    !jsonEqual(a.labels, b.labels) ||
    !jsonEqual(oldObject.spec, newObject.spec)
  );
}

export function createGitOpsDeploymentController(
  options: GitOpsDeploymentControllerOptions,
): GitOpsDeploymentController {
  const { db, informer, logger } = options;
  const queue = createWorkQueue({
    name: 'gitopsdeployment',
    reconcile: options.reconcile,
    concurrency: options.concurrency,
    registry: options.registry,
    logger,
  });
  const unsubscribe = [
    informer.onAdd((o) => queue.add(objectKey(o))),
    informer.onUpdate((a, b) => {
      if (needsReconcile(a, b)) queue.add(objectKey(b));
    }),
    informer.onDelete((o) => queue.add(objectKey(o))),
  ];
  return {
    queue,
    ...crControllerLifecycle({
      kind: GITOPS_DEPLOYMENT_KIND,
      db: db,
      informer,
      queue,
      unsubscribe,
      resyncIntervalMs: options.resyncIntervalMs,
      logger: logger,
    }),
  };
}
