/**
 * Wires the GitOpsDeploymentSyncRun reconciler: SyncRun informer events → work queue keys; a
 * GitOpsDeployment that appears (or changes) → the SyncRuns referencing it (a SyncRun created before its
 * parent proceeds); SyncOperation operation state changes (NOTIFY) → the owning SyncRun; and a slow
 * jittered sweep for rows whose SyncRun is gone (a delete event missed while the backend was down).
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
import { isJsonObject, jsonEqual } from '../json.ts';
import { enqueueMappingsMissingFromCache, ownerKeyOf } from '../orphan-sweep.ts';
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

export interface SyncRunController {
  readonly queue: WorkQueue;
  start(): void;
  /** A SyncOperation operation changed state: re-enqueue its owner. */
  onOperationStateChanged(operationId: string): Promise<void>;
  enqueueAll(): void;
  sweepOrphans(): Promise<number>;
  stop(): Promise<void>;
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
  let sweeper: Periodic | undefined;

  async function sweepOrphans(): Promise<number> {
    return await enqueueMappingsMissingFromCache(
      db,
      SYNC_RUN_KIND,
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
        'GitOpsDeploymentSyncRun orphan sweep',
        options.resyncIntervalMs,
        () => sweepOrphans(),
        { logger: logger, jitter: 0.25 },
      );
    },
    async onOperationStateChanged(operationId) {
      const key = ownerKeyOf(await getOperation(db, operationId), SYNC_RUN_KIND);
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
