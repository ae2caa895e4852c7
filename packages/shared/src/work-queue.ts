/**
 * The one work queue every controller uses: controller-runtime's reconcile contract in TypeScript.
 *
 * - The queue holds keys (e.g. `namespace/name`), never events. Reconcile reads current state.
 * - A key waiting in the queue is held once: adding it again is a no-op (de-duplication).
 * - A key is never reconciled twice at once: a key added while its reconcile runs is marked dirty
 *   and queued again once the running reconcile finishes (so the latest change is always seen).
 * - Different keys run concurrently, at most `concurrency` at a time.
 * - A thrown error requeues the key with per-key exponential backoff (5 ms → 1000 s, reset on
 *   success); a `TerminalError` is logged and counted but not retried.
 * - `{ requeueAfter: ms }` reconciles the key again after that delay; `{ requeue: true }` with backoff.
 * - `shutdown()` stops taking work, drops queued and delayed keys (level-triggered: the next
 *   process lists everything anyway), aborts the reconcile `signal`, and waits for running reconciles.
 *
 * Metrics use controller-runtime's names so existing dashboards work.
 */
import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from './clock.ts';
import { errorCode, isTerminalError, isTransientError } from './errors.ts';
import type { Logger } from './logger.ts';
import {
  addGaugeCollector,
  getOrCreateCounter,
  getOrCreateGauge,
  getOrCreateHistogram,
  type Registry,
} from './metrics.ts';
import {
  createItemExponentialFailureRateLimiter,
  type ExponentialBackoffOptions,
  type RateLimiter,
} from './rate-limiter.ts';

/** What a reconcile may return. Returning nothing means "done, until something changes". */
export interface ReconcileResult {
  /** Reconcile this key again after this many milliseconds (resets its backoff). */
  requeueAfter?: number;
  /** Reconcile this key again with backoff, without counting an error. */
  requeue?: boolean;
}

export interface ReconcileContext {
  /** Aborted when the queue shuts down; pass it to long calls. */
  signal: AbortSignal;
  /** Logger bound to `controller`, `key` and `reconcileID`. */
  logger: Logger;
  /** Consecutive failures of this key before this run (0 on a first try). */
  retries: number;
}

/** Returns a result, or nothing (an `async` function without `return`) for "done". */
export type Reconciler = (
  key: string,
  context: ReconcileContext,
  // biome-ignore lint/suspicious/noConfusingVoidType: lets `async (key) => { ... }` be a reconciler
) => Promise<ReconcileResult | undefined | void>;

export interface WorkQueueOptions {
  /** Controller name: the `controller` / `name` label of every metric. */
  name: string;
  reconcile: Reconciler;
  /** Maximum reconciles running at once (controller-runtime's MaxConcurrentReconciles). Default 1. */
  concurrency?: number;
  registry: Registry;
  logger: Logger;
  /** Backoff bounds, or a rate limiter. Default: 5 ms → 1000 s per key. */
  backoff?: ExponentialBackoffOptions | RateLimiter;
  /** Time source; tests pass a manual clock. */
  clock?: Clock;
}

export interface WorkQueue {
  readonly name: string;
  /** Starts the workers. Keys added before are kept and processed now. */
  start(): void;
  /** Queues `key` unless it is already queued. */
  add(key: string): void;
  /** Queues `key` after `delayMs`; an earlier pending delay for the key wins. */
  addAfter(key: string, delayMs: number): void;
  /** Queues `key` after its next backoff delay. */
  addRateLimited(key: string): void;
  /** Resets the backoff of `key`. */
  forget(key: string): void;
  /** Keys waiting to run now (not running, not delayed). */
  len(): number;
  /** Resolves when nothing is queued or running (delayed keys do not count). Mainly for tests. */
  whenIdle(): Promise<void>;
  isShuttingDown(): boolean;
  /** Stops taking work and waits for running reconciles to finish. Idempotent. */
  shutdown(): Promise<void>;
}

/** controller-runtime's reconcile time buckets (seconds). */
/**
 * How long a key may keep failing with transient errors before they are logged at error level. Measured in
 * time from the first failure of the streak, not in retries: a watch event queues a key again without its
 * backoff, so a count would be reached in seconds during an API server restart.
 */
export const TRANSIENT_FAILURE_GRACE_MS = 60_000;

const reconcileTimeBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
/** client-go's workqueue buckets: ExponentialBuckets(10e-9, 10, 12), 10 ns … 1000 s. */
const workqueueBuckets = Array.from({ length: 12 }, (_, i) => 1e-8 * 10 ** i);

const reconcileResults = ['success', 'error', 'requeue', 'requeue_after'] as const;
type ReconcileOutcome = (typeof reconcileResults)[number];

