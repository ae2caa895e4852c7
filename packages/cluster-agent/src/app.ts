/**
 * buildAgent(config): the whole cluster-agent without process wiring, so tests run it in-process.
 * start(): checks the Argo CD namespace, waits for the schema, registers the engine_instance row, builds
 * the features (a list: each is `<folder>/<name>.feature.ts`, its informers, the operation resource types
 * it handles, what it starts and stops), starts every informer and once they have synced runs the
 * crash recovery sweep, then starts the features (queues, then periodic safety nets). ready() is true
 * from then on.
 */

import {
  type ActiveLock,
  AGENT_ACTIVE_LOCK_CLASS,
  createDb,
  createSealer,
  type Db,
  type EngineInstanceRow,
  ensureEngineInstance,
  holdActiveLock,
  pendingMigrations,
} from '@gitops/db';
import {
  clusterIdentity,
  createFeatureSet,
  createInformer,
  createLogger,
  createMetricsRegistry,
  ErrorCode,
  type FeatureSet,
  getObject,
  getOrCreateGauge,
  isTerminalError,
  type KubeConfig,
  type KubeObject,
  type Logger,
  loadKubeConfig,
  type Registry,
  retryAtStart,
  TerminalError,
} from '@gitops/shared';
import { type AgentFeature, type FeatureContext, resourceHandlerOf } from './agent-feature.ts';
import { createApplicationFeature } from './application/application.feature.ts';
import { AgentLabel, ApplicationResource, AppProjectResource } from './argocd.ts';
import { checkResourceHealthPersisted } from './argocd-settings.ts';
import type { AgentConfig } from './config.ts';
import { createManagedEnvironmentFeature } from './managed-environment/managed-environment.feature.ts';
import { createOperationFeature, type OperationFeature } from './operation/operation.feature.ts';
import { createRepositoryCredentialFeature } from './repository-credential/repository-credential.feature.ts';
import { createStatusFeature } from './status/status.feature.ts';
import { createSyncRunFeature } from './sync-run/sync-run.feature.ts';

/** How long start-up waits for an unavailable API server or database before giving up (exit 1). */
const START_RETRY_MS = 120_000;

export interface Agent {
  /** Starts everything; resolves once the informers have synced and the agent is ready. */
  start(): Promise<void>;
  /** Stops taking work, waits for running reconciles, closes the database pool. Idempotent. */
  close(): Promise<void>;
  /**
   * True once started and synced, until close(); also while it waits as the standby replica of its engine
   * instance (healthy, ready to take over).
   */
  ready(): boolean;
  /** True while this agent is the active one of its engine instance (it holds the active lock). */
  isActive(): boolean;
  /** The engine_instance row (after start). */
  engineInstance(): EngineInstanceRow | undefined;
  /**
   * Resolves when no operation or Operation CR is queued or being processed (delayed rechecks do not
   * count). For tests: a barrier after which what the agent was given has been handled to the end.
   */
  whenIdle(): Promise<void>;
}

export interface BuildAgentOptions {
  logger?: Logger;
  registry?: Registry;
  /** Defaults to the kubeconfig of `config.kubeconfigPath` (in-cluster when unset). */
  kubeConfig?: KubeConfig;
  /**
   * Called after the agent stopped because another replica became the active one while its lock session was
   * lost: the process should exit, to be restarted as the standby (main.ts exits 1). Default: nothing more
   * (the agent is closed).
   */
  onActiveLost?: () => void;
}

