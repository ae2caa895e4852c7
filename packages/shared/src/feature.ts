/**
 * The one shape of a feature (controller-runtime's "controller added to a manager", as a value): the
 * informers it reads, what it starts once every cache has synced, what it does when the process lost
 * events, and how it stops. A process (`buildBackend`, `buildAgent`, the App Studio controllers, the RHOAS
 * operator) is a list of features run by a manager (`manager.ts`, which uses `createFeatureSet`); nothing
 * else is wired by hand in `app.ts`.
 *
 *   const features = createFeatureSet([deployments, syncRuns, status], { logger });
 *   features.startInformers();
 *   await features.open(signal);              // LISTEN connections, while the caches fill
 *   if (!(await features.waitForSync(signal))) throw new Error('closed before the caches synced');
 *   await features.beforeStart(signal);       // crash recovery, with full caches
 *   features.start();
 *   ...
 *   await features.stop();
 *
 * An informer shared by several features (e.g. the GitOpsDeployment cache read by the SyncRun feature)
 * is listed by each of them and started, awaited and stopped once.
 */
import type { Informer } from './informer.ts';
import type { KubeObject } from './kube.ts';
import type { Logger } from './logger.ts';

export interface Feature {
  /** For logs: `gitopsdeployment`, `operation-sweep`, ... */
  readonly name: string;
  /** The caches it reads; started before, and awaited before, any feature's start(). */
  readonly informers: readonly Informer<KubeObject>[];
  /**
   * Opens what it receives besides its informers (a LISTEN connection), once every informer has started and
   * before the caches are awaited, so nothing announced while they fill is missed. Stopped by `stop()`
   * even when the set never starts.
   */
  open?(signal: AbortSignal): Promise<void>;
  /** Runs once every cache has synced, before any feature starts (the agent's crash recovery). */
  beforeStart?(signal: AbortSignal): Promise<void>;
  /** Starts its queues and periodic jobs (every informer of the set has synced). */
  start(): void;
  /** Re-examines everything it owns (a notification channel was lost, so events may have been missed). */
  resync?(): void;
  /** Stops its periodic jobs and drains its queues. Its informers are stopped by the set afterwards. */
  stop(): Promise<void>;
}

export interface FeatureSet {
  readonly features: readonly Feature[];
  /** Starts every informer (once each). */
  startInformers(): void;
  /** Opens, in list order, what each feature receives besides its informers (`Feature.open`). */
  open(signal: AbortSignal): Promise<void>;
  /** True once every informer has synced; false when one stopped (or `signal` aborted) first. */
  waitForSync(signal?: AbortSignal): Promise<boolean>;
  /** Runs, in list order, each feature's `beforeStart`. */
  beforeStart(signal: AbortSignal): Promise<void>;
  /** Starts the features in list order. */
  start(): void;
  /** Calls every feature's resync(). */
  resync(): void;
  /** Stops the features in reverse order, then every informer. Idempotent. */
  stop(): Promise<void>;
}

export function createFeatureSet(features: readonly Feature[], options: { logger: Logger }): FeatureSet {
  const informers = [...new Set(features.flatMap((feature) => feature.informers))];
  let started = false;
  const opened = new Set<Feature>();
  let stopping: Promise<void> | undefined;
  return {
    features,
    startInformers() {
      for (const informer of informers) informer.start();
    },
    async open(signal) {
      for (const feature of features) {
        if (!feature.open || stopping || signal.aborted) continue;
        opened.add(feature);
        await feature.open(signal);
      }
    },
    async waitForSync(signal) {
      const synced = await Promise.all(informers.map((informer) => informer.waitForSync(signal)));
      return synced.every(Boolean);
    },
    async beforeStart(signal) {
      for (const feature of features) {
        if (stopping || signal.aborted) return;
        await feature.beforeStart?.(signal);
      }
    },
    start() {
      if (started || stopping) throw new Error('a feature set starts once');
      started = true;
      for (const feature of features) {
        feature.start();
        options.logger.debug({ feature: feature.name }, 'feature started');
      }
    },
    resync() {
      for (const feature of features) feature.resync?.();
    },
    stop() {
      stopping ??= (async () => {
        for (const feature of [...features].reverse()) {
          if (!started && !opened.has(feature)) continue;
          try {
            await feature.stop();
          } catch (err) {
            options.logger.error({ err, feature: feature.name }, 'feature failed to stop');
          }
        }
        await Promise.all(informers.map((informer) => informer.stop()));
      })();
      return stopping;
    },
  };
}
