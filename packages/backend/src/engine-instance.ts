/**
 * Registers the engine instance (the Argo CD namespace this deployment of the service serves) at start,
 * as the cluster-agent does too (docs/contracts/core-pipeline.md). The namespace must exist: it is
 * never created here.
 */
import {
  type Database,
  type EngineInstanceRow,
  ensureEngineInstance,
  listEngineInstanceLoads,
} from '@gitops/db';
import {
  addScrapedGauges,
  clusterIdentity,
  ErrorCode,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  kubeRequest,
  type Logger,
  type Registry,
  TerminalError,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { isJsonObject } from './json.ts';

async function namespaceUid(kc: KubeConfig, name: string): Promise<string | undefined> {
  try {
    const ns = await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/api/v1/namespaces/${encodeURIComponent(name)}`,
    });
    const uid = isJsonObject(ns) && isJsonObject(ns.metadata) ? ns.metadata.uid : undefined;
    return typeof uid === 'string' ? uid : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

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
  const uid = await namespaceUid(kc, instance.namespace);
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

/**
 * Per-instance gauges, read from the database when /metrics is scraped (no cost between scrapes):
 * `gitops_engine_instance_tenants`, `gitops_engine_instance_applications` and `gitops_engine_instance_cordoned`
 * (1 when cordoned), labelled `engine_instance` with the instance's name. Every backend replica reports the
 * same values; aggregate with max() rather than sum().
 */
export function registerEngineInstanceMetrics(
  registry: Registry,
  db: Kysely<Database>,
  logger: Logger,
): void {
  if (registry.getSingleMetric('gitops_engine_instance_tenants')) return; // a second backend on one registry
  const labelNames = ['engine_instance'] as const;
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
    },
    async (gauges) => {
      try {
        const loads = await listEngineInstanceLoads(db);
        for (const gauge of Object.values(gauges)) gauge.reset();
        for (const load of loads) {
          const labels = { engine_instance: load.name };
          gauges.tenants.set(labels, load.tenants);
          gauges.applications.set(labels, load.applications);
          gauges.cordoned.set(labels, load.cordoned ? 1 : 0);
        }
      } catch (err) {
        logger.warn({ err }, 'could not read the engine instances for /metrics');
      }
    },
  );
}
