/**
 * What the agent does before any cache (its start steps, run by the manager and retried while the API server
 * or PostgreSQL is briefly away): check the Argo CD namespace and settings, wait for the backend to migrate
 * the database, and register with the engine_instance row its database role is bound to (docs/threat-model.md).
 * A role bound to another instance or to none, another namespace or another cluster is refused (a start-up
 * error, nothing written): two agents never share one instance, and no agent acts as another.
 */
import {
  type Db,
  type EngineInstanceRow,
  ensureEngineInstance,
  registerAgent,
  sessionRole,
  waitForMigrations,
} from '@gitops/db';
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
  /** True when the agent connects with its instance's own database role (false: the backend's, 0.1.0 way). */
  ownRole(): boolean;
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
  let bound = false;
  return {
    engineInstance: () => registered,
    ownRole: () => bound,
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
          const instance = { name: config.engineInstanceName, namespaceName: namespace, namespaceUid };
          const me = await sessionRole(db);
          if (me.engineInstanceId === undefined && me.ownsTables) {
            // The 0.1.0 way (docs/upgrades.md): the backend's role, which sees every tenant. Still served so an
            // upgrade needs no downtime; admit the instance and give the agent its own role.
            logger.warn(
              { engineInstance: config.engineInstanceName, role: me.role },
              "connected with the backend's database role, which reads every engine instance's rows: admit this instance (kubectl gitops instances admit) and give the agent its own connection string",
            );
            registered = await ensureEngineInstance(db, instance, () => clusterIdentity(kc, { logger }));
          } else {
            // Bound to its instance by the database: another name, namespace or cluster is refused, nothing written.
            registered = await registerAgent(db, {
              ...instance,
              clusterIdentity: await clusterIdentity(kc, { logger }),
            });
            bound = true;
            if (config.encryptionKeys)
              logger.warn(
                'GITOPS_ENCRYPTION_KEYS is set: an agent with its own database role needs only its engine instance key; remove the backend keys from its environment (docs/upgrades.md)',
              );
          }
          logger.info(
            { engineInstance: config.engineInstanceName, engineInstanceId: registered.id, namespace },
            'engine instance registered',
          );
        },
      },
    ],
  };
}