export function buildAgent(config: AgentConfig, options: BuildAgentOptions = {}): Agent {
  const logger = options.logger ?? createLogger({ name: 'cluster-agent', level: config.logLevel });
  const registry =
    options.registry ?? createMetricsRegistry({ defaultLabels: { component: 'cluster-agent' } });
  const kc = options.kubeConfig ?? loadKubeConfig(config.kubeconfigPath);
  const namespace = config.argoCdNamespace;
  const db: Db = createDb(config.databaseUrl, {
    // A reconcile holds a connection only for its statements (no transaction spans an API call), and the
    // status writes and completions go in batches: 20 at the default concurrency of 16, as 8 × 2 + 4 was.
    max: Math.min(32, config.concurrency + 4),
    applicationName: 'gitops-cluster-agent',
    preparedStatements: config.databasePreparedStatements,
    onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
  });

  let engine: EngineInstanceRow | undefined;
  let isReady = false;
  let standby = false;
  let activeLock: ActiveLock | undefined;
  const activeGauge = getOrCreateGauge(registry, {
    name: 'gitops_agent_active',
    help: '1 while this agent is the active replica of its engine instance, 0 while it waits as the standby',
    labelNames: [],
  });
  let closing: Promise<void> | undefined;
  const stopStart = new AbortController();
  let featureSet: FeatureSet | undefined;
  let operationFeature: OperationFeature | undefined;

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
    // The API server or PostgreSQL may be restarting while this pod starts: wait for them a while, as the
    // backend does, instead of exiting at once.
    const atStart = <T>(what: string, step: () => Promise<T>) =>
      retryAtStart(what, step, {
        logger,
        forMs: START_RETRY_MS,
        giveUp: (err) => isTerminalError(err) || closing !== undefined,
      });
    const ns = await atStart('reading the Argo CD namespace', () =>
      getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace }),
    );
    if (!ns?.metadata.uid) {
      throw new TerminalError(
        ErrorCode.configInvalid,
        `the Argo CD namespace ${namespace} (ARGOCD_NAMESPACE) does not exist; create it before starting the cluster-agent`,
      );
    }
    await atStart('checking the Argo CD settings', () =>
      checkResourceHealthPersisted(kc, namespace, { logger, registry }),
    );
    await atStart('waiting for the database schema', () => waitForSchema());
    throwIfClosed();
    const namespaceUid = ns.metadata.uid;
    // Idempotent, as the backend does it: no write when the row already says so. The name registered for
    // another namespace or cluster is refused (a start-up error): two agents never share one instance.
    const registered = await atStart('registering the engine instance', () =>
      ensureEngineInstance(
        db,
        { name: config.engineInstanceName, namespaceName: namespace, namespaceUid },
        () => clusterIdentity(kc, { logger }),
      ),
    );
    throwIfClosed();
    engine = registered;
    const engineInstanceId = registered.id;
    logger.info(
      { engineInstance: config.engineInstanceName, engineInstanceId, namespace },
      'engine instance registered',
    );

    // Two replicas of an instance: one is active, the other waits here until the active one's lock session is
    // gone (it stopped, crashed or lost PostgreSQL), then takes over.
    const lock = holdActiveLock(
      config.databaseUrl,
      { classId: AGENT_ACTIVE_LOCK_CLASS, key: engineInstanceId },
      {
        applicationName: 'gitops-cluster-agent-active',
        onWaiting: () => {
          standby = true;
          logger.info(
            'standby: another agent of this engine instance is active; this one takes over when it stops',
          );
        },
        onError: (err) => logger.warn({ err }, 'active-lock connection problem'),
        onLost: (err) => {
          activeGauge.set(0);
          logger.warn(
            { err },
            'the active-lock session was lost (PostgreSQL restart?); taking the lock again',
          );
        },
        onReacquired: () => {
          activeGauge.set(1);
          logger.info('still the active agent of this engine instance');
        },
        onTakenOver: () => {
          logger.warn(
            'another agent of this engine instance took over while the lock session was lost: stopping',
          );
          void close().then(() => options.onActiveLost?.());
        },
      },
    );
    activeLock = lock;
    const stopped = new Promise<never>((_, reject) =>
      stopStart.signal.addEventListener('abort', () =>
        reject(new Error('the agent was closed during start')),
      ),
    );
    stopped.catch(() => {});
    await Promise.race([lock.acquired, stopped]);
    standby = false;
    activeGauge.set(1);
    logger.info('active agent of this engine instance');
    throwIfClosed();

    const informerOptions = {
      kubeConfig: kc,
      namespace,
      registry,
      logger,
      resyncPeriodMs: config.resyncIntervalMs,
    };
    const context: FeatureContext = {
      kc,
      db,
      logger,
      registry,
      namespace,
      engineInstanceId,
      config,
      sealer: createSealer(config.encryptionKeys),
      applications: createInformer<KubeObject>({
        ...informerOptions,
        resource: ApplicationResource,
        labelSelector: AgentLabel.DatabaseId,
      }),
      appProjects: createInformer<KubeObject>({
        ...informerOptions,
        resource: AppProjectResource,
        labelSelector: AgentLabel.DatabaseId,
      }),
      // Informer events reach it only once the informers start, after `operations` exists.
      enqueue: (type, id) => operations.enqueue(type, id),
    };
    const application = createApplicationFeature(context);
    const resourceFeatures: AgentFeature[] = [
      application,
      createSyncRunFeature(context),
      createRepositoryCredentialFeature(context, application),
      createManagedEnvironmentFeature(context, application),
    ];
    const operations = createOperationFeature(context, { handle: resourceHandlerOf(resourceFeatures) });
    operationFeature = operations;
    // Started in this order: the queues (status, operations) before the periodic passes that feed them;
    // stopped in reverse.
    const set = createFeatureSet([createStatusFeature(context), operations, ...resourceFeatures], { logger });
    featureSet = set;

    set.startInformers();
    if (!(await set.waitForSync(stopStart.signal))) {
      throw new Error('the agent was closed before its informers synced');
    }
    throwIfClosed();
    await operations.recover();
    throwIfClosed();
    set.start();
    isReady = true;
    logger.info('cluster-agent ready');
  }

  async function close(): Promise<void> {
    closing ??= (async () => {
      isReady = false;
      standby = false;
      stopStart.abort();
      await featureSet?.stop();
      // Released after everything stopped, so the standby starts only once this one does nothing more.
      await activeLock?.release();
      activeGauge.set(0);
      await db.destroy();
    })();
    return closing;
  }

  return {
    start,
    close,
    ready: () => isReady || standby,
    isActive: () => activeLock?.held() === true && !closing,
    engineInstance: () => engine,
    whenIdle: async () => {
      if (!operationFeature) throw new Error('the agent is not started');
      await operationFeature.whenIdle();
    },
  };
}
