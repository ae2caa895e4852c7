/**
 * buildAgent(config): the whole cluster-agent without process wiring, so tests run it in-process. A list of
 * features (each `<folder>/<name>.feature.ts`: its informers, the operation resource types it handles, what it
 * starts and stops) run by a manager (`createManager` of @gitops/shared).
 *
 * start(): the start steps (registration.ts: the Argo CD namespace and settings, the schema, the engine_instance
 * row; then the active lock, active-replica.ts), then the features are built, their informers started and
 * synced, the crash recovery sweep run (the operation feature's beforeStart), and the features started
 * (queues, then periodic safety nets). ready() is true from then on, and while it waits as the standby.
 */
import { createDb, type Db, type EngineInstanceRow, sessionDatabaseUrl } from '@gitops/db';
import { createManager, type ProcessOptions, processDeps } from '@gitops/shared';
import { createActiveReplica } from './active-replica.ts';
import { type AgentFeature, createFeatureContext } from './agent-feature.ts';
import { createApplicationFeature } from './application/application.feature.ts';
import type { AgentConfig } from './config.ts';
import { createInstanceKeys } from './instance-key.ts';
import { createManagedEnvironmentFeature } from './managed-environment/managed-environment.feature.ts';
import { createOperationFeature, type OperationFeature } from './operation/operation.feature.ts';
import { createAgentRegistration } from './registration.ts';
import { createRepositoryCredentialFeature } from './repository-credential/repository-credential.feature.ts';
import { createStatusFeature } from './status/status.feature.ts';
import { createSyncRunFeature } from './sync-run/sync-run.feature.ts';

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

export interface BuildAgentOptions extends ProcessOptions {
  /**
   * Called after the agent stopped because another replica became the active one while its lock session was
   * lost: the process should exit, to be restarted as the standby (main.ts exits 1). Default: nothing more
   * (the agent is closed).
   */
  onActiveLost?: () => void;
}

export function buildAgent(config: AgentConfig, options: BuildAgentOptions = {}): Agent {
  const { logger, registry, kc } = processDeps('cluster-agent', config, options);
  const db: Db = createDb(config.databaseUrl, {
    // A reconcile holds a connection only for its statements (no transaction spans an API call), and the
    // status writes and completions go in batches: 20 at the default concurrency of 16, as 8 × 2 + 4 was.
    max: Math.min(32, config.concurrency + 4),
    applicationName: 'gitops-cluster-agent',
    preparedStatements: config.databasePreparedStatements,
    onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
  });
  const registration = createAgentRegistration({ config, kc, db, logger, registry });
  const engineInstanceId = () => {
    const row = registration.engineInstance();
    if (!row) throw new Error('the engine instance is not registered');
    return row.id;
  };
  const instanceKeys = createInstanceKeys({
    kc,
    db,
    namespace: config.argoCdNamespace,
    logger,
    engineInstanceId,
    ownRole: registration.ownRole,
  });
  const replica = createActiveReplica({
    // DATABASE_SESSION_ADDRESS: past a transaction-mode pooler (DATABASE_URL may be one), to PostgreSQL itself.
    sessionUrl: sessionDatabaseUrl(config.databaseUrl, config.databaseSessionAddress),
    logger,
    registry,
    engineInstanceId,
    onTakenOver: () => void manager.close().then(() => options.onActiveLost?.()),
  });
  let operations: OperationFeature | undefined;

  const manager = createManager({
    name: 'cluster-agent',
    logger,
    steps: [...registration.steps, instanceKeys.step, replica.step],
    // Built once the engine instance is known. Started in this order: the queues (status, operations) before
    // the periodic passes that feed them; stopped in reverse.
    features: () => {
      const context = createFeatureContext({
        config,
        kc,
        db,
        logger,
        registry,
        engineInstanceId: engineInstanceId(),
        // Informer events reach it only once the informers start, after `operations` exists.
        enqueue: (type, id) => operations?.enqueue(type, id),
        keyring: instanceKeys.keyring,
      });
      const application = createApplicationFeature(context);
      const resourceFeatures: AgentFeature[] = [
        application,
        createSyncRunFeature(context),
        createRepositoryCredentialFeature(context, application),
        createManagedEnvironmentFeature(context, application),
      ];
      operations = createOperationFeature(context, resourceFeatures);
      const keyChecks = {
        name: 'instance-key',
        informers: [],
        start: instanceKeys.start,
        stop: instanceKeys.stop,
      };
      return [createStatusFeature(context), operations, ...resourceFeatures, keyChecks];
    },
    release: async () => {
      // After everything stopped, so the standby starts only once this one does nothing more.
      await replica.release();
      await db.destroy();
    },
  });

  return {
    start: manager.start,
    close: manager.close,
    ready: () => !manager.closed.aborted && (manager.ready() || replica.standby()),
    isActive: () => replica.held() && !manager.closed.aborted,
    engineInstance: registration.engineInstance,
    whenIdle: async () => {
      if (!operations) throw new Error('the agent is not started');
      await operations.whenIdle();
    },
  };
}
