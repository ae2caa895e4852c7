import type { KeyController } from '../builder.ts';
import type { AddHandler, DeleteHandler, Informer, UpdateHandler } from '../informer.ts';
import { createCacheIndexes, type IndexFunc } from '../informer-indexes.ts';
import { type KubeObject, objectKey } from '../kube.ts';

/** An informer whose events a test delivers by hand, and the way it delivers them. */
export interface HandInformer<T extends KubeObject = KubeObject> {
  readonly informer: Informer<T>;
  /** Adds or updates the object (an update when its key is cached; the same resourceVersion is a relist). */
  put(object: T): void;
  /** Deletes the object (a delete event of `object`). */
  remove(object: T): void;
}

/**
 * An informer whose events the test delivers by hand (the cache, its indexes and the handlers as the real
 * one keeps them): what the controller builder subscribes to, for tests of which events wake which keys. The
 * real informer's indexes against the API server are tested in informer.int.test.ts.
 */
export function handInformer<T extends KubeObject = KubeObject>(): HandInformer<T> {
  const cache = new Map<string, T>();
  const indexes = createCacheIndexes<T>();
  const adds = new Set<AddHandler<T>>();
  const updates = new Set<UpdateHandler<T>>();
  const deletes = new Set<DeleteHandler<T>>();
  const byIndex = (name: string, value: string) =>
    indexes.keys(name, value).flatMap((key) => cache.get(key) ?? []);
  const informer: Informer<T> = {
    start: () => undefined,
    stop: async () => undefined,
    hasSynced: () => true,
    waitForSync: async () => true,
    list: (namespace) =>
      [...cache.values()].filter((o) => namespace === undefined || o.metadata.namespace === namespace),
    get: (namespace, name) => cache.get(namespace ? `${namespace}/${name}` : name),
    addIndexers: (indexers: Record<string, IndexFunc<T>>) => indexes.add(indexers, cache),
    byIndex,
    onAdd: (h) => {
      adds.add(h);
      return () => adds.delete(h);
    },
    onUpdate: (h) => {
      updates.add(h);
      return () => updates.delete(h);
    },
    onDelete: (h) => {
      deletes.add(h);
      return () => deletes.delete(h);
    },
    lastResourceVersion: () => '',
  };
  return {
    informer,
    put(object) {
      const key = objectKey(object);
      const old = cache.get(key);
      cache.set(key, object);
      indexes.update(key, old, object);
      if (old) for (const h of updates) h(old, object);
      else for (const h of adds) h(object);
    },
    remove(object) {
      const key = objectKey(object);
      const old = cache.get(key);
      cache.delete(key);
      indexes.update(key, old, undefined);
      for (const h of deletes) h(object);
    },
  };
}

/**
 * A controller whose reconcile only records the keys it was given: `build` wires it (its `for`, `owns` and
 * `watches`) around that reconcile. `drain()` answers the keys reconciled since the last call, sorted, once
 * the queue is idle; `wakes(event)` drains, delivers the event and answers the keys it woke.
 */
export function recordingController<C extends KeyController>(
  build: (reconcile: (key: string) => Promise<{ requeueAfter?: number } | undefined>) => C,
) {
  const reconciled: string[] = [];
  let answer: { requeueAfter?: number } | undefined;
  const controller = build(async (key) => {
    reconciled.push(key);
    return answer;
  });
  const drain = async () => {
    await controller.queue.whenIdle();
    return reconciled.splice(0).sort();
  };
  return {
    controller,
    drain,
    async wakes(event: () => void): Promise<string[]> {
      await drain();
      event();
      return drain();
    },
    answer(next: { requeueAfter?: number } | undefined) {
      answer = next;
    },
  };
}
