/**
 * The one way to wire a controller: a work queue fed by the informer of the kind it reconciles (`for`), by
 * the objects it owns (`owns`: their controller owner reference of that kind) and by other kinds mapped to
 * its keys (`watches`, usually through an informer index), each source filtered by named predicates
 * (`predicates.ts`). The result is a `Feature`: listed in a process's feature set, started once every cache
 * has synced, resynced by enqueueing every cached object, stopped by draining its queue.
 *
 *   const controller = newController('kafkaconnection', { registry, logger })
 *     .for(connections, { type: Kinds.KafkaConnection, predicates: [generationChanged] })
 *     .owns(secrets)
 *     .watches(deployments, keysFromIndex(connections, 'deployment', objectKey))
 *     .withOptions({ concurrency: 4 })
 *     .complete(reconcile);
 *
 * A controller whose keys are not one kind's objects (the agent's database resources) starts with
 * `forKeys()` instead of `for(...)`, and is also fed by `enqueue`.
 *
 * Handlers only map events to keys; the reconcile reads the current state (level-based).
 */

import type { Clock } from './clock.ts';
import type { Feature } from './feature.ts';
import type { Informer } from './informer.ts';
import { type KubeObject, objectKey, type TypeMeta } from './kube.ts';
import type { Logger } from './logger.ts';
import type { Registry } from './metrics.ts';
import {
  createSettledVersions,
  type Predicate,
  passesCreate,
  passesDelete,
  passesUpdate,
} from './predicates.ts';
import type { ExponentialBackoffOptions, RateLimiter } from './rate-limiter.ts';
import { createWorkQueue, type Reconciler, type WorkQueue } from './work-queue.ts';

/** A controller keyed by something other than one kind's objects (`newController(...).forKeys()`). */
export interface KeyController extends Feature {
  readonly queue: WorkQueue;
  /** Queues one key. */
  enqueue(key: string): void;
}

export interface Controller<T extends KubeObject = KubeObject> extends KeyController {
  /** The cache of the kind it reconciles. */
  readonly informer: Informer<T>;
  /** Queues every cached object of the kind. */
  enqueueAll(): void;
  /** The same as `enqueueAll` (a notification channel was lost, so events may have been missed). */
  resync(): void;
}

/** The work-queue options of a controller (controller-runtime's controller.Options). */
export interface ControllerQueueOptions {
  /** Reconciles running at once. Default 1. */
  concurrency?: number;
  /** Per-key backoff bounds or a rate limiter. Default 5 ms → 1000 s. */
  backoff?: ExponentialBackoffOptions | RateLimiter;
  clock?: Clock;
}

export interface ForOptions<T extends KubeObject> {
  /** Which events of the kind wake the controller (all must pass). Default: every event. */
  predicates?: readonly Predicate<T>[];
  /** The kind's type, needed by `owns` to recognise owner references to it. */
  type?: TypeMeta;
  /**
   * Drop a relist of an object whose last reconcile settled (succeeded, no requeue) at the same
   * resourceVersion, or at an older one followed only by changes the predicates dropped (status writes): an
   * idle resync then costs nothing per settled object. `resync()` still queues all.
   */
  skipSettledOnRelist?: boolean;
}

export interface SourceOptions<O extends KubeObject> {
  /** Which events of the source wake the controller (all must pass). Default: every event. */
  predicates?: readonly Predicate<O>[];
}

/** Maps an object of a watched kind to keys of the controller's kind. */
export type MapToKeys<O extends KubeObject> = (object: O) => Iterable<string>;

