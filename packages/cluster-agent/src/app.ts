/**
 * buildAgent(config): the whole cluster-agent without process wiring, so tests run it in-process.
 * start(): checks the Argo CD namespace, registers the engine_instance row, starts the informers (Operation
 * CRs, our Applications and AppProjects in the Argo CD namespace), and once they have synced the queues and
 * the periodic safety nets (Waiting/stale sweep, retention, drift resync). ready() is true from then on.
 */

import { API_GROUP_VERSION, Plural } from '@gitops/api';
import {
  createDb,
  createSealer,
  type Db,
  type EngineInstanceRow,
  ensureEngineInstance,
  pendingMigrations,
} from '@gitops/db';
import {
  clusterIdentity,
  createInformer,
  createLogger,
  createMetricsRegistry,
  ErrorCode,
  getObject,
  type Informer,
  type KubeConfig,
  type KubeObject,
  type Logger,
  loadKubeConfig,
  type Periodic,
  type Registry,
  runPeriodically,
  TerminalError,
  type WorkQueue,
} from '@gitops/shared';
import type { AgentContext } from './agent-context.ts';
import { createApplicationReconciler } from './application/application.reconciler.ts';
import { AgentLabel, ApplicationResource, AppProjectResource, isUuid } from './argocd.ts';
import type { AgentConfig } from './config.ts';
import {
  createClusterSecretReconciler,
  watchClusterSecrets,
} from './managed-environment/cluster-secret.reconciler.ts';
import { createOperationProcessor, type ResourceHandler } from './operation/operation.processor.ts';
import { collectFinishedOperations, sweepOperations } from './operation/operation.sweeps.ts';
import { createOperationCrController } from './operation/operation-cr.controller.ts';
import { createRepositoryCredentialsAgent } from './repository-credential/repository-credentials.feature.ts';
import { resyncOnce } from './resync/drift.resync.ts';
import { canonicalJson } from './status/application-state.projection.ts';
import { createApplicationStatusController } from './status/application-status.controller.ts';
import { createSyncOperationReconciler } from './sync-run/sync-operation.reconciler.ts';

export interface Agent {
  /** Starts everything; resolves once the informers have synced and the agent is ready. */
  start(): Promise<void>;
  /** Stops taking work, waits for running reconciles, closes the database pool. Idempotent. */
  close(): Promise<void>;
  /** True once started and synced, until close(). */
  ready(): boolean;
  /** The engine_instance row (after start). */
  engineInstance(): EngineInstanceRow | undefined;
}

export interface BuildAgentOptions {
  logger?: Logger;
  registry?: Registry;
  /** Defaults to the kubeconfig of `config.kubeconfigPath` (in-cluster when unset). */
  kubeConfig?: KubeConfig;
}

/** The fields we own on an Argo CD object (plus deletion), to tell our changes apart from status updates. */
function ownedState(object: KubeObject): string {
  return canonicalJson({
    labels: object.metadata.labels ?? {},
    finalizers: object.metadata.finalizers ?? [],
    deletionTimestamp: object.metadata.deletionTimestamp ?? null,
    spec: object.spec ?? null,
  });
}

