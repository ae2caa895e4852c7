/**
 * `buildBackend(config)`: the whole backend without ports or process signals (tests build it in-process;
 * main.ts adds the health server and signal handling).
 *
 * start(): migrate the database (advisory lock: safe with several replicas), register the engine
 * instance, start the GitOpsDeployment informer (all namespaces) and LISTEN, then, once the cache has
 * synced, the reconciler, the status path and the outbox relay. ready() is true from then on.
 */
import { API_GROUP_VERSION, Plural } from '@gitops/api';
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
  type Sealer,
} from '@gitops/db';
import {
  createEventRecorder,
  createInformer,
  createLogger,
  createMetricsRegistry,
  type Informer,
  isTerminalError,
  type KubeConfig,
  type KubeObject,
  type Logger,
  loadKubeConfig,
  objectKey,
  type Periodic,
  type Registry,
  runPeriodically,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { type BackendConfig, shardSelector } from './config.ts';
import { registerEngineInstance } from './engine-instance.ts';
import {
  createGitOpsDeploymentController,
  type GitOpsDeploymentController,
} from './gitops-deployment/gitops-deployment.controller.ts';
import { createGitOpsDeploymentReconciler } from './gitops-deployment/gitops-deployment.reconciler.ts';
import { type LabelSelector, parseLabelSelector } from './label-selector.ts';
import { createEnvironmentResolver } from './managed-environment/environment.resolver.ts';
import {
  createManagedEnvironmentController,
  MANAGED_ENVIRONMENT_SECRET_SELECTOR,
} from './managed-environment/managed-environment.controller.ts';
import {
  createManagedEnvironmentReconciler,
  managedEnvironmentResource,
} from './managed-environment/managed-environment.reconciler.ts';
import { createOperationRelay, type OperationRelay } from './relay/operation-relay.ts';
import {
  createRepositoryCredentialsFeature,
  type RepositoryCredentialsFeature,
} from './repository-credential/repository-credentials.feature.ts';
import { createStatusController, type StatusController } from './status/status.controller.ts';
import { createSyncRunController, type SyncRunController } from './sync-run/sync-run.controller.ts';
import { createSyncRunReconciler, syncRunResource } from './sync-run/sync-run.reconciler.ts';
import { sweepDeletedTenants } from './tenant-sweep.ts';

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
  /** True once started and the informer cache has synced; false again while closing. */
  ready(): boolean;
  readonly db: Kysely<Database>;
  readonly kubeConfig: KubeConfig;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly sealer: Sealer;
  readonly informer: Informer<KubeObject>;
  readonly deployments: GitOpsDeploymentController;
  readonly status: StatusController;
  readonly repositoryCredentials: RepositoryCredentialsFeature;
  readonly syncRuns: SyncRunController;
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
  const selector: LabelSelector = parseLabelSelector(shardSelector(config.backendShard));
  const db = createDb(config.databaseUrl, {
    applicationName: 'gitops-backend',
    onIdleConnectionError: (err) => logger.warn({ err }, 'idle database connection failed'),
  });

  const informer = createInformer<KubeObject>({
    kubeConfig: kc,
    resource: { apiVersion: API_GROUP_VERSION, plural: Plural.GitOpsDeployment },
    labelSelector: selector.text,
    registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
  });
  const events = createEventRecorder(kc, { component: 'gitops-backend', logger });
  let engineInstance: EngineInstanceRow | undefined;
  const currentEngineInstance = () => {
    if (!engineInstance) throw new Error('the backend has not started');
    return engineInstance;
  };

  // ManagedEnvironments: same shard selector; their Secrets (by type) re-trigger them.
  const environmentInformer = createInformer<KubeObject>({
    kubeConfig: kc,
    resource: managedEnvironmentResource,
    labelSelector: selector.text,
    registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
  });
  const environmentSecretInformer = createInformer<KubeObject>({
    kubeConfig: kc,
    resource: { apiVersion: 'v1', plural: 'secrets' },
    fieldSelector: MANAGED_ENVIRONMENT_SECRET_SELECTOR,
    registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
  });
  const environments = createManagedEnvironmentController({
    informer: environmentInformer,
    secrets: environmentSecretInformer,
    db,
    resyncIntervalMs: config.resyncIntervalMs,
    registry,
    logger: logger.child({ controller: 'gitopsdeploymentmanagedenvironment' }),
    concurrency: config.maxConcurrentReconciles,
    // A connection condition changed (seen in the cache): the namespace's GitOpsDeployments resolve again.
    onConditionChanged: (namespace) => {
      for (const deployment of informer.list(namespace)) deployments.queue.add(objectKey(deployment));
    },
    reconcile: createManagedEnvironmentReconciler({
      db,
      kc,
      sealer,
      informer: environmentInformer,
      engineInstance: currentEngineInstance,
      events,
      selector,
      operationRetryMs: config.operationRetryMs,
      // GitOpsDeployments of the namespace resolve their environment again.
      onEnvironmentChanged: (namespace) => {
        for (const deployment of informer.list(namespace)) deployments.queue.add(objectKey(deployment));
      },
    }),
  });

  const deployments = createGitOpsDeploymentController({
    db,
    informer,
    registry,
    logger: logger.child({ controller: 'gitopsdeployment' }),
    concurrency: config.maxConcurrentReconciles,
    resyncIntervalMs: config.resyncIntervalMs,
    reconcile: createGitOpsDeploymentReconciler({
      db,
      kc,
      informer,
      engineInstance: currentEngineInstance,
      events,
      selector,
      resolveEnvironment: createEnvironmentResolver(db, environmentInformer),
      operationRetryMs: config.operationRetryMs,
    }),
  });
  // SyncRuns: same shard selector as GitOpsDeployments.
  const syncRunInformer = createInformer<KubeObject>({
    kubeConfig: kc,
    resource: syncRunResource,
    labelSelector: selector.text,
    registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
  });
  const syncRuns = createSyncRunController({
    db,
    informer: syncRunInformer,
    deployments: informer,
    registry,
    logger: logger.child({ controller: 'gitopsdeploymentsyncrun' }),
    concurrency: config.maxConcurrentReconciles,
    resyncIntervalMs: config.resyncIntervalMs,
    reconcile: createSyncRunReconciler({
      db,
      kc,
      informer: syncRunInformer,
      deployments: informer,
      events,
      selector,
    }),
  });
  const status = createStatusController({
    db,
    kc,
    informer,
    registry,
    logger: logger.child({ controller: 'gitopsdeployment-status' }),
    concurrency: config.maxConcurrentReconciles,
    events,
  });
  const repositoryCredentials = createRepositoryCredentialsFeature({
    db,
    kc,
    registry,
    logger,
    events,
    sealer,
    selector,
    engineInstance: currentEngineInstance,
    concurrency: config.maxConcurrentReconciles,
    resyncIntervalMs: config.resyncIntervalMs,
  });
  const relay = config.relayEnabled
    ? createOperationRelay({
        db,
        kc,
        registry,
        logger: logger.child({ component: 'relay' }),
        sweepIntervalMs: config.relaySweepIntervalMs,
      })
    : undefined;

  let listener: Listener | undefined;
  let tenantSweeper: Periodic | undefined;
  let started = false;
  let closing: Promise<void> | undefined;

  const onNotification = async ({ channel, payload }: Notification) => {
    switch (channel) {
      case NOTIFICATION_CHANNELS.operationCreated:
        relay?.wake();
        return;
      case NOTIFICATION_CHANNELS.operationStateChanged:
        await deployments.onOperationStateChanged(payload);
        await repositoryCredentials.controller.onOperationStateChanged(payload);
        await environments.onOperationStateChanged(payload);
        await syncRuns.onOperationStateChanged(payload);
        return;
      case NOTIFICATION_CHANNELS.applicationStateChanged:
        await status.onApplicationStateChanged(payload);
        return;
    }
  };

  /**
   * Start-up steps survive a briefly unavailable database or API server (e.g. 429 while the API server
   * re-initialises): retried with backoff for up to START_RETRY_MS; a TerminalError (missing namespace)
   * or a failed migration is not retried.
   */
  async function retryTransient<T>(what: string, step: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + START_RETRY_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await step();
      } catch (err) {
        if (isTerminalError(err) || err instanceof MigrationFailedError || closing || Date.now() > deadline)
          throw err;
        const delay = Math.min(10_000, 250 * 2 ** attempt);
        logger.warn({ err, attempt, retryInMs: delay }, `${what} failed; retrying`);
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  return {
    db,
    kubeConfig: kc,
    registry,
    logger,
    sealer,
    informer,
    deployments,
    status,
    repositoryCredentials,
    syncRuns,
    relay,
    engineInstance: currentEngineInstance,
    ready: () => started && closing === undefined && informer.hasSynced(),
    async start() {
      if (started || closing) throw new Error('the backend can be started once');
      const { applied } = await retryTransient('database migration', () => migrateToLatest(db));
      if (applied.length > 0) logger.info({ applied }, 'database migrated');
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
      informer.start();
      repositoryCredentials.startInformers();
      syncRunInformer.start();
      environmentInformer.start();
      environmentSecretInformer.start();
      listener = listen(config.databaseUrl, Object.values(NOTIFICATION_CHANNELS), onNotification, {
        applicationName: 'gitops-backend-listen',
        onConnected: ({ reconnected }) => {
          if (!reconnected) return;
          // Notifications sent while we were disconnected are lost: sweep everything.
          logger.info('LISTEN connection re-established; resyncing');
          relay?.wake();
          deployments.enqueueAll();
          repositoryCredentials.controller.enqueueAll();
          syncRuns.enqueueAll();
          environments.enqueueAll();
          status.enqueueAll();
        },
        onError: (err) => logger.warn({ err }, 'LISTEN connection problem'),
      });
      await listener.ready;
      if (!(await informer.waitForSync()))
        throw new Error('the GitOpsDeployment informer stopped before it synced');
      if (!(await syncRunInformer.waitForSync()))
        throw new Error('the GitOpsDeploymentSyncRun informer stopped before it synced');
      if (!(await repositoryCredentials.waitForSync()))
        throw new Error('the RepositoryCredential informers stopped before they synced');
      if (!(await environmentInformer.waitForSync()) || !(await environmentSecretInformer.waitForSync()))
        throw new Error('the GitOpsDeploymentManagedEnvironment informers stopped before they synced');
      environments.start();
      deployments.start();
      repositoryCredentials.start();
      syncRuns.start();
      status.start();
      relay?.start();
      // Tenants whose namespace is gone and who have nothing left: now and every resync period.
      tenantSweeper = runPeriodically(
        'tenant sweep',
        config.resyncIntervalMs,
        (signal) => sweepDeletedTenants(db, kc, signal, logger),
        { logger, jitter: 0.25 },
      );
      if (!relay)
        logger.warn(
          'the outbox relay is disabled (GITOPS_RELAY_ENABLED=false): no Operation CRs are created',
        );
      started = true;
      logger.info('backend ready');
    },
    close() {
      closing ??= (async () => {
        await tenantSweeper?.stop();
        await relay?.stop();
        await listener?.close();
        await Promise.all([deployments.stop(), status.stop(), syncRuns.stop()]);
        await repositoryCredentials.stop();
        await informer.stop();
        await syncRunInformer.stop();
        await environments.stop();
        await environmentInformer.stop();
        await environmentSecretInformer.stop();
        await db.destroy();
      })();
      return closing;
    },
  };
}
