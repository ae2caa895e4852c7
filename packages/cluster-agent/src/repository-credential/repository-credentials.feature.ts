/**
 * RepositoryCredentials in the cluster-agent as one unit for buildAgent: the informer on our repository
 * Secrets (fast drift repair: an edited or deleted Secret re-queues its row), the operation handler (Secret,
 * then the tenant's AppProject whose sourceRepos include the URL) and the periodic drift/orphan pass.
 */
import type { Db, Sealer } from '@gitops/db';
import {
  createInformer,
  type Informer,
  type KubeConfig,
  type KubeObject,
  type Logger,
  type Periodic,
  type Registry,
  runPeriodically,
} from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import { AgentLabel, isUuid } from '../argocd.ts';
import { createRepositorySecretReconciler } from './repository-secret.reconciler.ts';
import { REPOSITORY_SECRET_SELECTOR } from './repository-secret.render.ts';

export interface RepositoryCredentialsAgentOptions {
  kc: KubeConfig;
  db: Db;
  sealer: Sealer;
  registry: Registry;
  logger: Logger;
  namespace: string;
  engineInstanceId: string;
  resyncIntervalMs: number;
  /** Queues `RepositoryCredentials/<id>` on the operation processor. */
  enqueue(id: string): void;
  reconcileAppProject(
    clusterUserId: string,
    options: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome>;
}

export interface RepositoryCredentialsAgent {
  /** Add to the agent's informers (started and synced with them). */
  readonly secrets: Informer<KubeObject>;
  handle(
    id: string,
    options: { ownerUserIds: readonly string[]; signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome>;
  /** Starts the periodic pass (after the queues started). */
  startResync(): Periodic;
}

/** Only changes to what we own (labels, data, deletion), not resourceVersion-only relists. */
function ownedSecretState(secret: KubeObject): string {
  return JSON.stringify([
    secret.metadata.labels ?? {},
    (secret as { data?: unknown }).data ?? {},
    secret.metadata.deletionTimestamp ?? null,
  ]);
}

export function createRepositoryCredentialsAgent(
  options: RepositoryCredentialsAgentOptions,
): RepositoryCredentialsAgent {
  const secrets = createInformer<KubeObject>({
    kubeConfig: options.kc,
    namespace: options.namespace,
    resource: { apiVersion: 'v1', plural: 'secrets' },
    labelSelector: REPOSITORY_SECRET_SELECTOR,
    registry: options.registry,
    logger: options.logger,
    resyncPeriodMs: options.resyncIntervalMs,
  });
  const reconciler = createRepositorySecretReconciler({
    kc: options.kc,
    db: options.db,
    sealer: options.sealer,
    namespace: options.namespace,
    engineInstanceId: options.engineInstanceId,
    secrets,
  });
  const enqueueOf = (secret: KubeObject) => {
    const id = secret.metadata.labels?.[AgentLabel.DatabaseId];
    if (isUuid(id)) options.enqueue(id);
  };
  // Added (e.g. an orphan someone created, or at start), edited or deleted: re-check against the row.
  secrets.onAdd(enqueueOf);
  secrets.onUpdate((old, secret) => {
    if (ownedSecretState(old) !== ownedSecretState(secret)) enqueueOf(secret);
  });
  secrets.onDelete(enqueueOf);

  return {
    secrets,
    async handle(id, { ownerUserIds, signal, logger }) {
      const { outcome, clusterUserId } = await reconciler.reconcile(id, { signal, logger });
      let changed = outcome.status === 'done' && outcome.changed;
      // The AppProject lists the credential's URL: recompute it for the row's tenant and the operations' owners.
      const tenants = new Set(ownerUserIds);
      if (clusterUserId) tenants.add(clusterUserId);
      for (const tenant of tenants) {
        const project = await options.reconcileAppProject(tenant, { signal, logger });
        changed = changed || (project.status === 'done' && project.changed);
      }
      return { status: 'done', changed };
    },
    startResync() {
      return runPeriodically(
        'repository-secret-resync',
        options.resyncIntervalMs,
        async (signal) => {
          const queued = await reconciler.resync(options.enqueue, signal);
          options.logger.debug({ queued }, 'repository Secret resync queued');
        },
        { logger: options.logger, jitter: 0.25 },
      );
    },
  };
}