export function buildAgent(config: AgentConfig, options: BuildAgentOptions = {}): Agent {
  const logger = options.logger ?? createLogger({ name: 'cluster-agent', level: config.logLevel });
  const registry =
    options.registry ?? createMetricsRegistry({ defaultLabels: { component: 'cluster-agent' } });
  const kc = options.kubeConfig ?? loadKubeConfig(config.kubeconfigPath);
  const namespace = config.argoCdNamespace;
  const db: Db = createDb(config.databaseUrl, {
    max: Math.min(32, config.concurrency * 2 + 4),
    applicationName: 'gitops-cluster-agent',
    onIdleConnectionError: (err) => logger.warn({ err }, 'idle database connection failed'),
  });

  let engine: EngineInstanceRow | undefined;
  let isReady = false;
  let closing: Promise<void> | undefined;
  const stopStart = new AbortController();
  const informers: Informer<KubeObject>[] = [];
  const queues: WorkQueue[] = [];
  const periodics: Periodic[] = [];

  /**
   * The backend migrates the database; the agent waits (up to 10 minutes) until every migration it knows is
   * applied, so the two may start in any order, as pods do.
   */
  async function waitForSchema(): Promise<void> {
    const deadline = Date.now() + 10 * 60_000;
    let said = false;
    for (;;) {
      const pending = await pendingMigrations(db);
      if (pending.length === 0) return;
      if (Date.now() > deadline) {
        throw new Error(`the database still lacks migrations ${pending.join(', ')}: is the backend running?`);
      }
      if (!said) {
        logger.info({ pending }, 'waiting for the backend to migrate the database');
        said = true;
      }
      await new Promise((r) => setTimeout(r, 500));
      throwIfClosed();
    }
  }

  /** start() checks this after every wait, so a close() during start leaves nothing running. */
  function throwIfClosed() {
    if (closing) throw new Error('the agent was closed during start');
  }

  async function start(): Promise<void> {
    throwIfClosed();
    const ns = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
    if (!ns?.metadata.uid) {
      throw new TerminalError(
        ErrorCode.configInvalid,
        `the Argo CD namespace ${namespace} (ARGOCD_NAMESPACE) does not exist; create it before starting the cluster-agent`,
      );
    }
    await waitForSchema();
    throwIfClosed();
    // Idempotent, as the backend does it: no write when the row already says so, and an existing cluster
    // identity is kept so the two processes never overwrite each other's.
    const registered = await ensureEngineInstance(
      db,
      { name: config.engineInstanceName, namespaceName: namespace, namespaceUid: ns.metadata.uid },
      () => clusterIdentity(kc, { logger }),
    );
    throwIfClosed();
    engine = registered;
    const engineInstanceId = registered.id;
    logger.info(
      { engineInstance: config.engineInstanceName, engineInstanceId, namespace },
      'engine instance registered',
    );

    const informerOptions = {
      kubeConfig: kc,
      namespace,
      registry,
      logger,
      resyncPeriodMs: config.resyncIntervalMs,
    };
    const operations = createInformer<KubeObject>({
      ...informerOptions,
      resource: { apiVersion: API_GROUP_VERSION, plural: Plural.Operation },
    });
    const applications = createInformer<KubeObject>({
      ...informerOptions,
      resource: ApplicationResource,
      labelSelector: AgentLabel.DatabaseId,
    });
    const appProjects = createInformer<KubeObject>({
      ...informerOptions,
      resource: AppProjectResource,
      labelSelector: AgentLabel.DatabaseId,
    });
    informers.push(operations, applications, appProjects);

    const context: AgentContext = {
      kc,
      db,
      logger,
      registry,
      namespace,
      engineInstanceId,
      applications,
      appProjects,
    };
    const reconciler = createApplicationReconciler(context);
    const repositoryCredentials = createRepositoryCredentialsAgent({
      kc,
      db,
      sealer: createSealer(config.encryptionKeys),
      registry,
      logger,
      namespace,
      engineInstanceId,
      resyncIntervalMs: config.resyncIntervalMs,
      enqueue: (id) => processor.enqueue('RepositoryCredentials', id),
      reconcileAppProject: reconciler.reconcileAppProject,
    });
    informers.push(repositoryCredentials.secrets);
    const clusterSecrets = createClusterSecretReconciler({
      kc,
      db,
      sealer: createSealer(config.encryptionKeys),
      namespace,
      reconcileAppProject: reconciler.reconcileAppProject,
    });
    informers.push(
      watchClusterSecrets({
        kc,
        namespace,
        registry,
        logger,
        resyncPeriodMs: config.resyncIntervalMs,
        enqueue: (id) => processor.enqueue('ManagedEnvironment', id),
      }),
    );
    const syncOperations = createSyncOperationReconciler(context, {
      enqueue: (id) => processor.enqueue('SyncOperation', id),
    });

    const handle: ResourceHandler = async (resource, { operations: ops, signal, logger: log }) => {
      const ownerUserIds = [...new Set(ops.map((op) => op.owner_user_id).filter(isUuid))];
      switch (resource.type) {
        case 'Application':
          return await reconciler.reconcileApplication(resource.id, {
            ownerUserIds,
            recomputeProject: ops.length > 0,
            signal,
            logger: log,
          });
        case 'AppProject':
          return await reconciler.reconcileAppProject(resource.id, { signal, logger: log });
        case 'SyncOperation':
          return await syncOperations.reconcileSyncOperation(resource.id, { signal, logger: log });
        case 'RepositoryCredentials':
          return await repositoryCredentials.handle(resource.id, { ownerUserIds, signal, logger: log });
        case 'ManagedEnvironment':
          return await clusterSecrets.reconcileManagedEnvironment(resource.id, {
            ownerUserIds,
            signal,
            logger: log,
          });
        default:
          throw new TerminalError(
            ErrorCode.invalidObject,
            `${resource.type} operations are not supported by this cluster-agent version`,
          );
      }
    };

    const processor = createOperationProcessor({
      db,
      kc,
      logger,
      registry,
      namespace,
      engineInstanceId,
      concurrency: config.concurrency,
      maxAttempts: config.operationMaxAttempts,
      retryMaxDelayMs: config.operationRetryMaxMs,
      handle,
    });
    const enqueueResource = (type: string, id: string) => processor.enqueue(type, id);
    const operationCrs = createOperationCrController({
      db,
      kc,
      logger,
      registry,
      namespace,
      engineInstanceId,
      concurrency: config.concurrency,
      operations,
      enqueueResource,
    });
    const statuses = createApplicationStatusController({
      db,
      logger,
      registry,
      concurrency: config.concurrency,
      applications,
      onOrphan: (id) => enqueueResource('Application', id),
    });
    queues.push(operationCrs, processor.queue, statuses);

    // Fast repair: a change to the fields we own, or a deletion, re-checks the object against its row.
    const applicationKey = (app: KubeObject) => {
      const id = app.metadata.labels?.[AgentLabel.DatabaseId];
      if (isUuid(id)) enqueueResource('Application', id);
    };
    applications.onAdd(applicationKey);
    applications.onUpdate((old, app) => {
      if (ownedState(old) !== ownedState(app)) applicationKey(app);
      syncOperations.onApplicationChanged(old, app);
    });
    applications.onDelete(applicationKey);
    const projectKey = (project: KubeObject) => {
      const tenant = project.metadata.labels?.[AgentLabel.DatabaseId];
      if (isUuid(tenant)) enqueueResource('AppProject', tenant);
    };
    appProjects.onUpdate((old, project) => {
      if (ownedState(old) !== ownedState(project)) projectKey(project);
    });
    appProjects.onDelete(projectKey);

    for (const informer of informers) informer.start();
    const synced = await Promise.all(informers.map((informer) => informer.waitForSync(stopStart.signal)));
    if (!synced.every(Boolean)) throw new Error('the agent was closed before its informers synced');
    throwIfClosed();
    // Recovery: this agent is the only one serving the engine instance, so an In_Progress row at start was
    // left by a previous process that died mid-operation. Hand them all back before taking new work.
    const sweep = (staleAfterMs: number) =>
      sweepOperations({
        db,
        engineInstanceId,
        logger,
        staleAfterMs,
        holds: processor.holds,
        enqueueResource,
      });
    await sweep(0);
    throwIfClosed();
    for (const queue of queues) queue.start();

    periodics.push(repositoryCredentials.startResync());
    periodics.push(
      runPeriodically(
        'operation-sweep',
        config.operationSweepIntervalMs,
        () => sweep(config.operationStaleAfterMs),
        { logger },
      ),
      runPeriodically(
        'operation-retention',
        Math.min(Math.max(config.operationRetentionMs / 2, 1_000), 10 * 60_000),
        async (signal) => {
          const deleted = await collectFinishedOperations(
            db,
            engineInstanceId,
            config.operationRetentionMs,
            signal,
          );
          if (deleted > 0) logger.info({ deleted }, 'finished operations past retention deleted');
        },
        { logger },
      ),
      runPeriodically(
        'drift-resync',
        config.resyncIntervalMs,
        (signal) =>
          resyncOnce(
            { db, logger, namespace, engineInstanceId, applications, appProjects, enqueueResource },
            signal,
          ),
        { logger, jitter: 0.25 },
      ),
      runPeriodically(
        'cluster-secret-resync',
        config.resyncIntervalMs,
        async (signal) => {
          for (const id of await clusterSecrets.driftIds(signal)) enqueueResource('ManagedEnvironment', id);
        },
        { logger, jitter: 0.25 },
      ),
    );
    isReady = true;
    logger.info('cluster-agent ready');
  }

  async function close(): Promise<void> {
    closing ??= (async () => {
      isReady = false;
      stopStart.abort();
      await Promise.all(periodics.map((p) => p.stop()));
      await Promise.all(queues.map((q) => q.shutdown()));
      await Promise.all(informers.map((i) => i.stop()));
      await db.destroy();
    })();
    return closing;
  }

  return { start, close, ready: () => isReady, engineInstance: () => engine };
}
