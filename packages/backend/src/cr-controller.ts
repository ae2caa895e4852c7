/**
 * The part every backend controller of a custom resource shares: its work queue's lifecycle, the orphan
 * sweep (rows whose CR vanished while no backend watched), re-enqueueing the CR that owns an operation whose
 * state changed, and enqueueing every cached CR. The controllers add their own informer subscriptions.
 */
import { type CrKind, type Database, getOperation } from '@gitops/db';
import {
  type Informer,
  type KubeObject,
  type Logger,
  objectKey,
  type Periodic,
  runPeriodically,
  type WorkQueue,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { enqueueMappingsMissingFromCache, ownerKeyOf } from './orphan-sweep.ts';

export interface CrControllerLifecycle {
  start(): void;
  /** Enqueues every CR in the cache. */
  enqueueAll(): void;
  /** Enqueues the names of mappings whose CR incarnation is not in the cache. Returns how many. */
  sweepOrphans(): Promise<number>;
  /** An operation changed state: the CR of this kind that owns it (if any) is reconciled. */
  onOperationStateChanged(operationId: string): Promise<void>;
  /** Stops the sweep, drops the subscriptions and drains the queue. */
  stop(): Promise<void>;
}

export function crControllerLifecycle(options: {
  kind: CrKind;
  /** Without it there are no rows to sweep or operations to follow (unit tests of the event wiring). */
  db: Kysely<Database> | undefined;
  informer: Informer<KubeObject>;
  queue: WorkQueue;
  /** Informer (and other) subscriptions, undone by stop(). */
  unsubscribe: (() => void)[];
  resyncIntervalMs: number;
  logger: Logger;
}): CrControllerLifecycle {
  const { kind, db, informer, queue, logger } = options;
  let sweeper: Periodic | undefined;

  async function sweepOrphans(): Promise<number> {
    if (!db) return 0;
    return await enqueueMappingsMissingFromCache(db, kind, informer, (key) => queue.add(key), logger);
  }

  return {
    start() {
      queue.start();
      // Rows whose CR vanished while no backend watched (missed delete events): now and every resync period.
      if (db) {
        sweeper = runPeriodically(`${kind} orphan sweep`, options.resyncIntervalMs, () => sweepOrphans(), {
          logger,
          jitter: 0.25,
        });
      }
    },
    enqueueAll() {
      for (const object of informer.list()) queue.add(objectKey(object));
    },
    sweepOrphans,
    async onOperationStateChanged(operationId) {
      if (!db) return;
      const key = ownerKeyOf(await getOperation(db, operationId), kind);
      if (key) queue.add(key);
    },
    async stop() {
      await sweeper?.stop();
      for (const u of options.unsubscribe) u();
      await queue.shutdown();
    },
  };
}
