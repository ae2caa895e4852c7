/**
 * Registers the engine instance (the Argo CD namespace this deployment of the service serves) at start,
 * as the cluster-agent does too (docs/contracts/core-pipeline.md). The namespace must exist: it is
 * never created here.
 */
import {
  countOperationsByState,
  type Database,
  type EngineInstanceRow,
  ensureEngineInstance,
  listEngineInstanceOverviews,
} from '@gitops/db';
import {
  addScrapedGauges,
  clusterIdentity,
  ErrorCode,
  type KubeConfig,
  type Logger,
  type Registry,
  TerminalError,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { readNamespaceUidIfExists } from '../kube-reads.ts';

/**
 * Upserts `engine_instance` (name, namespace, namespace uid, the cluster identity: the uid of `kube-system`,
 * as the agent records it). Writes nothing when the row already says so.
 * @throws TerminalError when the namespace does not exist, or the name is registered for another namespace
 * or cluster.
 */
export async function registerEngineInstance(
  db: Kysely<Database>,
  kc: KubeConfig,
  instance: { name: string; namespace: string },
): Promise<EngineInstanceRow> {
  const uid = await readNamespaceUidIfExists(kc, instance.namespace);
  if (!uid) {
    throw new TerminalError(
      ErrorCode.invalidObject,
      `the Argo CD namespace "${instance.namespace}" (ARGOCD_NAMESPACE) does not exist: create it (and install Argo CD there) before starting the backend`,
    );
  }
  return await ensureEngineInstance(
    db,
    { name: instance.name, namespaceName: instance.namespace, namespaceUid: uid },
    () => clusterIdentity(kc),
  );
}

/** How long the /metrics read of the database may take before `gitops_database_up` says 0. */
export const METRICS_DATABASE_TIMEOUT_MS = 5_000;

const OPERATION_GAUGE_STATES = ['Waiting', 'In_Progress', 'Failed'] as const;

/**
 * Per-instance gauges, read from the database when /metrics is scraped (no cost between scrapes):
 * `gitops_engine_instance_tenants`, `gitops_engine_instance_applications`, `gitops_engine_instance_cordoned`
 * (1 when cordoned), `gitops_engine_instance_agent_listening` (1 while an agent of the instance holds the
 * listening lock) and `gitops_engine_instance_deletions_held` (deletes its deletion guard holds), labelled `engine_instance` with the instance's name; `gitops_operations` (how many) and
 * `gitops_operations_oldest_seconds` (age of the oldest), labelled `engine_instance` and `state` (Waiting,
 * In_Progress, Failed; 0 when there are none). Every backend replica reports the same values; aggregate with
 * max() rather than sum(). `gitops_database_up` is this replica's own: 1 when that read answered within
 * METRICS_DATABASE_TIMEOUT_MS, else 0 (the other gauges then keep their last values).
 */
export function registerEngineInstanceMetrics(
  registry: Registry,
  db: Kysely<Database>,
  logger: Logger,
): void {
  if (registry.getSingleMetric('gitops_engine_instance_tenants')) return; // a second backend on one registry
  const labelNames = ['engine_instance'] as const;
  const byState = ['engine_instance', 'state'] as const;
  addScrapedGauges(
    registry,
    {
      tenants: {
        name: 'gitops_engine_instance_tenants',
        help: 'Tenants (user namespaces) placed on each engine instance',
        labelNames,
      },
      applications: {
        name: 'gitops_engine_instance_applications',
        help: 'Argo CD Applications (application rows) on each engine instance',
        labelNames,
      },
      cordoned: {
        name: 'gitops_engine_instance_cordoned',
        help: '1 when the engine instance is cordoned (takes no new tenants), else 0',
        labelNames,
      },
      deletionsHeld: {
        name: 'gitops_engine_instance_deletions_held',
        help: 'Deletes of Argo CD Applications held by the deletion guard of each engine instance, not confirmed yet',
        labelNames,
      },
      listening: {
        name: 'gitops_engine_instance_agent_listening',
        help: '1 while an agent of the engine instance listens for its operations (holds the listening lock), else 0',
        labelNames,
      },
      operations: {
        name: 'gitops_operations',
        help: 'Operations per engine instance in state Waiting, In_Progress or Failed',
        labelNames: byState,
      },
      oldest: {
        name: 'gitops_operations_oldest_seconds',
        help: 'Age of the oldest operation per engine instance and state (0 when there is none)',
        labelNames: byState,
      },
      databaseUp: {
        name: 'gitops_database_up',
        help: "1 when this process's read of the database for /metrics answered in time, else 0",
        labelNames: [],
      },
    },
    async (gauges) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const [loads, operations] = await Promise.race([
          Promise.all([listEngineInstanceOverviews(db), countOperationsByState(db)]),
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`no answer within ${METRICS_DATABASE_TIMEOUT_MS} ms`)),
              METRICS_DATABASE_TIMEOUT_MS,
            );
          }),
        ]);
        for (const gauge of Object.values(gauges)) gauge.reset();
        for (const load of loads) {
          const labels = { engine_instance: load.name };
          gauges.tenants.set(labels, load.tenants);
          gauges.applications.set(labels, load.applications);
          gauges.cordoned.set(labels, load.cordoned ? 1 : 0);
          gauges.listening.set(labels, load.listening ? 1 : 0);
          gauges.deletionsHeld.set(labels, load.deletionsHeld);
          for (const state of OPERATION_GAUGE_STATES) {
            gauges.operations.set({ ...labels, state }, 0);
            gauges.oldest.set({ ...labels, state }, 0);
          }
        }
        for (const row of operations) {
          const labels = { engine_instance: row.engine_instance_name, state: row.state };
          gauges.operations.set(labels, row.count);
          gauges.oldest.set(labels, row.oldest_seconds);
        }
        gauges.databaseUp.set(1);
      } catch (err) {
        gauges.databaseUp.set(0);
        logger.warn({ err }, 'could not read the engine instances for /metrics');
      } finally {
        clearTimeout(timer);
      }
    },
  );
}
