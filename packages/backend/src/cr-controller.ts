/**
 * The controller of one custom-resource kind, as a backend feature: @gitops/shared's controller builder
 * `for` the kind's informer with the kind's predicate (`kinds.ts`), plus what every backend CR controller
 * adds: the orphan sweep (rows whose CR vanished while no backend watched) and re-enqueueing the CR that
 * owns an operation whose state changed (NOTIFY). A feature adds only its own watches (`watches`: the
 * builder's, usually through an index of the kind's informer).
 */
import { type OperationRow, operationOfNotification } from '@gitops/db';
import {
  type ControllerBuilder,
  type Informer,
  type KubeObject,
  keysFromIndex,
  namespacedIndexValue,
  newController,
  objectKey,
  type Periodic,
  type Reconciler,
  resourceVersionChanged,
  runPeriodically,
  splitObjectKey,
  type WorkQueue,
} from '@gitops/shared';
import type { BackendContext, BackendFeature, NotificationReads } from './backend-feature.ts';
import type { CrKindDescriptor } from './kinds.ts';
import { enqueueMappingsMissingFromCache, ownerKeyOf } from './orphan-sweep.ts';

export interface CrController<T extends KubeObject = KubeObject> extends BackendFeature {
  readonly queue: WorkQueue;
  /** The cache of the kind's objects (this shard), typed as the kind's generated type. */
  readonly informer: Informer<T>;
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

/** What a CR controller needs besides the backend context (which gives it db, metrics, logger and settings). */
export interface CrControllerOptions<T extends KubeObject = KubeObject> {
  kind: CrKindDescriptor;
  informer: Informer<T>;
  /** Other caches the feature reads or watches (started and awaited with the kind's own). */
  alsoReads?: readonly Informer<KubeObject>[];
  reconcile: Reconciler;
  /** More event sources → keys of this kind: `builder.watches(...)` (usually through an index of `informer`). */
  watches?: (builder: ControllerBuilder<T>) => ControllerBuilder<T>;
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
  ownerNeedsNothing?: (operation: OperationRow, owner: T | undefined) => boolean;
}

/**
 * For kinds whose objects name a Secret of their own namespace: indexes `informer` by that Secret
 * (`namespace/name`) and returns the `watches` step that wakes the objects naming a Secret of `secrets` when
 * it is created, changed (not on a relist) or deleted. References never cross namespaces.
 */
export function watchNamedSecrets<T extends KubeObject>(
  informer: Informer<T>,
  secretNameOf: (object: T) => string | undefined,
  secrets: readonly Informer<KubeObject>[],
): (builder: ControllerBuilder<T>) => ControllerBuilder<T> {
  const index = 'namedSecret';
  informer.addIndexers({
    [index]: (object) => {
      const secret = secretNameOf(object);
      return secret ? [namespacedIndexValue(object.metadata.namespace, secret)] : [];
    },
  });
  const mapToKeys = keysFromIndex(informer, index, objectKey);
  return (builder) =>
    secrets.reduce(
      (b, source) => b.watches(source, mapToKeys, { predicates: [resourceVersionChanged] }),
      builder,
    );
}

export function createCrController<T extends KubeObject>(
  ctx: BackendContext,
  options: CrControllerOptions<T>,
): CrController<T> {
  const { kind, informer } = options;
  const { db, registry } = ctx;
  const name = kind.kind.toLowerCase();
  const logger = ctx.logger.child({ controller: name });
  const builder = newController(name, { registry, logger })
    .for<T>(informer, {
      type: kind,
      predicates: [kind.predicate],
      skipSettledOnRelist: options.skipSettledOnRelist,
    })
    .reads(...(options.alsoReads ?? []))
    .withOptions({ concurrency: ctx.config.maxConcurrentReconciles });
  const controller = (options.watches?.(builder) ?? builder).complete(options.reconcile);
  const { queue, enqueue, enqueueAll } = controller;
  let sweeper: Periodic | undefined;

  const sweepOrphans = () => enqueueMappingsMissingFromCache(db, kind.kind, informer, enqueue, logger);
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
    informers: controller.informers,
    notifications: { operationStateChanged: onOperationStateChanged },
    start() {
      controller.start();
      // Rows whose CR vanished while no backend watched (missed delete events): now and every resync period.
      let firstSweep: Promise<unknown> | undefined;
      sweeper = runPeriodically(
        `${kind.kind} orphan sweep`,
        ctx.config.resyncIntervalMs,
        () => {
          const sweep = sweepOrphans();
          firstSweep ??= sweep;
          return sweep;
        },
        {
          logger,
          jitter: 0.25,
        },
      );
      // Every CR of the cache was queued at start, and the first sweep queued the rows of those gone: once the
      // queue is idle, the rows say what the CRs say. After a database restore the agents start only then
      // (docs/backup-and-restore.md): before, they would make Argo CD match the restored, older rows.
      void (async () => {
        await firstSweep?.catch(() => {});
        await queue.whenIdle();
        if (!queue.isShuttingDown())
          logger.info({ kind: kind.kind }, `every ${kind.kind} reconciled once since start`);
      })();
    },
    resync: enqueueAll,
    enqueueAll,
    sweepOrphans,
    onOperationStateChanged,
    async stop() {
      await sweeper?.stop();
      await controller.stop();
    },
  };
}