function queueMetrics(registry: Registry) {
  const controller = ['controller'] as const;
  const name = ['name'] as const;
  return {
    reconcileTotal: getOrCreateCounter(registry, {
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
    }),
    reconcileErrors: getOrCreateCounter(registry, {
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: controller,
    }),
    terminalErrors: getOrCreateCounter(registry, {
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal reconciliation errors per controller',
      labelNames: controller,
    }),
    reconcileTime: getOrCreateHistogram(registry, {
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: controller,
      buckets: reconcileTimeBuckets,
    }),
    maxConcurrent: getOrCreateGauge(registry, {
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: controller,
    }),
    activeWorkers: getOrCreateGauge(registry, {
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: controller,
    }),
    depth: getOrCreateGauge(registry, {
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: name,
    }),
    adds: getOrCreateCounter(registry, {
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: name,
    }),
    queueDuration: getOrCreateHistogram(registry, {
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: name,
      buckets: workqueueBuckets,
    }),
    workDuration: getOrCreateHistogram(registry, {
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: name,
      buckets: workqueueBuckets,
    }),
    retries: getOrCreateCounter(registry, {
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: name,
    }),
  };
}

/** Creates a work queue; call `start()` once the informers feeding it have synced. */
export function createWorkQueue(options: WorkQueueOptions): WorkQueue {
  const { name, reconcile, registry } = options;
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`work queue ${name}: concurrency must be a positive integer (got ${concurrency})`);
  }
  const clock = options.clock ?? systemClock;
  const rateLimiter =
    options.backoff && 'when' in options.backoff
      ? options.backoff
      : createItemExponentialFailureRateLimiter(options.backoff ?? {});
  const logger = options.logger.child({ controller: name });

  const metrics = queueMetrics(registry);
  const controllerLabel = { controller: name };
  const nameLabel = { name };
  for (const result of reconcileResults) metrics.reconcileTotal.inc({ controller: name, result }, 0);
  metrics.reconcileErrors.inc(controllerLabel, 0);
  metrics.terminalErrors.inc(controllerLabel, 0);
  metrics.adds.inc(nameLabel, 0);
  metrics.retries.inc(nameLabel, 0);
  metrics.maxConcurrent.set(controllerLabel, concurrency);
  metrics.activeWorkers.set(controllerLabel, 0);
  metrics.depth.set(nameLabel, 0);

  // FIFO of keys ready to run; `dirty` = keys that need a run (queued, or re-added while running).
  let fifo: string[] = [];
  let head = 0;
  const dirty = new Set<string>();
  const processing = new Set<string>();
  const addedAt = new Map<string, number>();
  const startedAt = new Map<string, number>();
  const waiting = new Map<string, { readyAt: number; cancel: () => void }>();
  const abort = new AbortController();
  let started = false;
  let shuttingDown = false;
  let idleWaiters: Array<() => void> = [];

  /** A gauge of the running keys' time so far, in seconds, folded with `fold` (their sum, or the longest). */
  const runningSeconds = (gaugeName: string, help: string, fold: (folded: number, ms: number) => number) =>
    addGaugeCollector(registry, { name: gaugeName, help, labelNames: ['name'] }, (gauge) => {
      const now = clock.now();
      let folded = 0;
      for (const start of startedAt.values()) folded = fold(folded, now - start);
      gauge.set(nameLabel, folded / 1000);
    });
  const unfinished = runningSeconds(
    'workqueue_unfinished_work_seconds',
    'How many seconds of work has been done that is in progress and has not been observed by work_duration. Large values indicate stuck threads.',
    (total, ms) => total + ms,
  );
  const longest = runningSeconds(
    'workqueue_longest_running_processor_seconds',
    'How many seconds has the longest running processor for workqueue been running.',
    Math.max,
  );

  const queued = () => fifo.length - head;

  function push(key: string) {
    fifo.push(key);
    metrics.depth.set(nameLabel, queued());
  }

  function pop(): string | undefined {
    if (head >= fifo.length) return undefined;
    const key = fifo[head++];
    if (head > 1024 && head * 2 > fifo.length) {
      fifo = fifo.slice(head);
      head = 0;
    }
    metrics.depth.set(nameLabel, queued());
    return key;
  }

  function add(key: string) {
    if (shuttingDown || dirty.has(key)) return;
    metrics.adds.inc(nameLabel);
    addedAt.set(key, clock.now());
    dirty.add(key);
    if (processing.has(key)) return; // queued again by `done` when the running reconcile ends
    push(key);
    pump();
  }

  function addAfter(key: string, delayMs: number) {
    if (shuttingDown) return;
    if (!(delayMs > 0)) {
      add(key);
      return;
    }
    const readyAt = clock.now() + delayMs;
    const existing = waiting.get(key);
    if (existing && existing.readyAt <= readyAt) return;
    existing?.cancel();
    const timer = clock.setTimer(() => {
      waiting.delete(key);
      add(key);
    }, delayMs);
    waiting.set(key, { readyAt, cancel: () => timer.cancel() });
  }

  /** Returns the backoff delay used. */
  function addRateLimited(key: string): number {
    if (shuttingDown) return 0;
    const delayMs = rateLimiter.when(key);
    metrics.retries.inc(nameLabel);
    addAfter(key, delayMs);
    return delayMs;
  }

  function pump() {
    while (started && !shuttingDown && processing.size < concurrency) {
      const key = pop();
      if (key === undefined) break;
      dirty.delete(key);
      processing.add(key);
      void process(key);
    }
    notifyIdle();
  }

  function notifyIdle() {
    if (processing.size > 0 || queued() > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Key → when its current streak of failures began (cleared by any outcome other than a retried error). */
  const failingSince = new Map<string, number>();

  async function process(key: string) {
    const start = clock.now();
    metrics.queueDuration.observe(nameLabel, (start - (addedAt.get(key) ?? start)) / 1000);
    addedAt.delete(key);
    startedAt.set(key, start);
    metrics.activeWorkers.set(controllerLabel, processing.size);
    const retries = rateLimiter.numRequeues(key);
    const keyLogger = logger.child({ key, reconcileID: randomUUID() });
    let outcome: ReconcileOutcome = 'error';
    try {
      const result = await Promise.resolve().then(() =>
        reconcile(key, { signal: abort.signal, logger: keyLogger, retries }),
      );
      const requeueAfter = result?.requeueAfter;
      failingSince.delete(key);
      if (typeof requeueAfter === 'number' && Number.isFinite(requeueAfter) && requeueAfter > 0) {
        rateLimiter.forget(key);
        addAfter(key, requeueAfter);
        outcome = 'requeue_after';
      } else if (result?.requeue) {
        addRateLimited(key);
        outcome = 'requeue';
      } else {
        rateLimiter.forget(key);
        outcome = 'success';
      }
    } catch (err) {
      outcome = 'error';
      metrics.reconcileErrors.inc(controllerLabel);
      if (isTerminalError(err)) {
        metrics.terminalErrors.inc(controllerLabel);
        rateLimiter.forget(key);
        failingSince.delete(key);
        keyLogger.error({ err, code: errorCode(err) }, 'reconciler error (terminal, not retried)');
      } else if (shuttingDown) {
        keyLogger.info({ err, code: errorCode(err) }, 'reconcile failed during shutdown, not retried');
      } else {
        const retryInMs = addRateLimited(key);
        // A conflict, an object deleted meanwhile or a restarting dependency is routine: warn, and raise to
        // error only when the key keeps failing (TRANSIENT_FAILURE_GRACE_MS).
        const since = failingSince.get(key) ?? start;
        failingSince.set(key, since);
        const persistent = start - since >= TRANSIENT_FAILURE_GRACE_MS;
        const level = isTransientError(err) && !persistent ? 'warn' : 'error';
        keyLogger[level](
          { err, code: errorCode(err), retries: retries + 1, retryInMs },
          'reconciler error, retrying',
        );
      }
    } finally {
      const seconds = (clock.now() - start) / 1000;
      metrics.reconcileTime.observe(controllerLabel, seconds);
      metrics.workDuration.observe(nameLabel, seconds);
      startedAt.delete(key);
      metrics.reconcileTotal.inc({ controller: name, result: outcome });
      done(key);
    }
  }

  function done(key: string) {
    processing.delete(key);
    metrics.activeWorkers.set(controllerLabel, processing.size);
    if (dirty.has(key) && !shuttingDown) push(key);
    pump();
  }

  return {
    name,
    start() {
      if (started || shuttingDown) return;
      started = true;
      pump();
    },
    add,
    addAfter,
    addRateLimited,
    forget: (key) => {
      rateLimiter.forget(key);
      failingSince.delete(key);
    },
    len: queued,
    whenIdle() {
      return new Promise((resolve) => {
        idleWaiters.push(resolve);
        notifyIdle();
      });
    },
    isShuttingDown: () => shuttingDown,
    async shutdown() {
      if (!shuttingDown) {
        shuttingDown = true;
        for (const timer of waiting.values()) timer.cancel();
        waiting.clear();
        fifo = [];
        head = 0;
        dirty.clear();
        addedAt.clear();
        metrics.depth.set(nameLabel, 0);
        abort.abort(new Error(`work queue ${name} is shutting down`));
        logger.info({ running: processing.size }, 'work queue shutting down, waiting for running reconciles');
      }
      if (processing.size > 0) await new Promise<void>((resolve) => idleWaiters.push(resolve));
      unfinished.remove();
      longest.remove();
      metrics.activeWorkers.set(controllerLabel, 0);
    },
  };
}
