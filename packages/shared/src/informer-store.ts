/**
 * An informer's store (client-go's indexer and its event distribution): the cached objects by key, their named
 * indexes (informer-indexes.ts) and the handlers told of each change, after the cache and its indexes took it.
 * The informer (informer.ts) fills it from the API server's lists and watches; the hand-fed informer of the
 * tests (testing/hand-informer.ts) from the test's own events.
 */
import { createCacheIndexes, type IndexFunc, NAMESPACE_INDEX } from './informer-indexes.ts';
import { type KubeObject, objectKey } from './kube.ts';

export type AddHandler<T> = (object: T) => void;
export type UpdateHandler<T> = (oldObject: T, newObject: T) => void;
export type DeleteHandler<T> = (object: T) => void;

/** What the store gives an informer's readers. */
export interface StoreReader<T extends KubeObject> {
  /** Cached objects (optionally of one namespace). */
  list(namespace?: string): T[];
  /** A cached object; pass `undefined` as namespace for cluster-scoped objects. */
  get(namespace: string | undefined, name: string): T | undefined;
  /** Adds named indexes (built at once over what is cached). @throws on a name already used. */
  addIndexers(indexers: Readonly<Record<string, IndexFunc<T>>>): void;
  /** The cached objects an index holds under `value`. @throws on an unknown index name. */
  byIndex(indexName: string, value: string): T[];
  onAdd(handler: AddHandler<T>): () => void;
  onUpdate(handler: UpdateHandler<T>): () => void;
  onDelete(handler: DeleteHandler<T>): () => void;
}

export interface InformerStore<T extends KubeObject> extends StoreReader<T> {
  /** The cached object of a key (`objectKey`). */
  cached(key: string): T | undefined;
  /** The number of cached objects. */
  size(): number;
  /**
   * A full list replaces the cache: an update for each object already cached (a relist delivers every object
   * again, the controllers' level-triggered resync), an add for each new one, a delete for each one gone.
   */
  replace(objects: Iterable<T>): void;
  /** An object added or changed (an update when its key is cached). */
  put(object: T): void;
  /** An object deleted: the delete handlers get `object`, its final state (as client-go delivers it). */
  remove(object: T): void;
}

/** The reader side of a store, as an informer (real or hand-fed) passes it on. */
export function storeReader<T extends KubeObject>(store: InformerStore<T>): StoreReader<T> {
  const { list, get, addIndexers, byIndex, onAdd, onUpdate, onDelete } = store;
  return { list, get, addIndexers, byIndex, onAdd, onUpdate, onDelete };
}

/**
 * `handlerFailed` decides what a handler that throws does to the others: the informer logs it and goes on
 * (one bad handler must not starve the rest); the tests' hand-fed informer throws it to the test.
 */
export function createInformerStore<T extends KubeObject>(options: {
  indexers?: Readonly<Record<string, IndexFunc<T>>>;
  handlerFailed: (err: unknown) => void;
}): InformerStore<T> {
  let cache = new Map<string, T>();
  const indexes = createCacheIndexes<T>();
  indexes.add({ [NAMESPACE_INDEX]: (object) => [object.metadata.namespace ?? ''] }, cache);
  if (options.indexers) indexes.add(options.indexers, cache);
  const addHandlers = new Set<AddHandler<T>>();
  const updateHandlers = new Set<UpdateHandler<T>>();
  const deleteHandlers = new Set<DeleteHandler<T>>();

  function notify<A extends unknown[]>(handlers: Set<(...args: A) => void>, ...args: A) {
    for (const handler of handlers) {
      try {
        handler(...args);
      } catch (err) {
        options.handlerFailed(err);
      }
    }
  }
  function byIndex(indexName: string, value: string): T[] {
    const objects: T[] = [];
    for (const key of indexes.keys(indexName, value)) {
      const object = cache.get(key);
      if (object) objects.push(object);
    }
    return objects;
  }
  function subscribe<H>(handlers: Set<H>, handler: H): () => void {
    handlers.add(handler);
    return () => handlers.delete(handler);
  }

  return {
    list: (namespace) =>
      namespace === undefined ? [...cache.values()] : byIndex(NAMESPACE_INDEX, namespace),
    get: (namespace, name) => cache.get(namespace ? `${namespace}/${name}` : name),
    addIndexers: (indexers) => indexes.add(indexers, cache),
    byIndex,
    onAdd: (handler) => subscribe(addHandlers, handler),
    onUpdate: (handler) => subscribe(updateHandlers, handler),
    onDelete: (handler) => subscribe(deleteHandlers, handler),
    cached: (key) => cache.get(key),
    size: () => cache.size,
    replace(objects) {
      const next = new Map<string, T>();
      for (const object of objects) next.set(objectKey(object), object);
      const previous = cache;
      cache = next;
      indexes.rebuild(cache);
      for (const [key, object] of next) {
        const old = previous.get(key);
        if (old) notify(updateHandlers, old, object);
        else notify(addHandlers, object);
      }
      for (const [key, old] of previous) if (!next.has(key)) notify(deleteHandlers, old);
    },
    put(object) {
      const key = objectKey(object);
      const old = cache.get(key);
      cache.set(key, object);
      indexes.update(key, old, object);
      if (old) notify(updateHandlers, old, object);
      else notify(addHandlers, object);
    },
    remove(object) {
      const key = objectKey(object);
      const old = cache.get(key);
      cache.delete(key);
      indexes.update(key, old, undefined);
      notify(deleteHandlers, object);
    },
  };
}
