/**
 * The one start and close of a process (controller-runtime's manager): the start steps it needs before any
 * cache (migrate the database, register the engine instance, take the active lock), then its features run by
 * a feature set, then what it releases after they stopped (the database pool). `buildBackend`, `buildAgent`
 * and `buildRhoasOperator` are each a context, a list of features and a `createManager` call.
 *
 *   const manager = createManager({
 *     name: 'backend',
 *     logger,
 *     steps: [{ what: 'database migration', run: () => migrateDatabase(db, logger) }],
 *     features: [environments, deployments, status],
 *     release: () => db.destroy(),
 *   });
 *
 * start(): each step in order, retried with backoff while it fails for a reason that may pass (the database or
 * the API server is briefly away) for up to `startRetryMs`; then the features' informers, their `open`, the
 * caches, their `beforeStart` (retried as a step is: every feature's again, so each must be idempotent), and
 * their `start`. A close() during start ends it with an error ("closed during
 * start") and leaves nothing running. ready() is true from the end of start() until close().
 */
import { retryAtStart } from './backoff.ts';
import type { LogLevel } from './config.ts';
import { isTerminalError } from './errors.ts';
import { createFeatureSet, type Feature, type FeatureSet } from './feature.ts';
import { type KubeConfig, loadKubeConfig } from './kube-client.ts';
import { createLogger, type Logger } from './logger.ts';
import { createMetricsRegistry, type Registry } from './metrics.ts';
import type { Service } from './service.ts';

/** What a test may give a process instead of its own (`buildBackend(config, options)`, ...). */
export interface ProcessOptions {
  logger?: Logger;
  registry?: Registry;
  /** Default: loaded from the configuration's `kubeconfigPath` (in-cluster when unset). */
  kubeConfig?: KubeConfig;
}

/**
 * The logger, metrics registry and API server configuration of a process named `name` (its log name and the
 * metrics' `component` label): the ones `options` gives, else its own.
 */
export function processDeps(
  name: string,
  config: { logLevel: LogLevel; kubeconfigPath?: string },
  options: ProcessOptions,
): { logger: Logger; registry: Registry; kc: KubeConfig } {
  return {
    logger: options.logger ?? createLogger({ name, level: config.logLevel }),
    registry: options.registry ?? createMetricsRegistry({ defaultLabels: { component: name } }),
    kc: options.kubeConfig ?? loadKubeConfig(config.kubeconfigPath),
  };
}

/** How long a start step is retried by default (two minutes: a pod waits that long for its dependencies). */
export const DEFAULT_START_RETRY_MS = 120_000;

export interface StartStep {
  /** For logs and errors: `database migration`, `engine instance registration`, ... */
  readonly what: string;
  /** `signal` aborts when the process is closed during start. */
  run(signal: AbortSignal): Promise<void>;
  /** False: run once, not retried (a step that waits by itself, such as taking a lock). Default true. */
  readonly retry?: boolean;
}

export interface ManagerOptions {
  /** `backend`, `cluster-agent`, ...: in its errors and in the "ready" log line. */
  name: string;
  logger: Logger;
  /** Run in order before any informer starts. */
  steps?: readonly StartStep[];
  /** The features, or a function that builds them once the steps ran (when they need what a step found). */
  features: readonly Feature[] | (() => readonly Feature[]);
  /** How long a failing step is retried. Default `DEFAULT_START_RETRY_MS`. */
  startRetryMs?: number;
  /** Errors of a step that retrying cannot help, besides a TerminalError (a migration that failed by itself). */
  isPermanent?: (err: unknown) => boolean;
  /** Logged with the "ready" line (what the process serves). */
  readyFields?: Record<string, unknown>;
  /** Called once the features stopped (close, or a start that failed): the pool, the lock. */
  release?: () => Promise<void>;
}

export interface Manager extends Service {
  /** Aborted by close(). */
  readonly closed: AbortSignal;
  /** Every feature's resync() (a notification channel was lost); nothing before the features exist. */
  resync(): void;
}

export function createManager(options: ManagerOptions): Manager {
  const { name, logger } = options;
  const closed = new AbortController();
  let startCalled = false;
  let ready = false;
  let set: FeatureSet | undefined;
  let closing: Promise<void> | undefined;

  const throwIfClosed = () => {
    if (closing) throw new Error(`the ${name} was closed during start`);
  };

  async function runStep(step: StartStep): Promise<void> {
    if (step.retry === false) return step.run(closed.signal);
    return retryAtStart(step.what, () => step.run(closed.signal), {
      logger,
      forMs: options.startRetryMs ?? DEFAULT_START_RETRY_MS,
      giveUp: (err) => isTerminalError(err) || options.isPermanent?.(err) === true || closing !== undefined,
    });
  }

  return {
    closed: closed.signal,
    ready: () => ready && closing === undefined,
    resync: () => set?.resync(),
    async start() {
      if (startCalled || closing) throw new Error(`the ${name} can be started once`);
      startCalled = true;
      for (const step of options.steps ?? []) {
        await runStep(step);
        throwIfClosed();
      }
      const features = typeof options.features === 'function' ? options.features() : options.features;
      const featureSet = createFeatureSet(features, { logger });
      set = featureSet;
      featureSet.startInformers();
      await featureSet.open(closed.signal);
      throwIfClosed();
      if (!(await featureSet.waitForSync(closed.signal))) {
        throwIfClosed();
        throw new Error(`an informer of the ${name} stopped before it synced`);
      }
      // Retried as a step is: it reads the database (the agent's crash recovery), which may be away a moment.
      await runStep({ what: 'the recovery before start', run: (signal) => featureSet.beforeStart(signal) });
      throwIfClosed();
      featureSet.start();
      ready = true;
      logger.info(options.readyFields ?? {}, `${name} ready`);
    },
    close() {
      closing ??= (async () => {
        ready = false;
        closed.abort();
        try {
          await set?.stop();
        } finally {
          await options.release?.();
        }
      })();
      return closing;
    },
  };
}
