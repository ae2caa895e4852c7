/**
 * Wires the GitOpsDeployment reconciler: informer events → work queue keys, operation state changes
 * (NOTIFY) → the owner's key, and a slow jittered sweep that finds rows whose GitOpsDeployment is gone
 * (a delete event missed while the backend was down). The informer's own periodic relist re-delivers
 * every object, which re-reconciles everything (the level-triggered safety net).
 */
import { type Database, getOperation } from '@gitops/db';
import {
  createWorkQueue,
  type Informer,
  type KubeObject,
  type Logger,
  objectKey,
  type Periodic,
  type Reconciler,
  type Registry,
  runPeriodically,
  type WorkQueue,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { jsonEqual } from '../json.ts';
import { enqueueMappingsMissingFromCache, ownerKeyOf } from '../orphan-sweep.ts';
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

export interface GitOpsDeploymentController {
  readonly queue: WorkQueue;
  /** Starts the queue and the orphan sweep; call once the informer has synced. */
  start(): void;
  /** A GitOpsDeployment operation changed state: re-enqueue its owner. */
  onOperationStateChanged(operationId: string): Promise<void>;
  /** Enqueues every cached deployment (after a LISTEN reconnect: notifications may be lost). */
  enqueueAll(): void;
  /** Enqueues the names of mappings whose GitOpsDeployment incarnation is not in the cache. */
  sweepOrphans(): Promise<number>;
  stop(): Promise<void>;
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
  let sweeper: Periodic | undefined;

  async function sweepOrphans(): Promise<number> {
    return await enqueueMappingsMissingFromCache(
      db,
      GITOPS_DEPLOYMENT_KIND,
      informer,
      (key) => queue.add(key),
      logger,
    );
  }

  return {
    queue,
    start() {
      queue.start();
      // Rows whose CR vanished while no backend watched (missed delete events): now and every resync period.
      sweeper = runPeriodically(
        'GitOpsDeployment orphan sweep',
        options.resyncIntervalMs,
        () => sweepOrphans(),
        { logger: logger, jitter: 0.25 },
      );
    },
    async onOperationStateChanged(operationId) {
      const key = ownerKeyOf(await getOperation(db, operationId), GITOPS_DEPLOYMENT_KIND);
      if (key) queue.add(key);
    },
    enqueueAll() {
      for (const object of informer.list()) queue.add(objectKey(object));
    },
    sweepOrphans,
    async stop() {
      await sweeper?.stop();
      for (const u of unsubscribe) u();
      await queue.shutdown();
    },
  };
}
