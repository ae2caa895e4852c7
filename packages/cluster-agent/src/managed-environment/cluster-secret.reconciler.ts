/**
 * Makes Argo CD match the database for one managed environment (level-based): an External environment row
 * with credentials → its cluster Secret, server-side applied (only when its data or labels differ); no
 * row → the Secret is deleted. The tenant's AppProject is recomputed either way (its destinations list
 * the tenant's External environments). The token is unsealed here and only ever written to the Secret.
 */
import { ArgoCDSecretType, Label } from '@gitops/api';
import {
  type Db,
  getManagedEnvironmentWithCredentials,
  isManagedEnvironmentOnEngineInstance,
  listApplicationsOfManagedEnvironment,
  listClusterSecretEnvironmentIds,
} from '@gitops/db';
import {
  collectionPath,
  createInformer,
  deleteIfExists,
  getPathIfExists,
  HttpMethod,
  type Informer,
  isKubeObject,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  type Registry,
  secretRef,
  serverSideApply,
} from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import {
  AgentLabel,
  ApplicationResource,
  databaseIdOf,
  FIELD_MANAGER,
  isUuid,
  managedEnvironmentClusterName,
} from '../argocd.ts';
import { type CredentialOpener, SEALING_WAIT_MS } from '../credentials.ts';
import { renderClusterSecret } from './cluster-secret.render.ts';

/** How often a cluster Secret to delete is looked at again while Applications still deploy through it. */
const APPLICATIONS_GONE_WAIT_MS = 5_000;

/** Label selector of the cluster Secrets we own. */
export const CLUSTER_SECRET_SELECTOR = `${Label.ArgoCDSecretType}=${ArgoCDSecretType.Cluster},${Label.DatabaseId}`;

/**
 * The cache of the cluster Secrets we own in the Argo CD namespace. The managed-environment feature watches it:
 * a change to one (someone edited or deleted it) re-checks it against its row at once — drift repair without
 * waiting for the periodic pass.
 */
export function clusterSecretInformer(options: {
  kc: KubeConfig;
  namespace: string;
  registry: Registry;
  logger: Logger;
  resyncPeriodMs: number;
}): Informer<KubeObject> {
  return createInformer<KubeObject>({
    kubeConfig: options.kc,
    namespace: options.namespace,
    resource: { apiVersion: 'v1', plural: 'secrets' },
    labelSelector: CLUSTER_SECRET_SELECTOR,
    registry: options.registry,
    logger: options.logger,
    resyncPeriodMs: options.resyncPeriodMs,
    metricsLabel: 'secrets.cluster',
  });
}

