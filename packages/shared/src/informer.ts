/**
 * Informer supervisor: a list+watch cache of one resource that keeps itself alive.
 *
 * - Lists (paginated), then watches from the list's resourceVersion with `allowWatchBookmarks`,
 *   so a quiet watch still advances its resourceVersion and survives etcd compaction.
 * - Restarts the watch whenever it ends: at once after a normal close (the server-side
 *   `timeoutSeconds`), with exponential backoff and jitter after an error (API server down).
 * - Relists on `410 Gone`, on a silent watch (no event and no bookmark for `silentWatchTimeoutMs`),
 *   and periodically every `resyncPeriodMs` plus up to `resyncJitter` of it. A relist delivers every
 *   object again (`onUpdate` for the ones already known), so it doubles as the level-triggered
 *   resync of the controllers fed by this informer.
 * - Strips `metadata.managedFields` from cached objects (often half of an object's size).
 * - Treats resourceVersions as opaque strings: stored and sent back, compared only for equality.
 *
 * - Keeps named indexes over the cache (client-go's indexers, informer-indexes.ts): `byIndex('parent',
 *   'ns/name')` answers "which cached objects reference ns/name" without scanning a namespace's list on
 *   every event.
 *
 * Handlers run synchronously after the cache (and its indexes) was updated; they should only map objects
 * to queue keys. Metrics: `watch_restarts_total`, `watch_last_event_age_seconds`, `informer_relists_total`,
 * all labelled `resource`.
 *
 * The watch stream is read here rather than through client-node's `Watch`, whose fixed 30 s
 * inactivity timeout would cut every quiet watch before the API server's first bookmark (~1 min).
 */
import { backoffDelay } from './backoff.ts';
import { type Clock, sleep, systemClock, type TimerHandle } from './clock.ts';
import { ErrorCode, errorCode, KubeApiError, RetryableError } from './errors.ts';
import { createCacheIndexes, type IndexFunc, NAMESPACE_INDEX } from './informer-indexes.ts';
import { isKubeObject, type KubeObject, objectKey } from './kube.ts';
import { collectionPath, HttpMethod, type KubeConfig, kubeRequest, kubeStream } from './kube-client.ts';
import type { Logger } from './logger.ts';
import { addGaugeCollector, getOrCreateCounter, type Registry } from './metrics.ts';

export interface InformerOptions<T extends KubeObject> {
  kubeConfig: KubeConfig;
  /** What to watch, e.g. `{ apiVersion: 'v1', plural: 'configmaps' }`. */
  resource: { apiVersion: string; plural: string };
  /** Only this namespace; all namespaces when omitted. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  registry: Registry;
  logger: Logger;
  /** Parses each object at the boundary; objects it rejects are logged and left out of the cache. */
  parse?: (object: unknown) => T;
  /**
   * Trims each object before it is cached (after `parse` and after managedFields and kubectl's last-applied
   * annotation are removed): keep only what the controllers read, so the cache grows slowly with the number
   * of objects. Must return a new object rather than change its input.
   */
  transform?: (object: T) => T;
  /** Named indexes kept over the cache from the start (more can be added with `addIndexers`). */
  indexers?: Readonly<Record<string, IndexFunc<T>>>;
  /** Full relist/resync period. Default 10 min. */
  resyncPeriodMs?: number;
  /** Extra random fraction of the period added to each relist, so replicas do not relist together. Default 0.25. */
  resyncJitter?: number;
  /** Relist when a watch delivers no event and no bookmark for this long. Default 3 min (bookmarks come about every minute). */
  silentWatchTimeoutMs?: number;
  /** Backoff after failed lists/watches. Default 800 ms doubling up to 30 s, with jitter. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Objects per list page. Default 500. */
  listPageSize?: number;
  /** The `resource` label of the metrics. Default `<plural>` or `<plural>.<group>`. */
  metricsLabel?: string;
  clock?: Clock;
}

export type AddHandler<T> = (object: T) => void;
export type UpdateHandler<T> = (oldObject: T, newObject: T) => void;
export type DeleteHandler<T> = (object: T) => void;

