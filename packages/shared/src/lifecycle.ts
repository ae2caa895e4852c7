/**
 * Graceful shutdown. `main.ts` wires it once:
 *
 *   onShutdown(() => pool.end());                 // resources, closed last-registered-first
 *   installSignalHandlers(async () => {           // the drain, run first
 *     health.startDraining();                     // /readyz → 503
 *     await Promise.all(queues.map((q) => q.shutdown()));
 *     informers.forEach((i) => i.stop());
 *     await health.close();
 *   }, { timeoutMs: config.shutdownTimeoutMs, logger });
 *
 * On SIGTERM or SIGINT: run `close`, then the `onShutdown` handlers in reverse order, then exit 0
 * (1 if any step failed). A hard timeout exits 1 if draining hangs (Kubernetes sends SIGKILL 30 s
 * after SIGTERM by default, so the default is 25 s). A second signal exits 1 at once.
 */
import { type Clock, systemClock } from './clock.ts';
import { ErrorCode } from './errors.ts';
import type { Logger } from './logger.ts';

export type ShutdownHandler = () => unknown;

export interface SignalHandlerOptions {
  /** Hard limit for the whole shutdown. Default 25 s. */
  timeoutMs?: number;
  logger?: Logger;
  /** Default SIGTERM and SIGINT. */
  signals?: readonly NodeJS.Signals[];
  /** Default `process.exit`; tests pass a recorder. */
  exit?: (code: number) => void;
  /** Where signals come from; default `process`. */
  signalSource?: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
  clock?: Clock;
}

export interface Lifecycle {
  /** Registers a handler run at shutdown (after `close`), last registered first. Returns an unregister function. */
  onShutdown(handler: ShutdownHandler, name?: string): () => void;
  /** Runs `close` then the handlers on the first signal; returns a function that removes the listeners. */
  installSignalHandlers(close: ShutdownHandler, options?: SignalHandlerOptions): () => void;
  /** Starts shutdown as if a signal arrived (e.g. after a fatal error); resolves when it is done. */
  shutdown(reason: string): Promise<void>;
  isShuttingDown(): boolean;
}

export const defaultShutdownTimeoutMs = 25_000;

/** A separate lifecycle (tests); services use the process-wide functions below. */
export function createLifecycle(): Lifecycle {
  const handlers: Array<{ name: string; handler: ShutdownHandler }> = [];
  let close: ShutdownHandler = () => undefined;
  let settings: Required<Omit<SignalHandlerOptions, 'logger' | 'signalSource' | 'signals'>> & {
    logger?: Logger;
  } = {
    timeoutMs: defaultShutdownTimeoutMs,
    exit: (code) => process.exit(code),
    clock: systemClock,
  };
  let running: Promise<void> | undefined;

  async function runStep(name: string, step: ShutdownHandler): Promise<boolean> {
    try {
      await step();
      return true;
    } catch (err) {
      settings.logger?.error({ err, step: name }, 'shutdown step failed');
      return false;
    }
  }

  function shutdown(reason: string): Promise<void> {
    if (running) return running;
    const { logger, clock, exit, timeoutMs } = settings;
    logger?.info({ reason, timeoutMs }, 'shutting down');
    const timer = clock.setTimer(() => {
      logger?.error({ code: ErrorCode.shutdownTimeout, timeoutMs }, 'graceful shutdown timed out, exiting');
      exit(1);
    }, timeoutMs);
    running = (async () => {
      let ok = await runStep('close', close);
      for (const { name, handler } of [...handlers].reverse()) ok = (await runStep(name, handler)) && ok;
      timer.cancel();
      logger?.info({ ok }, 'shutdown complete');
      exit(ok ? 0 : 1);
    })();
    return running;
  }

  return {
    onShutdown(handler, name = `handler-${handlers.length + 1}`) {
      const entry = { name, handler };
      handlers.push(entry);
      return () => {
        const index = handlers.indexOf(entry);
        if (index >= 0) handlers.splice(index, 1);
      };
    },
    installSignalHandlers(closeFn, options = {}) {
      close = closeFn;
      settings = {
        timeoutMs: options.timeoutMs ?? settings.timeoutMs,
        exit: options.exit ?? settings.exit,
        clock: options.clock ?? settings.clock,
        logger: options.logger ?? settings.logger,
      };
      const source = options.signalSource ?? process;
      const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
      const listener = (signal: NodeJS.Signals) => {
        if (running) {
          settings.logger?.warn({ signal }, 'second signal during shutdown, exiting now');
          settings.exit(1);
          return;
        }
        void shutdown(signal);
      };
      for (const signal of signals) source.on(signal, listener);
      return () => {
        for (const signal of signals) source.off(signal, listener);
      };
    },
    shutdown,
    isShuttingDown: () => running !== undefined,
  };
}

const processLifecycle = createLifecycle();

/** Registers a resource to close at shutdown, after the drain; last registered closes first. */
export function onShutdown(handler: ShutdownHandler, name?: string): () => void {
  return processLifecycle.onShutdown(handler, name);
}

/** Installs SIGTERM/SIGINT handlers that drain with `close`, run `onShutdown` handlers and exit. */
export function installSignalHandlers(close: ShutdownHandler, options?: SignalHandlerOptions): () => void {
  return processLifecycle.installSignalHandlers(close, options);
}

/** Starts the process-wide shutdown without a signal (e.g. a fatal error in a controller). */
export function shutdownProcess(reason: string): Promise<void> {
  return processLifecycle.shutdown(reason);
}
