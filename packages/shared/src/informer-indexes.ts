/**
 * Named indexes over an informer's cache (client-go's indexers): an index function gives the values an object
 * is found under, and `keys(index, value)` answers "which cached objects are found under it" without a scan.
 * The informer (informer.ts) and the hand-fed one of the tests (testing/hand-informer.ts) keep theirs in step
 * with their cache through `update` and `rebuild`.
 */

/**
 * The values an object is found under in one index (client-go's IndexFunc), e.g. the namespaced name of the
 * parent it references; none when it references nothing. Must be a pure function of the object.
 */
export type IndexFunc<T> = (object: T) => readonly string[];

/** The index every informer keeps: objects by namespace (`''` for cluster-scoped ones); `list(namespace)` reads it. */
export const NAMESPACE_INDEX = 'namespace';

/** `namespace/value`: an index value for references that never leave the object's namespace. */
export function namespacedIndexValue(namespace: string | undefined, value: string): string {
  return `${namespace ?? ''}/${value}`;
}

/**
 * Named indexes over a cache keyed by object key: for each index, value → the keys of the objects found
 * under it. Kept in step by `update` (one object changed) and `rebuild` (a relist replaced the cache).
 */
export interface CacheIndexes<T> {
  add(indexers: Readonly<Record<string, IndexFunc<T>>>, cache: ReadonlyMap<string, T>): void;
  /** One object changed: `previous` is what the cache held, `next` what it holds now (undefined = gone). */
  update(key: string, previous: T | undefined, next: T | undefined): void;
  rebuild(cache: ReadonlyMap<string, T>): void;
  /** The object keys under `value`. @throws on an unknown index name. */
  keys(indexName: string, value: string): string[];
}

export function createCacheIndexes<T>(): CacheIndexes<T> {
  const indexes = new Map<string, { fn: IndexFunc<T>; byValue: Map<string, Set<string>> }>();
  const insert = (byValue: Map<string, Set<string>>, value: string, key: string) => {
    const keys = byValue.get(value) ?? new Set<string>();
    keys.add(key);
    byValue.set(value, keys);
  };
  const remove = (byValue: Map<string, Set<string>>, value: string, key: string) => {
    const keys = byValue.get(value);
    keys?.delete(key);
    if (keys?.size === 0) byValue.delete(value);
  };
  const fill = (
    index: { fn: IndexFunc<T>; byValue: Map<string, Set<string>> },
    cache: ReadonlyMap<string, T>,
  ) => {
    index.byValue.clear();
    for (const [key, object] of cache)
      for (const value of index.fn(object)) insert(index.byValue, value, key);
  };
  return {
    add(indexers, cache) {
      for (const [name, fn] of Object.entries(indexers)) {
        if (indexes.has(name)) throw new Error(`index ${name} already exists`);
        const index = { fn, byValue: new Map<string, Set<string>>() };
        fill(index, cache);
        indexes.set(name, index);
      }
    },
    update(key, previous, next) {
      for (const { fn, byValue } of indexes.values()) {
        const before = previous === undefined ? [] : fn(previous);
        const after = next === undefined ? [] : fn(next);
        for (const value of before) if (!after.includes(value)) remove(byValue, value, key);
        for (const value of after) insert(byValue, value, key);
      }
    },
    rebuild(cache) {
      for (const index of indexes.values()) fill(index, cache);
    },
    keys(indexName, value) {
      const index = indexes.get(indexName);
      if (!index) throw new Error(`no index named ${indexName}`);
      return [...(index.byValue.get(value) ?? [])];
    },
  };
}
