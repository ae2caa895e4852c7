/**
 * The one shape of a feature (controller-runtime's "controller added to a manager", as a value): the
 * informers it reads, what it starts once every cache has synced, what it does when the process lost
 * events, and how it stops. A process (`buildBackend`, `buildAgent`, the App Studio controllers, the RHOAS
 * operator) is a list of features run by `createFeatureSet`; nothing else is wired by hand in `app.ts`.
 *
 *   const features = createFeatureSet([deployments, syncRuns, status], { logger });
 *   features.startInformers();
 *   if (!(await features.waitForSync(signal))) throw new Error('closed before the caches synced');
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
  /** True once every informer has synced; false when one stopped (or `signal` aborted) first. */
  waitForSync(signal?: AbortSignal): Promise<boolean>;
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
  let stopping: Promise<void> | undefined;
  return {
    features,
    startInformers() {
      for (const informer of informers) informer.start();
    },
    async waitForSync(signal) {
      const synced = await Promise.all(informers.map((informer) => informer.waitForSync(signal)));
      return synced.every(Boolean);
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
        if (started) {
          for (const feature of [...features].reverse()) {
            try {
              await feature.stop();
            } catch (err) {
              options.logger.error({ err, feature: feature.name }, 'feature failed to stop');
            }
          }
        }
        await Promise.all(informers.map((informer) => informer.stop()));
      })();
      return stopping;
    },
  };
}