export interface ClusterSecretReconcilerOptions {
  kc: KubeConfig;
  db: Db;
  /** Opens the environment's token (sealed for this instance: credentials.ts). */
  credentials: CredentialOpener;
  namespace: string;
  engineInstanceId: string;
  /**
   * Queues an Application for a re-check: its AppProject depends on whether its environment allows
   * cluster-scoped objects (docs/api.md "Argo CD objects the agent owns").
   */
  enqueueApplication(applicationId: string): void;
  /** Recomputes a tenant's AppProjects. */
  reconcileAppProject(
    clusterUserId: string,
    options: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome>;
}

function sameData(live: KubeObject | undefined, desired: KubeObject): boolean {
  if (!live) return false;
  const liveData = (live as { data?: Record<string, string> }).data ?? {};
  const desiredData = (desired as { data?: Record<string, string> }).data ?? {};
  const keys = new Set([...Object.keys(liveData), ...Object.keys(desiredData)]);
  for (const key of keys) if (liveData[key] !== desiredData[key]) return false;
  const liveLabels = live.metadata.labels ?? {};
  for (const [key, value] of Object.entries(desired.metadata.labels ?? {})) {
    if (liveLabels[key] !== value) return false;
  }
  return true;
}

export function createClusterSecretReconciler(options: ClusterSecretReconcilerOptions) {
  const { kc, db, namespace } = options;
  const secretPath = (name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`;

  async function liveSecret(name: string, signal: AbortSignal): Promise<KubeObject | undefined> {
    const object = await getPathIfExists(kc, secretPath(name), signal);
    return isKubeObject(object) ? object : undefined;
  }

  /** Live cluster Secrets we own (names and the database ids they carry). */
  async function listOwnedSecrets(signal: AbortSignal): Promise<KubeObject[]> {
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`,
      query: { labelSelector: CLUSTER_SECRET_SELECTOR },
      signal,
    })) as { items?: unknown };
    return Array.isArray(list.items) ? list.items.filter(isKubeObject) : [];
  }

  /**
   * How many Applications of `tenant` in the Argo CD namespace still deploy to cluster `name`, one Argo CD is
   * deleting included: Argo CD prunes what such an Application deployed through this Secret, and without it
   * drops the resources from its cache and leaves them where they are.
   */
  async function applicationsDeployingTo(name: string, tenant: string, signal: AbortSignal): Promise<number> {
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: collectionPath({ ...ApplicationResource, namespace }),
      query: { labelSelector: `${AgentLabel.ClusterUserId}=${tenant}` },
      signal,
    })) as { items?: unknown };
    const items = Array.isArray(list.items) ? list.items.filter(isKubeObject) : [];
    return items.filter((app) => {
      const spec = app.spec as { destination?: { name?: unknown } } | undefined;
      return spec?.destination?.name === name;
    }).length;
  }

  async function reconcileManagedEnvironment(
    id: string,
    context: { ownerUserIds: readonly string[]; signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const { signal, logger } = context;
    const name = managedEnvironmentClusterName(id);
    const found = isUuid(id) ? await getManagedEnvironmentWithCredentials(db, id) : undefined;
    const tenants = new Set(context.ownerUserIds);
    let changed = false;
    let secretApplied = false;
    // A tenant's environments are on its instance (and, during a move, on the one still releasing its
    // Applications that target them); anywhere else their Secret goes.
    const here =
      found?.credentials !== undefined &&
      (await isManagedEnvironmentOnEngineInstance(db, id, options.engineInstanceId));
    if (found && !here) tenants.add(found.environment.cluster_user_id);
    if (!found || !here || !found.credentials) {
      // A row this instance no longer sees (its tenant moved away, its release done: the instance's role reads
      // only what it serves) names its tenant on the Secret we wrote: its AppProjects are looked at too.
      const tenantOfSecret = found
        ? undefined
        : (await liveSecret(name, signal))?.metadata.labels?.[AgentLabel.ClusterUserId];
      if (isUuid(tenantOfSecret)) tenants.add(tenantOfSecret);
      // Not while an Application here still deploys there (a deployment deleted as its tenant moves away, or as
      // its environment goes): Argo CD needs the Secret to prune what it deployed.
      const tenant = found?.environment.cluster_user_id ?? tenantOfSecret;
      const deploying = isUuid(tenant) ? await applicationsDeployingTo(name, tenant, signal) : 0;
      if (deploying > 0)
        return {
          status: 'pending',
          reason: `${deploying} Application(s) here still deploy to ${name}: Argo CD prunes through its cluster Secret`,
          requeueAfterMs: APPLICATIONS_GONE_WAIT_MS,
        };
      changed = await deleteIfExists(kc, secretRef(namespace, name), { signal });
      if (changed)
        logger.info(
          { clusterSecret: name },
          found
            ? 'Argo CD cluster Secret deleted (its tenant is on another engine instance)'
            : 'Argo CD cluster Secret deleted (its environment is gone)',
        );
    } else {
      tenants.add(found.environment.cluster_user_id);
      const c = found.credentials;
      const opened = await options.credentials.open({
        table: 'cluster_credentials',
        id: c.id,
        updatedAt: c.updated_at,
        fields: { bearer_token: c.bearer_token_sealed },
      });
      if ('waiting' in opened)
        return { status: 'pending', reason: opened.waiting, requeueAfterMs: SEALING_WAIT_MS };
      const bearerToken = opened.values.bearer_token ?? '';
      const desired = renderClusterSecret({
        environmentId: id,
        clusterUserId: found.environment.cluster_user_id,
        apiUrl: c.api_url,
        bearerToken,
        insecure: c.allow_insecure_skip_tls_verify,
        namespaces: c.namespaces,
        clusterResources: c.cluster_resources,
        caData: c.ca_data,
        namespace,
      });
      if (!sameData(await liveSecret(name, signal), desired)) {
        await serverSideApply(kc, desired, { fieldManager: FIELD_MANAGER, force: true, signal });
        logger.info({ clusterSecret: name }, 'Argo CD cluster Secret applied');
        changed = true;
        secretApplied = true;
      }
    }
    for (const tenant of tenants) {
      const outcome = await options.reconcileAppProject(tenant, { signal, logger });
      changed = changed || (outcome.status === 'done' && outcome.changed);
    }
    if (secretApplied) {
      // Its `namespaces` / `clusterResources` may have changed, and with them the AppProject its
      // Applications belong in; the projects are up to date now, so the Applications can move.
      for (const application of await listApplicationsOfManagedEnvironment(db, id)) {
        if (application.engine_instance_id === options.engineInstanceId) {
          options.enqueueApplication(application.id);
        }
      }
    }
    return { status: 'done', changed };
  }

  /** The resource ids to check in a drift pass: every External environment row and every live cluster Secret. */
  async function driftIds(signal: AbortSignal): Promise<string[]> {
    const ids = new Set(
      await listClusterSecretEnvironmentIds(db, { engineInstanceId: options.engineInstanceId }),
    );
    for (const secret of await listOwnedSecrets(signal)) {
      const id = databaseIdOf(secret);
      if (id) ids.add(id);
    }
    return [...ids];
  }

  return { reconcileManagedEnvironment, driftIds };
}
