import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createManualClock } from './clock.ts';
import { ErrorCode, KubeApiError, RetryableError, TerminalError } from './errors.ts';
import { createLogger, createMemoryDestination, createSilentLogger } from './logger.ts';
import { createMetricsRegistry, type Registry } from './metrics.ts';
import { createItemExponentialFailureRateLimiter } from './rate-limiter.ts';
import {
  createWorkQueue,
  type ReconcileResult,
  TRANSIENT_FAILURE_GRACE_MS,
  type WorkQueueOptions,
} from './work-queue.ts';

interface Gate {
  promise: Promise<void>;
  open: () => void;
}

function gate(): Gate {
  const { promise, resolve: open } = Promise.withResolvers<void>();
  return { promise, open };
}

/**
 * A reconciler that records what ran and can hold a run open until the test releases it.
 * `behaviour(key, attempt)` decides what each run does.
 */
function harness(
  options: Partial<WorkQueueOptions> & {
    behaviour?: (key: string, attempt: number) => Promise<unknown> | ReconcileResult | undefined;
  } = {},
) {
  const registry = createMetricsRegistry({ defaultMetrics: false });
  const clock = createManualClock();
  const calls: string[] = [];
  const running = new Map<string, number>();
  let runningTotal = 0;
  let maxRunningTotal = 0;
  let maxRunningPerKey = 0;
  let startedWaiters: Array<{ count: number; resolve: () => void }> = [];
  const attempts = new Map<string, number>();
  const queue = createWorkQueue({
    name: 'test-controller',
    registry,
    logger: createSilentLogger(),
    clock,
    ...options,
    async reconcile(key) {
      const attempt = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, attempt);
      calls.push(key);
      running.set(key, (running.get(key) ?? 0) + 1);
      runningTotal++;
      maxRunningTotal = Math.max(maxRunningTotal, runningTotal);
      maxRunningPerKey = Math.max(maxRunningPerKey, ...running.values());
      startedWaiters = startedWaiters.filter((waiter) => {
        if (calls.length < waiter.count) return true;
        waiter.resolve();
        return false;
      });
      try {
        return ((await options.behaviour?.(key, attempt)) ?? undefined) as ReconcileResult | undefined;
      } finally {
        running.set(key, (running.get(key) ?? 1) - 1);
        runningTotal--;
      }
    },
  });
  return {
    queue,
    registry,
    clock,
    calls,
    maxRunningTotal: () => maxRunningTotal,
    maxRunningPerKey: () => maxRunningPerKey,
    runningTotal: () => runningTotal,
    /** The value of the queue's controller-runtime metric `name` (label `controller`, and `labels`). */
    controllerMetric: (name: string, labels: Record<string, string> = {}) =>
      metricValue(registry, name, { controller: 'test-controller', ...labels }),
    /** The value of the queue's workqueue metric `name` (label `name`). */
    queueMetric: (name: string) => metricValue(registry, name, { name: 'test-controller' }),
    /** Resolves once `count` reconciles have started in total. */
    started(count: number) {
      return new Promise<void>((resolve) => {
        if (calls.length >= count) resolve();
        else startedWaiters.push({ count, resolve });
      });
    },
  };
}

async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric, `metric ${name} is registered`);
  const { values } = await metric.get();
  const match = values.find((value) => Object.entries(labels).every(([k, v]) => value.labels[k] === v));
  return match?.value ?? Number.NaN;
}

