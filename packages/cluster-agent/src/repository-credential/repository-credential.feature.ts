/**
 * RepositoryCredentials as one feature: the informer on our repository Secrets (fast drift repair: an
 * edited or deleted Secret re-queues its row), the `RepositoryCredentials` handler (Secret, then the
 * tenant's AppProject whose sourceRepos include the URL) and the periodic drift/orphan pass.
 */
import {
  createInformer,
  jsonEqual,
  type KubeObject,
  type Periodic,
  runPeriodically,
  updatePredicate,
} from '@gitops/shared';
import { type AgentFeature, type FeatureContext, keysOfDatabaseId } from '../agent-feature.ts';
import type { ApplicationFeature } from '../application/application.feature.ts';
import { createRepositorySecretReconciler } from './repository-secret.reconciler.ts';
import { REPOSITORY_SECRET_SELECTOR } from './repository-secret.render.ts';

/** What we own of a repository Secret: its labels, data and deletion. */
function ownedSecretState(secret: KubeObject) {
  return [
    secret.metadata.labels ?? {},
    (secret as { data?: unknown }).data ?? {},
    secret.metadata.deletionTimestamp ?? null,
  ];
}

/** Only changes to what we own, not resourceVersion-only relists; creates (an orphan, or at start) and deletes wake. */
export const ownedSecretChanged = updatePredicate('labels, data or deletion changed', (old, secret) => {
  return !jsonEqual(ownedSecretState(old), ownedSecretState(secret));
});

export function createRepositoryCredentialFeature(
  ctx: FeatureContext,
  deps: { reconcileAppProject: ApplicationFeature['reconcileAppProject'] },
): AgentFeature {
  const { config, logger } = ctx;
  const enqueue = (id: string) => ctx.enqueue('RepositoryCredentials', id);
  const secrets = createInformer<KubeObject>({
    kubeConfig: ctx.kc,
    namespace: ctx.namespace,
    resource: { apiVersion: 'v1', plural: 'secrets' },
    labelSelector: REPOSITORY_SECRET_SELECTOR,
    registry: ctx.registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
  });
  const reconciler = createRepositorySecretReconciler({
    kc: ctx.kc,
    db: ctx.db,
    credentials: ctx.credentials,
    namespace: ctx.namespace,
    engineInstanceId: ctx.engineInstanceId,
    secrets,
  });
  let resync: Periodic | undefined;
  return {
    name: 'repository-credential',
    informers: [secrets],
    watches: (resources) =>
      resources.watches(secrets, keysOfDatabaseId('RepositoryCredentials'), {
        predicates: [ownedSecretChanged],
      }),
    handles: {
      async RepositoryCredentials(id, { ownerUserIds, signal, logger }) {
        const { outcome, clusterUserId } = await reconciler.reconcile(id, { signal, logger });
        let changed = outcome.status === 'done' && outcome.changed;
        // The AppProject lists the credential's URL: recompute it for the row's tenant and the operations' owners.
        const tenants = new Set(ownerUserIds);
        if (clusterUserId) tenants.add(clusterUserId);
        for (const tenant of tenants) {
          const project = await deps.reconcileAppProject(tenant, { signal, logger });
          changed = changed || (project.status === 'done' && project.changed);
        }
        // Not sealed for this instance yet: looked at again shortly (the operation stays in progress).
        if (outcome.status === 'pending') return { ...outcome, changed };
        return { status: 'done', changed };
      },
    },
    start() {
      resync = runPeriodically(
        'repository-secret-resync',
        config.resyncIntervalMs,
        async (signal) => {
          const queued = await reconciler.resync(enqueue, signal);
          logger.debug({ queued }, 'repository Secret resync queued');
        },
        { logger, jitter: 0.25 },
      );
    },
    async stop() {
      await resync?.stop();
    },
  };
}
