/**
 * RepositoryCredentials as one feature: the informer on our repository Secrets (fast drift repair: an
 * edited or deleted Secret re-queues its row), the `RepositoryCredentials` handler (the projects of other
 * tenants deploying charts of the URL, which may no longer list it: tenant.queries.ts
 * withheldChartRepositories; the Secret; then the tenant's AppProject whose sourceRepos include the URL) and
 * the periodic drift/orphan pass.
 */

import { getRepositoryCredentials, listChartApplicationSpecsOfEngineInstance } from '@gitops/db';
import {
  createInformer,
  jsonEqual,
  type KubeObject,
  normalizeRepositoryUrl,
  periodicJob,
  updatePredicate,
} from '@gitops/shared';
import { type AgentFeature, type FeatureContext, keysOfDatabaseId } from '../agent-feature.ts';
import type { ApplicationFeature } from '../application/application.feature.ts';
import { chartRepoUrls } from '../application/application.render.ts';
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
  /**
   * The other tenants of this instance whose applications deploy a chart of the row's repository (none when
   * the row is gone: a tenant's project keeps withholding it until its own next recompute).
   */
  async function otherChartRepositoryUsers(id: string): Promise<string[]> {
    const row = await getRepositoryCredentials(ctx.db, id);
    if (!row) return [];
    const users = await listChartApplicationSpecsOfEngineInstance(ctx.db, ctx.engineInstanceId);
    const tenants = users
      .filter(
        ({ clusterUserId, spec }) =>
          clusterUserId !== row.cluster_user_id &&
          chartRepoUrls(spec).some((url) => normalizeRepositoryUrl(url) === row.normalized_repository_url),
      )
      .map((user) => user.clusterUserId);
    return [...new Set(tenants)];
  }
  return {
    name: 'repository-credential',
    informers: [secrets],
    watches: (resources) =>
      resources.watches(secrets, keysOfDatabaseId('RepositoryCredentials'), {
        predicates: [ownedSecretChanged],
      }),
    handles: {
      async RepositoryCredentials(id, { ownerUserIds, signal, logger }) {
        let changed = false;
        // A chart repository with credentials is private: before Argo CD can download one of its charts with
        // them (into a cache every Application reads), the other tenants' projects stop listing it.
        for (const tenant of await otherChartRepositoryUsers(id)) {
          const project = await deps.reconcileAppProject(tenant, { signal, logger });
          changed = changed || (project.status === 'done' && project.changed);
        }
        const { outcome, clusterUserId } = await reconciler.reconcile(id, { signal, logger });
        changed = changed || (outcome.status === 'done' && outcome.changed);
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
    ...periodicJob(
      'repository-secret-resync',
      config.resyncIntervalMs,
      async (signal) => {
        const queued = await reconciler.resync(enqueue, signal);
        logger.debug({ queued }, 'repository Secret resync queued');
      },
      { logger, jitter: 0.25 },
    ),
  };
}
