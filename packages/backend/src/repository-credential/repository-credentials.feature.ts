/**
 * The RepositoryCredential feature as one unit for buildBackend: its two informers (the CRs of this shard,
 * and repository-credential Secrets in every namespace), the reconciler and the controller.
 */
import type { Database, EngineInstanceRow, Sealer } from '@gitops/db';
import {
  createInformer,
  type EventRecorder,
  type KubeConfig,
  type KubeObject,
  type Logger,
  type Registry,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { LabelSelector } from '../label-selector.ts';
import {
  createRepositoryCredentialController,
  REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR,
  type RepositoryCredentialController,
} from './repository-credential.controller.ts';
import {
  createRepositoryCredentialReconciler,
  repositoryCredentialResource,
} from './repository-credential.reconciler.ts';

export interface RepositoryCredentialsFeatureOptions {
  db: Kysely<Database>;
  kc: KubeConfig;
  registry: Registry;
  logger: Logger;
  events: EventRecorder;
  sealer: Sealer;
  selector: LabelSelector;
  engineInstance: () => EngineInstanceRow;
  concurrency: number;
  resyncIntervalMs: number;
}

export interface RepositoryCredentialsFeature {
  readonly controller: RepositoryCredentialController;
  /** Starts the informers (before waitForSync). */
  startInformers(): void;
  waitForSync(): Promise<boolean>;
  /** Starts the queue and the orphan sweep (after the informers synced). */
  start(): void;
  stop(): Promise<void>;
}

export function createRepositoryCredentialsFeature(
  options: RepositoryCredentialsFeatureOptions,
): RepositoryCredentialsFeature {
  const logger = options.logger.child({ controller: 'gitopsdeploymentrepositorycredential' });
  const informer = createInformer<KubeObject>({
    kubeConfig: options.kc,
    resource: repositoryCredentialResource,
    labelSelector: options.selector.text,
    registry: options.registry,
    logger,
    resyncPeriodMs: options.resyncIntervalMs,
  });
  const secrets = createInformer<KubeObject>({
    kubeConfig: options.kc,
    resource: { apiVersion: 'v1', plural: 'secrets' },
    fieldSelector: REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR,
    registry: options.registry,
    logger,
    resyncPeriodMs: options.resyncIntervalMs,
  });
  const controller = createRepositoryCredentialController({
    db: options.db,
    informer,
    secrets,
    registry: options.registry,
    logger,
    concurrency: options.concurrency,
    resyncIntervalMs: options.resyncIntervalMs,
    reconcile: createRepositoryCredentialReconciler({
      db: options.db,
      kc: options.kc,
      informer,
      engineInstance: options.engineInstance,
      events: options.events,
      sealer: options.sealer,
      selector: options.selector,
    }),
  });
  return {
    controller,
    startInformers() {
      informer.start();
      secrets.start();
    },
    async waitForSync() {
      const synced = await Promise.all([informer.waitForSync(), secrets.waitForSync()]);
      return synced.every(Boolean);
    },
    start() {
      controller.start();
    },
    async stop() {
      await controller.stop();
      await Promise.all([informer.stop(), secrets.stop()]);
    },
  };
}