describe('work queue', () => {
  it('reconciles a key added 100 times while queued only once', async () => {
    const t = harness();
    for (let i = 0; i < 100; i++) t.queue.add('ns/a');
    assert.equal(t.queue.len(), 1);
    t.queue.start();
    await t.queue.whenIdle();
    assert.deepEqual(t.calls, ['ns/a']);
    assert.equal(await t.queueMetric('workqueue_adds_total'), 1);
    await t.queue.shutdown();
  });

  it('never runs one key twice at once; a key added while running runs once more afterwards', async () => {
    const release = gate();
    const t = harness({
      concurrency: 4,
      behaviour: async (_key, attempt) => {
        if (attempt === 1) await release.promise;
        return undefined;
      },
    });
    t.queue.start();
    t.queue.add('ns/a');
    await t.started(1);
    for (let i = 0; i < 10; i++) t.queue.add('ns/a');
    // Give the queue every chance to (wrongly) start a second run.
    for (let i = 0; i < 20; i++) await new Promise(setImmediate);
    assert.deepEqual(t.calls, ['ns/a']);
    release.open();
    await t.queue.whenIdle();
    assert.deepEqual(t.calls, ['ns/a', 'ns/a']);
    assert.equal(t.maxRunningPerKey(), 1);
    await t.queue.shutdown();
  });

  it('runs different keys concurrently, never more than the concurrency limit', async () => {
    const gates = new Map(['a', 'b', 'c', 'd', 'e'].map((key) => [key, gate()]));
    const t = harness({ concurrency: 3, behaviour: async (key) => gates.get(key)?.promise });
    t.queue.start();
    for (const key of gates.keys()) t.queue.add(key);
    await t.started(3);
    for (let i = 0; i < 20; i++) await new Promise(setImmediate);
    assert.equal(t.runningTotal(), 3);
    assert.deepEqual(t.calls, ['a', 'b', 'c']);
    assert.equal(await t.controllerMetric('controller_runtime_active_workers'), 3);
    gates.get('b')?.open();
    await t.started(4);
    assert.deepEqual(t.calls, ['a', 'b', 'c', 'd']);
    for (const g of gates.values()) g.open();
    await t.queue.whenIdle();
    assert.deepEqual([...t.calls].sort(), ['a', 'b', 'c', 'd', 'e']);
    assert.equal(t.maxRunningTotal(), 3);
    assert.equal(await t.controllerMetric('controller_runtime_max_concurrent_reconciles'), 3);
    await t.queue.shutdown();
  });

  it('retries a failing key with exponential backoff per key, reset on success', async () => {
    // Key a: fails 4 times, succeeds, then fails once more. Key b: fails once, then succeeds.
    const t = harness({
      behaviour: (key, attempt) => {
        if (key === 'a' && (attempt <= 4 || attempt === 6))
          throw new RetryableError('TEST', `fail ${attempt}`);
        if (key === 'b' && attempt === 1) throw new Error('plain errors are retryable too');
        return undefined;
      },
    });
    t.queue.start();
    t.queue.add('a');
    await t.queue.whenIdle();
    for (let retry = 1; retry <= 4; retry++) {
      assert.ok(t.clock.runNext(), 'a retry is scheduled');
      await t.queue.whenIdle();
    }
    assert.deepEqual(t.calls, ['a', 'a', 'a', 'a', 'a']);
    assert.deepEqual(t.clock.scheduledDelays, [5, 10, 20, 40]);
    assert.equal(t.clock.pendingTimers().length, 0, 'no retry after the success');

    t.queue.add('b'); // another key starts at the base delay
    t.queue.add('a'); // after a success, a's next failure starts from the base delay again
    await t.queue.whenIdle();
    assert.deepEqual(t.clock.scheduledDelays, [5, 10, 20, 40, 5, 5]);
    assert.equal(await t.queueMetric('workqueue_retries_total'), 6);
    assert.equal(await t.controllerMetric('controller_runtime_reconcile_errors_total'), 6);
    await t.queue.shutdown();
  });

  it('does not retry a terminal error', async () => {
    const t = harness({
      behaviour: () => {
        throw new TerminalError(ErrorCode.invalidObject, 'spec.source.path is empty');
      },
    });
    t.queue.start();
    t.queue.add('ns/bad');
    await t.queue.whenIdle();
    assert.deepEqual(t.calls, ['ns/bad']);
    assert.equal(t.clock.pendingTimers().length, 0);
    assert.equal(await t.controllerMetric('controller_runtime_terminal_reconcile_errors_total'), 1);
    assert.equal(await t.controllerMetric('controller_runtime_reconcile_total', { result: 'error' }), 1);
    // A later change still reconciles the key.
    t.queue.add('ns/bad');
    await t.queue.whenIdle();
    assert.deepEqual(t.calls, ['ns/bad', 'ns/bad']);
    await t.queue.shutdown();
  });

  it('logs routine failures (a conflict, a 404, a lost connection) as warnings until they persist, anything else as an error', async () => {
    const conflict = new KubeApiError({
      statusCode: 409,
      reason: 'Conflict',
      method: 'PUT',
      path: '/apis/x',
      message: 'the object has been modified',
    });
    const gone = new KubeApiError({
      statusCode: 404,
      method: 'PATCH',
      path: '/apis/x',
      message: 'not found',
    });
    const terminated = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    const deletedMeanwhile = Object.assign(new Error('insert violates foreign key constraint'), {
      code: '23503',
    });
    const wrapped = new Error('transaction failed', {
      cause: new Error('Connection terminated unexpectedly'),
    });
    const failures: Record<string, unknown> = {
      conflict,
      gone,
      terminated,
      deletedMeanwhile,
      wrapped,
      bug: new TypeError("Cannot read properties of undefined (reading 'spec')"),
      persistent: conflict,
    };
    const destination = createMemoryDestination();
    const t = harness({
      logger: createLogger({ name: 'test', level: 'debug', destination }),
      behaviour: (key) => {
        throw failures[key];
      },
    });
    t.queue.start();
    for (const key of Object.keys(failures)) t.queue.add(key);
    await t.queue.whenIdle();
    // 'persistent' keeps failing: queued again at once (as a watch event does, without its backoff) it stays a
    // warning; once it has failed for TRANSIENT_FAILURE_GRACE_MS it is an error.
    for (let i = 0; i < 20; i++) {
      t.queue.add('persistent');
      await t.queue.whenIdle();
    }
    t.clock.advance(TRANSIENT_FAILURE_GRACE_MS);
    t.queue.add('persistent');
    await t.queue.whenIdle();
    const levels = (key: string) =>
      destination.lines
        .filter((line) => line.key === key && line.msg === 'reconciler error, retrying')
        .map((line) => (line.level === 40 ? 'warn' : line.level === 50 ? 'error' : String(line.level)));
    // (The others' retries ran too when the clock moved: only their first failure is looked at.)
    for (const key of ['conflict', 'gone', 'terminated', 'deletedMeanwhile', 'wrapped'])
      assert.equal(levels(key)[0], 'warn', key);
    assert.equal(levels('bug')[0], 'error');
    const persistent = levels('persistent');
    assert.equal(persistent.length, 22);
    assert.deepEqual(persistent.slice(0, -1), Array(21).fill('warn'), 'many quick retries stay warnings');
    assert.equal(persistent.at(-1), 'error', 'a key failing for a minute is an error');
    await t.queue.shutdown();
  });

  it('honours requeueAfter and resets the backoff', async () => {
    const t = harness({
      behaviour: (_key, attempt) => {
        if (attempt === 1) throw new Error('first try fails');
        if (attempt === 2) return { requeueAfter: 30_000 };
        if (attempt === 3) throw new Error('fails again');
        return undefined;
      },
    });
    t.queue.start();
    t.queue.add('k');
    await t.queue.whenIdle();
    t.clock.runNext();
    await t.queue.whenIdle();
    assert.deepEqual(t.clock.pendingTimers(), [{ dueAt: 30_005, delayMs: 30_000 }]);
    t.clock.advance(29_999);
    await t.queue.whenIdle();
    assert.equal(t.calls.length, 2, 'not before the delay');
    t.clock.advance(1);
    await t.queue.whenIdle();
    assert.equal(t.calls.length, 3);
    assert.deepEqual(t.clock.scheduledDelays, [5, 30_000, 5]);
    assert.equal(
      await t.controllerMetric('controller_runtime_reconcile_total', { result: 'requeue_after' }),
      1,
    );
    await t.queue.shutdown();
  });

  it('keeps the earlier of two delayed adds of one key', async () => {
    const t = harness();
    t.queue.start();
    t.queue.addAfter('k', 1000);
    t.queue.addAfter('k', 10);
    t.queue.addAfter('k', 500);
    assert.deepEqual(
      t.clock.pendingTimers().map((timer) => timer.delayMs),
      [10],
    );
    t.clock.advance(10);
    await t.queue.whenIdle();
    assert.deepEqual(t.calls, ['k']);
    await t.queue.shutdown();
  });

  it('shutdown waits for running reconciles, aborts their signal and drops queued work', async () => {
    const release = gate();
    const clock = createManualClock();
    const calls: string[] = [];
    let signal: AbortSignal | undefined;
    const queue = createWorkQueue({
      name: 'shutdown-test',
      registry: createMetricsRegistry({ defaultMetrics: false }),
      logger: createSilentLogger(),
      clock,
      async reconcile(key, context) {
        calls.push(key);
        signal = context.signal;
        if (key === 'running') await release.promise;
      },
    });
    queue.start();
    queue.add('running');
    queue.add('queued');
    queue.addAfter('delayed', 1000);
    await new Promise(setImmediate);
    let finished = false;
    const shutdown = queue.shutdown().then(() => {
      finished = true;
    });
    for (let i = 0; i < 20; i++) await new Promise(setImmediate);
    assert.equal(finished, false, 'shutdown waits for the running reconcile');
    assert.equal(signal?.aborted, true);
    queue.add('after-shutdown');
    release.open();
    await shutdown;
    assert.equal(finished, true);
    assert.deepEqual(calls, ['running']);
    assert.equal(clock.pendingTimers().length, 0, 'delayed keys are cancelled');
  });

  it('exposes controller-runtime metric names', async () => {
    const t = harness();
    t.queue.start();
    t.queue.add('k');
    await t.queue.whenIdle();
    const text = await t.registry.metrics();
    for (const line of [
      'controller_runtime_reconcile_total{controller="test-controller",result="success"} 1',
      'controller_runtime_reconcile_errors_total{controller="test-controller"} 0',
      'controller_runtime_terminal_reconcile_errors_total{controller="test-controller"} 0',
      'controller_runtime_reconcile_time_seconds_count{controller="test-controller"} 1',
      'controller_runtime_max_concurrent_reconciles{controller="test-controller"} 1',
      'controller_runtime_active_workers{controller="test-controller"} 0',
      'workqueue_depth{name="test-controller"} 0',
      'workqueue_adds_total{name="test-controller"} 1',
      'workqueue_queue_duration_seconds_count{name="test-controller"} 1',
      'workqueue_work_duration_seconds_count{name="test-controller"} 1',
      'workqueue_retries_total{name="test-controller"} 0',
      'workqueue_unfinished_work_seconds{name="test-controller"} 0',
      'workqueue_longest_running_processor_seconds{name="test-controller"} 0',
    ]) {
      assert.ok(text.includes(line), `metrics contain: ${line}`);
    }
    await t.queue.shutdown();
  });

  it('reports the work of a stuck reconcile in unfinished_work_seconds', async () => {
    const release = gate();
    const t = harness({ behaviour: () => release.promise.then(() => undefined) });
    t.queue.start();
    t.queue.add('stuck');
    await t.started(1);
    t.clock.advance(90_000);
    assert.equal(await t.queueMetric('workqueue_unfinished_work_seconds'), 90);
    assert.equal(await t.queueMetric('workqueue_longest_running_processor_seconds'), 90);
    release.open();
    await t.queue.shutdown();
  });
});

describe('item exponential failure rate limiter', () => {
  it('doubles from 5 ms per failure and caps at 1000 s', () => {
    const limiter = createItemExponentialFailureRateLimiter();
    const delays = Array.from({ length: 25 }, () => limiter.when('k'));
    assert.deepEqual(delays.slice(0, 5), [5, 10, 20, 40, 80]);
    assert.equal(delays[17], 5 * 2 ** 17);
    assert.ok(delays.slice(18).every((delay) => delay === 1_000_000));
    assert.equal(limiter.numRequeues('k'), 25);
    assert.equal(limiter.when('other'), 5, 'keys are independent');
    limiter.forget('k');
    assert.equal(limiter.when('k'), 5, 'forget resets');
  });

  it('never overflows after very many failures', () => {
    const limiter = createItemExponentialFailureRateLimiter({ baseDelayMs: 1, maxDelayMs: 60_000 });
    let last = 0;
    for (let i = 0; i < 5000; i++) last = limiter.when('k');
    assert.equal(last, 60_000);
  });
});
