/**
 * `buildBackend(config)`: the whole backend without ports or process signals (tests build it in-process;
 * main.ts adds the health server and signal handling). It is a list of features (see backend-feature.ts)
 * and the routing of database notifications to them.
 *
 * start(): migrate the database (advisory lock: safe with several replicas), register the engine
 * instance, start every feature's informers and LISTEN, then, once every cache has synced, the features
 * (controllers, status path, outbox relay, sweeps). ready() is true from then on.
 */

import { readFileSync } from 'node:fs';
import { createAppStudioFeatures, requireAppStudioApi } from '@gitops/appstudio';
import {
  createDb,
  createSealer,
  type Database,
  type EngineInstanceRow,
  type Listener,
  listen,
  MigrationFailedError,
  migrateToLatest,
  NOTIFICATION_CHANNELS,
  type Notification,
  type OperationRow,
  operationOfNotification,
  type Sealer,
} from '@gitops/db';
import {
  createEventRecorder,
  createFeatureSet,
  createLogger,
  createMetricsRegistry,
  type Informer,
  isTerminalError,
  type KubeConfig,
  type KubeObject,
  type Logger,
  loadKubeConfig,
  type Registry,
  retryAtStart,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import {
  type BackendFeature,
  createBackendContext,
  type NotificationChannel,
  type NotificationReads,
} from './backend-feature.ts';
import { BACKEND_SHARD_LABEL, type BackendConfig, shardSelector } from './config.ts';
import { createEngineInstanceFeature } from './engine-instance/engine-instance.feature.ts';
import { registerEngineInstance, registerEngineInstanceMetrics } from './engine-instance.ts';
import {
  createGitOpsDeploymentFeature,
  type GitOpsDeploymentFeature,
} from './gitops-deployment/gitops-deployment.feature.ts';
import { parseLabelSelector } from './label-selector.ts';
import {
  createManagedEnvironmentFeature,
  type ManagedEnvironmentFeature,
} from './managed-environment/managed-environment.feature.ts';
import { createOperationRelayFeature, type OperationRelay } from './relay/operation-relay.ts';
import {
  createRepositoryCredentialsFeature,
  type RepositoryCredentialsFeature,
} from './repository-credential/repository-credentials.feature.ts';
import { createStatusFeature, type StatusFeature } from './status/status.feature.ts';
import { createSyncRunFeature, type SyncRunFeature } from './sync-run/sync-run.feature.ts';
import { createTenantMoveFeature, type TenantMoveFeature } from './tenant-move/tenant-move.feature.ts';
import { createTenantSweepFeature } from './tenant-sweep.ts';
import { createWorkspaceTokenRenewalFeature } from './workspace-access/workspace-access.feature.ts';

/** How long start() retries transient failures of the database or the API server. */
const START_RETRY_MS = 120_000;

export interface BuildBackendOptions {
  logger?: Logger;
  registry?: Registry;
  /** Default: loaded from `config.kubeconfigPath` (in-cluster when unset). */
  kubeConfig?: KubeConfig;
}

export interface Backend {
  start(): Promise<void>;
  /** Stops everything (draining running reconciles) and closes the database pool. Idempotent. */
  close(): Promise<void>;
  /** True once started and every informer cache has synced; false again while closing. */
  ready(): boolean;
  readonly db: Kysely<Database>;
  readonly kubeConfig: KubeConfig;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly sealer: Sealer;
  /** The GitOpsDeployment cache. */
  readonly informer: Informer<KubeObject>;
  readonly deployments: GitOpsDeploymentFeature;
  readonly environments: ManagedEnvironmentFeature;
  readonly status: StatusFeature;
  readonly repositoryCredentials: RepositoryCredentialsFeature;
  readonly syncRuns: SyncRunFeature;
  readonly tenantMoves: TenantMoveFeature;
  /** Undefined when GITOPS_RELAY_ENABLED=false. */
  readonly relay: OperationRelay | undefined;
  /** The registered engine instance (after start). */
  engineInstance(): EngineInstanceRow;
}

export function buildBackend(config: BackendConfig, options: BuildBackendOptions = {}): Backend {
  const logger = options.logger ?? createLogger({ name: 'backend', level: config.logLevel });
  const registry = options.registry ?? createMetricsRegistry({ defaultLabels: { component: 'backend' } });
  const kc = options.kubeConfig ?? loadKubeConfig(config.kubeconfigPath);
  const sealer = createSealer(config.encryptionKeys);
  const db = createDb(config.databaseUrl, {
    applicationName: 'gitops-backend',
    preparedStatements: config.databasePreparedStatements,
    onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
  });
  registerEngineInstanceMetrics(registry, db, logger);
  let engineInstance: EngineInstanceRow | undefined;
  const ctx = createBackendContext({
    config,
    db,
    kc,
    registry,
    logger,
    sealer,
    events: createEventRecorder(kc, { component: 'gitops-backend', logger }),
    selector: parseLabelSelector(shardSelector(config.backendShard)),
    engineInstance: () => {
      if (!engineInstance) throw new Error('the backend has not started');
      return engineInstance;
    },
  });

  // The features, in start order (stopped in reverse).
  const environments = createManagedEnvironmentFeature(ctx);
  const deployments = createGitOpsDeploymentFeature(ctx, { environments });
  const repositoryCredentials = createRepositoryCredentialsFeature(ctx);
  const syncRuns = createSyncRunFeature(ctx, { deployments });
  const status = createStatusFeature(ctx, { deployments });
  const relay = config.relayEnabled ? createOperationRelayFeature(ctx) : undefined;
  const tenantSweep = createTenantSweepFeature(ctx);
  const tenantMoves = createTenantMoveFeature(ctx);
  const features: BackendFeature[] = [environments, deployments, repositoryCredentials, syncRuns, status];
  if (relay) features.push(relay);
  features.push(createEngineInstanceFeature(ctx));
  features.push(tenantSweep, tenantMoves, createWorkspaceTokenRenewalFeature(ctx));
  // The App Studio environment API (packages/appstudio): Kubernetes objects only, on the same shard.
  if (config.appStudioEnabled) {
    const appStudio = createAppStudioFeatures({
      kc,
      registry,
      logger: logger.child({ component: 'appstudio' }),
      events: createEventRecorder(kc, { component: 'gitops-appstudio', logger }),
      labelSelector: ctx.selector.text,
      shardLabels: config.backendShard ? { [BACKEND_SHARD_LABEL]: config.backendShard } : {},
      // Same shard selection: one watch of each, not two.
      sharedInformers: {
        GitOpsDeployment: deployments.informer,
        GitOpsDeploymentManagedEnvironment: environments.informer,
      },
      resyncIntervalMs: config.resyncIntervalMs,
      concurrency: config.maxConcurrentReconciles,
      promotionTimeoutMs: config.promotionTimeoutMs,
      renderGitTimeoutMs: config.renderGitTimeoutMs,
      sshKnownHostsFile: config.sshKnownHostsFile,
      devSandbox: config.appStudioDevSandbox,
      devSandboxInsecure: config.devSandboxInsecure,
      namespaceProvisioner: {
        apiURL: config.namespaceProvisionerApiUrl || undefined,
        caPem: config.namespaceProvisionerCaFile
          ? readFileSync(config.namespaceProvisionerCaFile, 'utf8')
          : undefined,
        tokenLifetimeMs: config.namespaceProvisionerTokenLifetimeMs,
        tokenRenewBeforeMs: config.namespaceProvisionerTokenRenewBeforeMs,
        tokenCheckIntervalMs: config.namespaceProvisionerTokenCheckIntervalMs,
      },
    });
    features.push(...appStudio.features);
  }
  const featureSet = createFeatureSet(features, { logger });

  /** Each notification goes to every feature that handles its channel, one after the other. */
  const channelOf = new Map<string, NotificationChannel>(
    Object.entries(NOTIFICATION_CHANNELS).map(([key, channel]) => [channel, key as NotificationChannel]),
  );
  const onNotification = async ({ channel, payload }: Notification) => {
    const key = channelOf.get(channel);
    if (!key) return;
    let operation: Promise<OperationRow | undefined> | undefined;
    const reads: NotificationReads = {
      operation: () => (operation ??= operationOfNotification(db, payload)),
    };
    for (const feature of features) await feature.notifications?.[key]?.(payload, reads);
  };

  let listener: Listener | undefined;
  let started = false;
  let closing: Promise<void> | undefined;

  /**
   * Start-up steps survive a briefly unavailable database or API server (e.g. 429 while the API server
   * re-initialises): retried with backoff for up to START_RETRY_MS; a TerminalError (missing namespace)
   * or a migration that failed by itself (not because the database went away) is not retried.
   */
  const retryTransient = <T>(what: string, step: () => Promise<T>): Promise<T> =>
    retryAtStart(what, step, {
      logger,
      forMs: START_RETRY_MS,
      giveUp: (err) =>
        isTerminalError(err) ||
        (err instanceof MigrationFailedError && !err.transient) ||
        closing !== undefined,
    });

  return {
    db,
    kubeConfig: kc,
    registry,
    logger,
    sealer,
    informer: deployments.informer,
    deployments,
    environments,
    status,
    repositoryCredentials,
    syncRuns,
    tenantMoves,
    relay,
    engineInstance: ctx.engineInstance,
    ready: () => started && closing === undefined && deployments.informer.hasSynced(),
    async start() {
      if (started || closing) throw new Error('the backend can be started once');
      const { applied, newer } = await retryTransient('database migration', () => migrateToLatest(db));
      if (applied.length > 0) logger.info({ applied }, 'database migrated');
      // A newer version's schema (a rolling upgrade, or a rollback): compatible by docs/upgrades.md.
      if (newer.length > 0) logger.info({ newer }, 'the database has migrations of a newer version');
      engineInstance = await retryTransient('engine instance registration', () =>
        registerEngineInstance(db, kc, {
          name: config.engineInstanceName,
          namespace: config.argoCdNamespace,
        }),
      );
      logger.info(
        { engineInstance: engineInstance.id, namespace: engineInstance.namespace_name },
        'engine instance registered',
      );
      if (config.appStudioEnabled)
        await retryTransient('App Studio API check', () =>
          requireAppStudioApi(kc, { devSandbox: config.appStudioDevSandbox }),
        );
      featureSet.startInformers();
      listener = listen(config.databaseUrl, Object.values(NOTIFICATION_CHANNELS), onNotification, {
        applicationName: 'gitops-backend-listen',
        onConnected: ({ reconnected }) => {
          if (!reconnected) return;
          // Notifications sent while we were disconnected are lost: every feature looks at everything.
          logger.info('LISTEN connection re-established; resyncing');
          featureSet.resync();
        },
        onError: (err) => logger.warn({ err }, 'LISTEN connection problem'),
      });
      await listener.ready;
      if (!(await featureSet.waitForSync())) throw new Error('an informer stopped before it synced');
      featureSet.start();
      if (!relay)
        logger.warn(
          'the outbox relay is disabled (GITOPS_RELAY_ENABLED=false): no Operation CRs are created',
        );
      started = true;
      logger.info('backend ready');
    },
    close() {
      closing ??= (async () => {
        await listener?.close();
        await featureSet.stop();
        await db.destroy();
      })();
      return closing;
    },
  };
}
