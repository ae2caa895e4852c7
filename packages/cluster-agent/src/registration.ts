/**
 * What the agent does before any cache (its start steps, run by the manager and retried while the API server
 * or PostgreSQL is briefly away): check the Argo CD namespace and settings, wait for the backend to migrate
 * the database, and register the engine_instance row. The name registered for another namespace or cluster is
 * refused (a start-up error): two agents never share one instance.
 */
import { type Db, type EngineInstanceRow, ensureEngineInstance, waitForMigrations } from '@gitops/db';
import {
  clusterIdentity,
  ErrorCode,
  getObject,
  type KubeConfig,
  type Logger,
  type Registry,
  type StartStep,
  TerminalError,
} from '@gitops/shared';
import { checkResourceHealthPersisted } from './argocd-settings.ts';
import type { AgentConfig } from './config.ts';

/** How long the agent waits for the backend to migrate the database. */
const SCHEMA_WAIT_MS = 10 * 60_000;

export interface AgentRegistration {
  readonly steps: readonly StartStep[];
  /** The registered row (undefined before the last step). */
  engineInstance(): EngineInstanceRow | undefined;
}

export function createAgentRegistration(deps: {
  config: AgentConfig;
  kc: KubeConfig;
  db: Db;
  logger: Logger;
  registry: Registry;
}): AgentRegistration {
  const { config, kc, db, logger, registry } = deps;
  const namespace = config.argoCdNamespace;
  let namespaceUid: string | undefined;
  let registered: EngineInstanceRow | undefined;
  return {
    engineInstance: () => registered,
    steps: [
      {
        what: 'reading the Argo CD namespace',
        async run() {
          const ns = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
          if (!ns?.metadata.uid) {
            throw new TerminalError(
              ErrorCode.configInvalid,
              `the Argo CD namespace ${namespace} (ARGOCD_NAMESPACE) does not exist; create it before starting the cluster-agent`,
            );
          }
          namespaceUid = ns.metadata.uid;
        },
      },
      {
        what: 'checking the Argo CD settings',
        run: async () => {
          await checkResourceHealthPersisted(kc, namespace, { logger, registry });
        },
      },
      {
        what: 'waiting for the database schema',
        run: (signal) =>
          waitForMigrations(db, {
            timeoutMs: SCHEMA_WAIT_MS,
            signal,
            onWaiting: (pending) =>
              logger.info({ pending }, 'waiting for the backend to migrate the database'),
          }),
      },
      {
        what: 'registering the engine instance',
        async run() {
          if (!namespaceUid) throw new Error('the Argo CD namespace was not read before the registration');
          // Idempotent, as the backend does it: no write when the row already says so.
          registered = await ensureEngineInstance(
            db,
            { name: config.engineInstanceName, namespaceName: namespace, namespaceUid },
            () => clusterIdentity(kc, { logger }),
          );
          logger.info(
            { engineInstance: config.engineInstanceName, engineInstanceId: registered.id, namespace },
            'engine instance registered',
          );
        },
      },
    ],
  };
}
