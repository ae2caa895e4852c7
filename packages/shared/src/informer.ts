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
import { errorCode, KubeApiError } from './errors.ts';
import type { IndexFunc } from './informer-indexes.ts';
import { createInformerStore, type StoreReader, storeReader } from './informer-store.ts';
import { applyWatchEvent, linesOf, listAll, type WatchEvent, type WatchOutcome } from './informer-watch.ts';
import { isKubeObject, type KubeObject, objectKey } from './kube.ts';
import { collectionPath, type KubeConfig, kubeStream } from './kube-client.ts';
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

export type { AddHandler, DeleteHandler, UpdateHandler } from './informer-store.ts';

/** A list+watch cache of one resource: its store's reads and subscriptions (informer-store.ts), and its life. */
export interface Informer<T extends KubeObject> extends StoreReader<T> {
  /** Starts listing and watching in the background. Idempotent. */
  start(): void;
  /** Stops watching; resolves when the background loop has ended. */
  stop(): Promise<void>;
  /** True once the first list has filled the cache. */
  hasSynced(): boolean;
  /** Resolves once synced (or when `signal` aborts / the informer stops). */
  waitForSync(signal?: AbortSignal): Promise<boolean>;
  /** The last resourceVersion seen (opaque). */
  lastResourceVersion(): string;
}

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

function defaultParse<T extends KubeObject>(object: unknown): T {
  if (!isKubeObject(object)) throw new Error('object has no metadata.name');
  return object as T;
}

/** Resolves its waiters with true once set, or with false when cancelled (the informer stopped first). */
function createSyncLatch() {
  let synced = false;
  let waiters: Array<(synced: boolean) => void> = [];
  const release = (value: boolean) => {
    for (const resolve of waiters) resolve(value);
    waiters = [];
  };
  return {
    isSet: () => synced,
    set() {
      synced = true;
      release(true);
    },
    cancel: () => release(false),
    wait(stopped: boolean, signal?: AbortSignal): Promise<boolean> {
      if (synced) return Promise.resolve(true);
      if (stopped || signal?.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const onAbort = () => {
          waiters = waiters.filter((waiter) => waiter !== settle);
          resolve(false);
        };
        const settle = (value: boolean) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        };
        waiters.push(settle);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    },
  };
}

/** An informer's metrics, labelled with its resource; `lastEventAt` feeds the last-event age gauge. */
function informerMetrics(
  registry: Registry,
  resource: string,
  clock: Clock,
  lastEventAt: () => number | undefined,
) {
  const labels = { resource };
  const restarts = getOrCreateCounter(registry, {
    name: 'watch_restarts_total',
    help: 'Watches restarted after they ended (normal close, error, 410 Gone, silence or periodic relist)',
    labelNames: ['resource'],
  });
  const relists = getOrCreateCounter(registry, {
    name: 'informer_relists_total',
    help: 'Full lists after the initial one (410 Gone, silent watch, periodic resync)',
    labelNames: ['resource'],
  });
  restarts.inc(labels, 0);
  relists.inc(labels, 0);
  const lastEventAge = addGaugeCollector(
    registry,
    {
      name: 'watch_last_event_age_seconds',
      help: 'Seconds since the watch delivered its last event or bookmark (or since it connected)',
      labelNames: ['resource'],
    },
    (gauge) => {
      const at = lastEventAt();
      if (at !== undefined) gauge.set(labels, (clock.now() - at) / 1000);
    },
  );
  return {
    restarted: () => restarts.inc(labels),
    relisted: () => relists.inc(labels),
    remove: () => lastEventAge.remove(),
  };
}

/**
 * An object as the cache keeps it: parsed, without managedFields, trimmed by `transform`; `undefined` (and a
 * log line) for one the parser rejects, which stays out of the cache.
 */
function prepareObject<T extends KubeObject>(
  raw: unknown,
  parse: (object: unknown) => T,
  transform: ((object: T) => T) | undefined,
  logger: Logger,
): T | undefined {
  try {
    const object = stripManagedFields(parse(raw));
    return transform ? transform(object) : object;
  } catch (err) {
    const name = isKubeObject(raw) ? objectKey(raw) : '(unknown)';
    logger.error({ err, object: name }, 'object rejected by the informer parser, left out of the cache');
    return undefined;
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

  let lastEventAt: number | undefined;
  const metrics = informerMetrics(options.registry, resourceLabel, clock, () => lastEventAt);

  const store = createInformerStore<T>({
    indexers: options.indexers,
    handlerFailed: (err) => logger.error({ err }, 'informer event handler threw'),
  });
  let resourceVersion = '';
  const sync = createSyncLatch();
  let listed = false;
  let running: Promise<void> | undefined;
  let stopped = false;
  const stopController = new AbortController();
  let watchController: AbortController | undefined;
  let watchAbortReason: 'relist' | 'silent' | undefined;
  let relistRequested = false;
  let relistTimer: TimerHandle | undefined;
  let silenceTimer: TimerHandle | undefined;

  const prepare = (raw: unknown) => prepareObject(raw, parse, options.transform, logger);

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
    const objects: T[] = [];
    for (const raw of items) {
      const object = prepare(raw);
      if (object) objects.push(object);
    }
    resourceVersion = listResourceVersion;
    if (listed) metrics.relisted();
    listed = true;
    store.replace(objects);
    if (!sync.isSet()) {
      logger.info({ objects: store.size() }, 'informer synced');
      sync.set();
    }
    scheduleRelist();
  }

  /** Handles one watch event; returns an outcome when the watch must end. */
  function handleEvent(event: WatchEvent): WatchOutcome | undefined {
    lastEventAt = clock.now();
    const applied = applyWatchEvent(event, store, prepare, path);
    if (applied.resourceVersion) resourceVersion = applied.resourceVersion;
    return applied.outcome;
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
      metrics.restarted();
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
        metrics.remove();
        sync.cancel();
      }
      await running;
    },
    hasSynced: () => sync.isSet(),
    waitForSync: (signal) => sync.wait(stopped, signal),
    ...storeReader(store),
    lastResourceVersion: () => resourceVersion,
  };
}
