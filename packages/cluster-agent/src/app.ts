/**
 * buildAgent(config): the whole cluster-agent without process wiring, so tests run it in-process.
 * start(): checks the Argo CD namespace, waits for the schema, registers the engine_instance row, builds
 * the features (a list: each is `<folder>/<name>.feature.ts`, its informers, the operation resource types
 * it handles, what it starts and stops), starts every informer and once they have synced runs the
 * crash recovery sweep, then starts the features (queues, then periodic safety nets). ready() is true
 * from then on.
 */

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
  createFeatureSet,
  createInformer,
  createLogger,
  createMetricsRegistry,
  ErrorCode,
  type FeatureSet,
  getObject,
  type KubeConfig,
  type KubeObject,
  type Logger,
  loadKubeConfig,
  type Registry,
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

export interface Agent {
  /** Starts everything; resolves once the informers have synced and the agent is ready. */
  start(): Promise<void>;
  /** Stops taking work, waits for running reconciles, closes the database pool. Idempotent. */
  close(): Promise<void>;
  /** True once started and synced, until close(). */
  ready(): boolean;
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
    onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
  });

  let engine: EngineInstanceRow | undefined;
  let isReady = false;
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
    const ns = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
    if (!ns?.metadata.uid) {
      throw new TerminalError(
        ErrorCode.configInvalid,
        `the Argo CD namespace ${namespace} (ARGOCD_NAMESPACE) does not exist; create it before starting the cluster-agent`,
      );
    }
    await checkResourceHealthPersisted(kc, namespace, { logger, registry });
    await waitForSchema();
    throwIfClosed();
    // Idempotent, as the backend does it: no write when the row already says so. The name registered for
    // another namespace or cluster is refused (a start-up error): two agents never share one instance.
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
      stopStart.abort();
      await featureSet?.stop();
      await db.destroy();
    })();
    return closing;
  }

  return {
    start,
    close,
    ready: () => isReady,
    engineInstance: () => engine,
    whenIdle: async () => {
      if (!operationFeature) throw new Error('the agent is not started');
      await operationFeature.whenIdle();
    },
  };
}