export interface Informer<T extends KubeObject> {
  /** Starts listing and watching in the background. Idempotent. */
  start(): void;
  /** Stops watching; resolves when the background loop has ended. */
  stop(): Promise<void>;
  /** True once the first list has filled the cache. */
  hasSynced(): boolean;
  /** Resolves once synced (or when `signal` aborts / the informer stops). */
  waitForSync(signal?: AbortSignal): Promise<boolean>;
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
  /** The last resourceVersion seen (opaque). */
  lastResourceVersion(): string;
}

interface WatchEvent {
  type?: unknown;
  object?: unknown;
}

type WatchOutcome =
  | { kind: 'closed' }
  | { kind: 'gone' }
  | { kind: 'relist' }
  | { kind: 'silent' }
  | { kind: 'stopped' }
  | { kind: 'error'; err: unknown; delivered: boolean };

/** The annotation `kubectl apply` keeps: a full copy of the applied object, never read by a controller. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * Removes `metadata.managedFields` and kubectl's last-applied annotation (copying, never mutating the
 * input): together often more than half of an object's size, and no controller reads them.
 */
export function stripManagedFields<T extends KubeObject>(object: T): T {
  const annotations = object.metadata.annotations;
  const lastApplied = annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations;
  if (!('managedFields' in object.metadata) && !lastApplied) return object;
  const { managedFields: _managedFields, ...metadata } = object.metadata;
  if (lastApplied) {
    const { [LAST_APPLIED_ANNOTATION]: _lastApplied, ...rest } = annotations;
    metadata.annotations = rest;
  }
  return { ...object, metadata };
}

function resourceVersionOf(object: unknown): string | undefined {
  const metadata =
    typeof object === 'object' && object !== null ? (object as { metadata?: unknown }).metadata : undefined;
  const rv =
    typeof metadata === 'object' && metadata !== null
      ? (metadata as { resourceVersion?: unknown }).resourceVersion
      : undefined;
  return typeof rv === 'string' && rv !== '' ? rv : undefined;
}

function defaultParse<T extends KubeObject>(object: unknown): T {
  if (!isKubeObject(object)) throw new Error('object has no metadata.name');
  return object as T;
}

/**
 * Every object of a paginated list (`limit` `pageSize`, following `continue`) and the list's resourceVersion.
 * @throws RetryableError when an answer is not a list; KubeApiError as kubeRequest.
 */
async function listAll(
  kc: KubeConfig,
  path: string,
  options: { labelSelector?: string; fieldSelector?: string; pageSize: number; signal: AbortSignal },
): Promise<{ items: unknown[]; resourceVersion: string }> {
  const items: unknown[] = [];
  let continueToken: string | undefined;
  let resourceVersion = '';
  do {
    const page = await kubeRequest(kc, {
      method: HttpMethod.GET,
      path,
      query: {
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        limit: options.pageSize,
        continue: continueToken,
      },
      signal: options.signal,
    });
    const list = page as { items?: unknown; metadata?: { resourceVersion?: unknown; continue?: unknown } };
    if (!Array.isArray(list.items)) {
      throw new RetryableError(ErrorCode.kubeRequestFailed, `GET ${path}: the answer is not a list`);
    }
    items.push(...list.items);
    continueToken =
      typeof list.metadata?.continue === 'string' && list.metadata.continue
        ? list.metadata.continue
        : undefined;
    if (typeof list.metadata?.resourceVersion === 'string') resourceVersion = list.metadata.resourceVersion;
  } while (continueToken);
  return { items, resourceVersion };
}

/**
 * The lines of a watch answer (one JSON event per line). Lines are cut from the Buffers and decoded whole, so
 * a character split between two chunks stays intact.
 */