export interface ControllerBuilder<T extends KubeObject> {
  /** Objects whose controller owner reference names an object of the `for` kind wake that owner. */
  owns<O extends KubeObject>(informer: Informer<O>, options?: SourceOptions<O>): ControllerBuilder<T>;
  /** Events of another kind wake the keys `mapToKeys` returns (for an update: of the old and the new object). */
  watches<O extends KubeObject>(
    informer: Informer<O>,
    mapToKeys: MapToKeys<O>,
    options?: SourceOptions<O>,
  ): ControllerBuilder<T>;
  /** Caches the reconcile reads without being woken by them (started and awaited with the others). */
  reads(...informers: Informer<KubeObject>[]): ControllerBuilder<T>;
  withOptions(options: ControllerQueueOptions): ControllerBuilder<T>;
  /** Subscribes every source and returns the controller (its queue starts with `start()`). */
  complete(reconcile: Reconciler): Controller<T>;
}

export interface KeyControllerBuilder {
  /** Events of a kind wake the keys `mapToKeys` returns (for an update: of the old and the new object). */
  watches<O extends KubeObject>(
    informer: Informer<O>,
    mapToKeys: MapToKeys<O>,
    options?: SourceOptions<O>,
  ): KeyControllerBuilder;
  withOptions(options: ControllerQueueOptions): KeyControllerBuilder;
  /** Subscribes every source and returns the controller (its queue starts with `start()`). */
  complete(reconcile: Reconciler): KeyController;
}

/**
 * The keys of the objects an index of `informer` holds under the value `indexValueOf` gives the watched object:
 * the `mapToKeys` of a watch by reference ("the SyncRuns whose spec names this deployment").
 */
export function keysFromIndex<T extends KubeObject, O extends KubeObject>(
  informer: Pick<Informer<T>, 'byIndex'>,
  indexName: string,
  indexValueOf: (object: O) => string | undefined,
): MapToKeys<O> {
  return (object) => {
    const value = indexValueOf(object);
    return value === undefined ? [] : informer.byIndex(indexName, value).map(objectKey);
  };
}

/** The keys of the owners of `object` of kind `type` named by its controller owner reference. */
export function controllerOwnerKeys(type: TypeMeta, object: KubeObject): string[] {
  const group = (apiVersion: unknown) =>
    typeof apiVersion === 'string' && apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
  const refs = object.metadata.ownerReferences;
  if (!Array.isArray(refs)) return [];
  const keys: string[] = [];
  for (const ref of refs as unknown[]) {
    if (typeof ref !== 'object' || ref === null) continue;
    const { controller, kind, apiVersion, name } = ref as Record<string, unknown>;
    if (controller !== true || kind !== type.kind || typeof name !== 'string') continue;
    if (group(apiVersion) !== group(type.apiVersion)) continue;
    keys.push(objectKey({ metadata: { name, namespace: object.metadata.namespace } }));
  }
  return keys;
}

interface Source {
  informer: Informer<KubeObject>;
  subscribe(enqueue: (key: string) => void): (() => void)[];
}

function sourceOf<O extends KubeObject>(
  informer: Informer<O>,
  mapToKeys: MapToKeys<O>,
  predicates: readonly Predicate<O>[],
  /** Told of every update the predicates dropped. */
  onUpdateDropped?: (oldObject: O, newObject: O) => void,
): Source {
  return {
    informer: informer as unknown as Informer<KubeObject>,
    subscribe(enqueue) {
      const enqueueAll = (keys: Iterable<string>) => {
        for (const key of keys) enqueue(key);
      };
      return [
        informer.onAdd((o) => {
          if (passesCreate(predicates, o)) enqueueAll(mapToKeys(o));
        }),
        informer.onUpdate((a, b) => {
          if (passesUpdate(predicates, a, b)) enqueueAll(new Set([...mapToKeys(a), ...mapToKeys(b)]));
          else onUpdateDropped?.(a, b);
        }),
        informer.onDelete((o) => {
          if (passesDelete(predicates, o)) enqueueAll(mapToKeys(o));
        }),
      ];
    },
  };
}

