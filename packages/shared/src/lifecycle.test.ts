import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'vitest';
import { createManualClock } from './clock.ts';
import { createLifecycle } from './lifecycle.ts';
import { createSilentLogger } from './logger.ts';

function setup() {
  const lifecycle = createLifecycle();
  const signals = new EventEmitter();
  const clock = createManualClock();
  const exits: number[] = [];
  const steps: string[] = [];
  const { promise: exitedOnce, resolve: exited } = Promise.withResolvers<void>();
  const options = {
    signalSource: signals,
    clock,
    timeoutMs: 10_000,
    logger: createSilentLogger(),
    exit: (code: number) => {
      exits.push(code);
      exited();
    },
  };
  return { lifecycle, signals, clock, exits, steps, exitedOnce, options };
}

describe('graceful shutdown', () => {
  it('on SIGTERM drains first, then closes resources last-registered-first, then exits 0', async () => {
    const t = setup();
    t.lifecycle.onShutdown(() => t.steps.push('close database'), 'database');
    t.lifecycle.onShutdown(async () => t.steps.push('close kube clients'), 'kube');
    t.lifecycle.installSignalHandlers(async () => {
      t.steps.push('readiness false');
      t.steps.push('queues stopped');
    }, t.options);
    t.signals.emit('SIGTERM', 'SIGTERM');
    await t.exitedOnce;
    assert.deepEqual(t.steps, ['readiness false', 'queues stopped', 'close kube clients', 'close database']);
    assert.deepEqual(t.exits, [0]);
    assert.equal(t.clock.pendingTimers().length, 0, 'the hard timeout is cancelled');
  });

  it('runs every step even if one fails, and exits 1', async () => {
    const t = setup();
    t.lifecycle.onShutdown(() => t.steps.push('close database'));
    t.lifecycle.installSignalHandlers(() => {
      throw new Error('queue would not stop');
    }, t.options);
    t.signals.emit('SIGINT', 'SIGINT');
    await t.exitedOnce;
    assert.deepEqual(t.steps, ['close database']);
    assert.deepEqual(t.exits, [1]);
  });

  it('exits 1 when draining exceeds the hard timeout', async () => {
    const t = setup();
    t.lifecycle.installSignalHandlers(() => new Promise(() => undefined), t.options);
    t.signals.emit('SIGTERM', 'SIGTERM');
    assert.deepEqual(
      t.clock.pendingTimers().map((timer) => timer.delayMs),
      [10_000],
    );
    t.clock.advance(10_000);
    await t.exitedOnce;
    assert.deepEqual(t.exits, [1]);
  });

  it('exits 1 at once on a second signal', async () => {
    const t = setup();
    t.lifecycle.installSignalHandlers(() => new Promise(() => undefined), t.options);
    t.signals.emit('SIGTERM', 'SIGTERM');
    assert.equal(t.lifecycle.isShuttingDown(), true);
    t.signals.emit('SIGINT', 'SIGINT');
    await t.exitedOnce;
    assert.deepEqual(t.exits, [1]);
  });

  it('removes its listeners when uninstalled', () => {
    const t = setup();
    const uninstall = t.lifecycle.installSignalHandlers(() => undefined, t.options);
    assert.equal(t.signals.listenerCount('SIGTERM'), 1);
    uninstall();
    assert.equal(t.signals.listenerCount('SIGTERM'), 0);
    assert.equal(t.signals.listenerCount('SIGINT'), 0);
  });
});