async function* linesOf(stream: AsyncIterable<Buffer>): AsyncGenerator<string> {
  let pending: Buffer[] = [];
  for await (const chunk of stream) {
    let start = 0;
    for (let newline = chunk.indexOf(10); newline >= 0; newline = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, newline);
      const line = pending.length > 0 ? Buffer.concat([...pending, piece]) : piece;
      pending = [];
      start = newline + 1;
      yield line.toString('utf8');
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
}

export function createInformer<T extends KubeObject = KubeObject>(options: InformerOptions<T>): Informer<T> {
  const kc = options.kubeConfig;
  const clock = options.clock ?? systemClock;
  const parse = options.parse ?? defaultParse<T>;
  const resyncPeriodMs = options.resyncPeriodMs ?? 10 * 60_000;
  const resyncJitter = options.resyncJitter ?? 0.25;
  const silentMs = options.silentWatchTimeoutMs ?? 3 * 60_000;
  const backoffInitialMs = options.backoff?.initialMs ?? 800;
  const backoffMaxMs = options.backoff?.maxMs ?? 30_000;
  const pageSize = options.listPageSize ?? 500;
  const group = options.resource.apiVersion.includes('/') ? options.resource.apiVersion.split('/')[0] : '';
  const resourceLabel =
    options.metricsLabel ?? (group ? `${options.resource.plural}.${group}` : options.resource.plural);
  const path = collectionPath({ ...options.resource, namespace: options.namespace });
  const logger = options.logger.child({ informer: resourceLabel, namespace: options.namespace });
  const labels = { resource: resourceLabel };

  const restarts = getOrCreateCounter(options.registry, {
    name: 'watch_restarts_total',
    help: 'Watches restarted after they ended (normal close, error, 410 Gone, silence or periodic relist)',
    labelNames: ['resource'],
  });
  const relists = getOrCreateCounter(options.registry, {
    name: 'informer_relists_total',
    help: 'Full lists after the initial one (410 Gone, silent watch, periodic resync)',
    labelNames: ['resource'],
  });
  restarts.inc(labels, 0);
  relists.inc(labels, 0);
  let lastEventAt: number | undefined;
  const lastEventAge = addGaugeCollector(
    options.registry,
    {
      name: 'watch_last_event_age_seconds',
      help: 'Seconds since the watch delivered its last event or bookmark (or since it connected)',
      labelNames: ['resource'],
    },
    (gauge) => {
      if (lastEventAt !== undefined) gauge.set(labels, (clock.now() - lastEventAt) / 1000);
    },
  );

  let cache = new Map<string, T>();
  const indexes = createCacheIndexes<T>();
  indexes.add({ [NAMESPACE_INDEX]: (object) => [object.metadata.namespace ?? ''] }, cache);
  if (options.indexers) indexes.add(options.indexers, cache);
  function byIndex(indexName: string, value: string): T[] {
    const objects: T[] = [];
    for (const key of indexes.keys(indexName, value)) {
      const object = cache.get(key);
      if (object) objects.push(object);
    }
    return objects;
  }
  let resourceVersion = '';
  let synced = false;
  let listed = false;
  let running: Promise<void> | undefined;
  let stopped = false;
  const stopController = new AbortController();
  let watchController: AbortController | undefined;
  let watchAbortReason: 'relist' | 'silent' | undefined;
  let relistRequested = false;
  let relistTimer: TimerHandle | undefined;
  let silenceTimer: TimerHandle | undefined;
  let syncWaiters: Array<(synced: boolean) => void> = [];
  const addHandlers = new Set<AddHandler<T>>();
  const updateHandlers = new Set<UpdateHandler<T>>();
  const deleteHandlers = new Set<DeleteHandler<T>>();

  function notify<A extends unknown[]>(handlers: Set<(...args: A) => void>, ...args: A) {
    for (const handler of handlers) {
      try {
        handler(...args);
      } catch (err) {
        logger.error({ err }, 'informer event handler threw');
      }
    }
  }

  function prepare(raw: unknown): T | undefined {
    try {
      const object = stripManagedFields(parse(raw));
      return options.transform ? options.transform(object) : object;
    } catch (err) {
      const name = isKubeObject(raw) ? objectKey(raw) : '(unknown)';
      logger.error({ err, object: name }, 'object rejected by the informer parser, left out of the cache');
      return undefined;
    }
  }

  function scheduleRelist() {
    relistTimer?.cancel();
    const delay = resyncPeriodMs * (1 + resyncJitter * Math.random());
    relistTimer = clock.setTimer(() => {
      relistRequested = true;
      watchAbortReason = 'relist';
      watchController?.abort();
    }, delay);
  }

  function armSilenceTimer() {
    silenceTimer?.cancel();
    const since = lastEventAt ?? clock.now();
    silenceTimer = clock.setTimer(
      () => {
        if (lastEventAt !== undefined && clock.now() - lastEventAt < silentMs) {
          armSilenceTimer();
          return;
        }
        watchAbortReason = 'silent';
        watchController?.abort();
      },
      Math.max(0, since + silentMs - clock.now()),
    );
  }

  async function relist() {
    const { items, resourceVersion: listResourceVersion } = await listAll(kc, path, {
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      pageSize,
      signal: stopController.signal,
    });
    const next = new Map<string, T>();
    for (const raw of items) {
      const object = prepare(raw);
      if (object) next.set(objectKey(object), object);
    }
    const previous = cache;
    cache = next;
    indexes.rebuild(cache);
    resourceVersion = listResourceVersion;
    if (listed) relists.inc(labels);
    listed = true;
    for (const [key, object] of next) {
      const old = previous.get(key);
      if (old) notify(updateHandlers, old, object);
      else notify(addHandlers, object);
    }
    for (const [key, old] of previous) if (!next.has(key)) notify(deleteHandlers, old);
    if (!synced) {
      synced = true;
      logger.info({ objects: next.size }, 'informer synced');
      for (const resolve of syncWaiters) resolve(true);
      syncWaiters = [];
    }
    scheduleRelist();
  }

  /** Handles one watch event; returns an outcome when the watch must end. */
  function handleEvent(event: WatchEvent): WatchOutcome | undefined {
    lastEventAt = clock.now();
    const { type } = event;
    if (type === 'ERROR') {
      const status = (event.object ?? {}) as { code?: unknown; message?: unknown; reason?: unknown };
      if (status.code === 410) return { kind: 'gone' };
      return {
        kind: 'error',
        delivered: true,
        err: new KubeApiError({
          statusCode: typeof status.code === 'number' ? status.code : 0,
          reason: typeof status.reason === 'string' ? status.reason : undefined,
          method: 'GET',
          path,
          message: `watch ${path}: ${String(status.message ?? 'error event')}`,
        }),
      };
    }
    // Bookmarks carry only metadata.resourceVersion (no name), so read it without isKubeObject.
    const rv = resourceVersionOf(event.object);
    if (type === 'BOOKMARK') {
      if (rv) resourceVersion = rv;
      return undefined;
    }
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return undefined;
    const object = prepare(event.object);
    if (rv) resourceVersion = rv;
    if (!object) return undefined;
    const key = objectKey(object);
    const old = cache.get(key);
    if (type === 'DELETED') {
      cache.delete(key);
      indexes.update(key, old, undefined);
      notify(deleteHandlers, object); // the final state, as client-go delivers it
    } else if (old) {
      // Same object version delivered twice (e.g. replayed after a reconnect): nothing changed.
      if (
        old.metadata.resourceVersion !== undefined &&
        old.metadata.resourceVersion === object.metadata.resourceVersion
      ) {
        return undefined;
      }
      cache.set(key, object);
      indexes.update(key, old, object);
      notify(updateHandlers, old, object);
    } else {
      cache.set(key, object);
      indexes.update(key, undefined, object);
      notify(addHandlers, object);
    }
    return undefined;
  }

  async function watchOnce(): Promise<WatchOutcome> {
    const controller = new AbortController();
    watchController = controller;
    watchAbortReason = undefined;
    const abortOnStop = () => controller.abort();
    stopController.signal.addEventListener('abort', abortOnStop, { once: true });
    let delivered = false;
    /** One line of the answer; blank lines (keep-alives) and unparsable ones are skipped. */
    const handleLine = (text: string): WatchOutcome | undefined => {
      const line = text.trim();
      if (line === '') return undefined;
      let event: WatchEvent;
      try {
        event = JSON.parse(line) as WatchEvent;
      } catch {
        logger.warn({ length: line.length }, 'unparsable watch line skipped');
        return undefined;
      }
      delivered = true;
      return handleEvent(event);
    };
    const ended = (): WatchOutcome | undefined => {
      if (stopped) return { kind: 'stopped' };
      if (watchAbortReason) return { kind: watchAbortReason };
      return undefined;
    };
    try {
      if (relistRequested) return { kind: 'relist' };
      const stream = await kubeStream(kc, {
        path,
        query: {
          watch: true,
          allowWatchBookmarks: true,
          resourceVersion,
          // Server-side close after 5-10 min (as client-go's reflector), so connections rebalance.
          timeoutSeconds: Math.floor(300 * (1 + Math.random())),
          labelSelector: options.labelSelector,
          fieldSelector: options.fieldSelector,
        },
        signal: controller.signal,
      });
      lastEventAt = clock.now();
      armSilenceTimer();
      try {
        for await (const line of linesOf(stream as AsyncIterable<Buffer>)) {
          const outcome = handleLine(line);
          if (outcome) return outcome;
        }
      } finally {
        stream.destroy();
      }
      return ended() ?? { kind: 'closed' };
    } catch (err) {
      const reason = ended();
      if (reason) return reason;
      if (err instanceof KubeApiError && err.statusCode === 410) return { kind: 'gone' };
      return { kind: 'error', err, delivered };
    } finally {
      silenceTimer?.cancel();
      stopController.signal.removeEventListener('abort', abortOnStop);
      controller.abort();
      if (watchController === controller) watchController = undefined;
    }
  }

  async function run() {
    let needList = true;
    let failures = 0;
    while (!stopped) {
      if (needList) {
        try {
          await relist();
          // A relist request that came in while listing is satisfied by this list.
          relistRequested = false;
          needList = false;
          failures = 0;
        } catch (err) {
          if (stopped) break;
          failures++;
          const delay = backoffDelay(failures, backoffInitialMs, backoffMaxMs);
          logger.warn({ err, code: errorCode(err), retryInMs: delay }, 'list failed');
          await sleep(clock, delay, stopController.signal);
          continue;
        }
      }
      const outcome = await watchOnce();
      if (stopped || outcome.kind === 'stopped') break;
      restarts.inc(labels);
      switch (outcome.kind) {
        case 'closed':
          failures = 0;
          logger.debug('watch closed by the server, reconnecting');
          break;
        case 'gone':
          needList = true;
          logger.info('watch resourceVersion expired (410 Gone), relisting');
          break;
        case 'silent':
          needList = true;
          logger.warn({ silentWatchTimeoutMs: silentMs }, 'watch silent (no event or bookmark), relisting');
          break;
        case 'relist':
          needList = true;
          logger.debug('periodic relist');
          break;
        case 'error': {
          failures = outcome.delivered ? 1 : failures + 1;
          const delay = backoffDelay(failures, backoffInitialMs, backoffMaxMs);
          logger.warn(
            { err: outcome.err, code: errorCode(outcome.err), retryInMs: delay },
            'watch failed, restarting with backoff',
          );
          await sleep(clock, delay, stopController.signal);
          break;
        }
      }
    }
  }

  return {
    start() {
      if (running || stopped) return;
      running = run().catch((err: unknown) => {
        logger.fatal({ err }, 'informer loop crashed');
      });
    },
    async stop() {
      if (!stopped) {
        stopped = true;
        stopController.abort();
        relistTimer?.cancel();
        silenceTimer?.cancel();
        lastEventAge.remove();
        for (const resolve of syncWaiters) resolve(false);
        syncWaiters = [];
      }
      await running;
    },
    hasSynced: () => synced,
    waitForSync(signal) {
      if (synced) return Promise.resolve(true);
      if (stopped || signal?.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const onAbort = () => {
          syncWaiters = syncWaiters.filter((waiter) => waiter !== settle);
          resolve(false);
        };
        const settle = (value: boolean) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        };
        syncWaiters.push(settle);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    },
    list(namespace) {
      return namespace === undefined ? [...cache.values()] : byIndex(NAMESPACE_INDEX, namespace);
    },
    get(namespace, name) {
      return cache.get(namespace ? `${namespace}/${name}` : name);
    },
    addIndexers(indexers) {
      indexes.add(indexers, cache);
    },
    byIndex,
    onAdd(handler) {
      addHandlers.add(handler);
      return () => addHandlers.delete(handler);
    },
    onUpdate(handler) {
      updateHandlers.add(handler);
      return () => updateHandlers.delete(handler);
    },
    onDelete(handler) {
      deleteHandlers.add(handler);
      return () => deleteHandlers.delete(handler);
    },
    lastResourceVersion: () => resourceVersion,
  };
}
