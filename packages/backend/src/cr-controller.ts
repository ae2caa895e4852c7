/**
 * The controller of one custom-resource kind, as a backend feature: its work queue fed by its informer
 * (add, delete, and the updates the kind's descriptor says need a reconcile), the orphan sweep (rows whose
 * CR vanished while no backend watched), re-enqueueing the CR that owns an operation whose state changed
 * (NOTIFY), and enqueueing every cached CR on resync. A feature adds only its own extra watches.
 */
import { type Database, type OperationRow, operationOfNotification } from '@gitops/db';
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
  splitObjectKey,
  type WorkQueue,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { BackendFeature, NotificationReads } from './backend-feature.ts';
import type { CrKindDescriptor } from './kinds.ts';
import { enqueueMappingsMissingFromCache, ownerKeyOf } from './orphan-sweep.ts';

export interface CrController extends BackendFeature {
  readonly queue: WorkQueue;
  /** The cache of the kind's objects (this shard). */
  readonly informer: Informer<KubeObject>;
  /** Enqueues every CR in the cache. */
  enqueueAll(): void;
  /** Enqueues the names of mappings whose CR incarnation is not in the cache. Returns how many. */
  sweepOrphans(): Promise<number>;
  /**
   * An operation changed state (`payload`: the notification's, see `operationOfNotification`): the CR of this
   * kind that owns it (if any) is reconciled.
   */
  onOperationStateChanged(payload: string, reads?: NotificationReads): Promise<void>;
}

export interface CrControllerOptions {
  kind: CrKindDescriptor;
  db: Kysely<Database>;
  informer: Informer<KubeObject>;
  /** Other caches the feature reads or watches (started and awaited with the kind's own). */
  alsoReads?: readonly Informer<KubeObject>[];
  reconcile: Reconciler;
  /** More event sources → keys of this kind; returns the unsubscribe functions. */
  watch?: (enqueue: (key: string) => void) => (() => void)[];
  registry: Registry;
  logger: Logger;
  concurrency: number;
  resyncIntervalMs: number;
  /**
   * The periodic relist re-delivers every object; with this set, an object whose last reconcile succeeded at
   * the same resourceVersion is left alone (nothing changed on it since), so a resync costs no database work
   * per settled object. Explicit resyncs (`resync()`, e.g. after a lost LISTEN connection) still reconcile all.
   */
  skipSettledOnRelist?: boolean;
  /**
   * Queue the owner only when its operation finished (Completed or Failed), not for Waiting ↔ In_Progress:
   * for kinds whose reconcile reads nothing but the outcome, the other transitions are a reconcile that
   * finds nothing new (one per operation; at 10,000 deployments a backlog in front of new objects).
   */
  ownerOnlyWhenFinished?: boolean;
  /**
   * True when the owner (as this cache holds it) needs nothing from this operation's outcome, so no
   * reconcile is queued for it (e.g. a Completed operation of a live GitOpsDeployment that shows no error).
   */
  ownerNeedsNothing?: (operation: OperationRow, owner: KubeObject | undefined) => boolean;
}

export function createCrController(options: CrControllerOptions): CrController {
  const { kind, db, informer, logger } = options;
  /** Key → resourceVersion of its last reconcile that succeeded and asked for nothing more. */
  const settled = new Map<string, string>();
  const reconcile: Reconciler = options.skipSettledOnRelist
    ? async (key, context) => {
        const { namespace, name } = splitObjectKey(key);
        const version = informer.get(namespace, name)?.metadata.resourceVersion;
        settled.delete(key);
        const result = await options.reconcile(key, context);
        if (version !== undefined && !result?.requeue && result?.requeueAfter === undefined)
          settled.set(key, version);
        return result;
      }
    : options.reconcile;
  const queue = createWorkQueue({
    name: kind.kind.toLowerCase(),
    reconcile,
    concurrency: options.concurrency,
    registry: options.registry,
    logger,
  });
  const enqueue = (key: string) => queue.add(key);
  const unsubscribe = [
    informer.onAdd((o) => enqueue(objectKey(o))),
    informer.onUpdate((a, b) => {
      const key = objectKey(b);
      if (
        a.metadata.resourceVersion === b.metadata.resourceVersion &&
        settled.get(key) === b.metadata.resourceVersion
      )
        return;
      if (kind.needsReconcile(a, b)) enqueue(key);
    }),
    informer.onDelete((o) => {
      settled.delete(objectKey(o));
      enqueue(objectKey(o));
    }),
    ...(options.watch?.(enqueue) ?? []),
  ];
  let sweeper: Periodic | undefined;

  const sweepOrphans = () => enqueueMappingsMissingFromCache(db, kind.kind, informer, enqueue, logger);
  const enqueueAll = () => {
    for (const object of informer.list()) enqueue(objectKey(object));
  };
  async function onOperationStateChanged(payload: string, reads?: NotificationReads) {
    const operation = await (reads ? reads.operation() : operationOfNotification(db, payload));
    if (options.ownerOnlyWhenFinished && operation && !operation.finished_at) return;
    const key = ownerKeyOf(operation, kind.kind);
    if (!key || !operation) return;
    const { namespace, name } = splitObjectKey(key);
    if (options.ownerNeedsNothing?.(operation, informer.get(namespace, name))) return;
    enqueue(key);
  }

  return {
    name: queue.name,
    queue,
    informer,
    informers: [informer, ...(options.alsoReads ?? [])],
    notifications: { operationStateChanged: onOperationStateChanged },
    start() {
      queue.start();
      // Rows whose CR vanished while no backend watched (missed delete events): now and every resync period.
      sweeper = runPeriodically(`${kind.kind} orphan sweep`, options.resyncIntervalMs, () => sweepOrphans(), {
        logger,
        jitter: 0.25,
      });
    },
    resync: enqueueAll,
    enqueueAll,
    sweepOrphans,
    onOperationStateChanged,
    async stop() {
      await sweeper?.stop();
      for (const u of unsubscribe) u();
      await queue.shutdown();
    },
  };
}