/** What `complete` assembles, whichever way the controller is keyed. */
function assemble(
  name: string,
  deps: { registry: Registry; logger: Logger },
  parts: { sources: Source[]; readOnly: Informer<KubeObject>[]; queueOptions: ControllerQueueOptions },
  reconcile: Reconciler,
): KeyController {
  const queue = createWorkQueue({
    name,
    reconcile,
    registry: deps.registry,
    logger: deps.logger,
    ...parts.queueOptions,
  });
  const enqueue = (key: string) => queue.add(key);
  const unsubscribe = parts.sources.flatMap((source) => source.subscribe(enqueue));
  return {
    name,
    queue,
    informers: [...new Set([...parts.sources.map((s) => s.informer), ...parts.readOnly])],
    enqueue,
    start: () => queue.start(),
    async stop() {
      for (const u of unsubscribe) u();
      await queue.shutdown();
    },
  };
}

/** Starts a controller named `name` (the `controller` label of its metrics and logs). */
export function newController(name: string, deps: { registry: Registry; logger: Logger }) {
  return {
    for<T extends KubeObject>(informer: Informer<T>, forOptions: ForOptions<T> = {}): ControllerBuilder<T> {
      const settled = forOptions.skipSettledOnRelist
        ? createSettledVersions(informer as unknown as Informer<KubeObject>)
        : undefined;
      const primary = sourceOf(
        informer,
        (o) => [objectKey(o)],
        [...(settled ? [settled.predicate as Predicate<T>] : []), ...(forOptions.predicates ?? [])],
        // A change the predicates drop (e.g. a status write) leaves a settled object settled.
        settled &&
          ((a, b) => settled.carry(objectKey(b), a.metadata.resourceVersion, b.metadata.resourceVersion)),
      );
      const parts = { sources: [primary], readOnly: [] as Informer<KubeObject>[], queueOptions: {} };
      const builder: ControllerBuilder<T> = {
        owns(owned, options = {}) {
          const type = forOptions.type;
          if (!type) throw new Error(`controller ${name}: owns() needs the type of the for() kind`);
          parts.sources.push(sourceOf(owned, (o) => controllerOwnerKeys(type, o), options.predicates ?? []));
          return builder;
        },
        watches(watched, mapToKeys, options = {}) {
          parts.sources.push(sourceOf(watched, mapToKeys, options.predicates ?? []));
          return builder;
        },
        reads(...informers) {
          parts.readOnly.push(...informers);
          return builder;
        },
        withOptions(options) {
          parts.queueOptions = { ...parts.queueOptions, ...options };
          return builder;
        },
        complete(reconcile) {
          const run: Reconciler = settled
            ? async (key, context) => {
                const version = settled.begin(key);
                const result = await reconcile(key, context);
                if (!result?.requeue && result?.requeueAfter === undefined) settled.settle(key, version);
                return result;
              }
            : reconcile;
          const controller = assemble(name, deps, parts, run);
          const enqueueAll = () => {
            for (const object of informer.list()) controller.enqueue(objectKey(object));
          };
          return { ...controller, informer, enqueueAll, resync: enqueueAll };
        },
      };
      return builder;
    },

    /**
     * A controller whose keys are not the objects of one kind (the cluster-agent's database resources,
     * `<type>/<id>`): woken by the informers it `watches`, through their map to its keys, and by `enqueue`
     * (a database notification, a sweep). Nothing is queued at a resync: its owner decides what to look at.
     */
    forKeys(): KeyControllerBuilder {
      const parts = { sources: [] as Source[], readOnly: [] as Informer<KubeObject>[], queueOptions: {} };
      const builder: KeyControllerBuilder = {
        watches(watched, mapToKeys, options = {}) {
          parts.sources.push(sourceOf(watched, mapToKeys, options.predicates ?? []));
          return builder;
        },
        withOptions(options) {
          parts.queueOptions = { ...parts.queueOptions, ...options };
          return builder;
        },
        complete: (reconcile) => assemble(name, deps, parts, reconcile),
      };
      return builder;
    },
  };
}
