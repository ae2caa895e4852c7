/**
 * The tenant's Argo CD AppProjects (docs/contracts/core-pipeline.md): which repositories and destinations the
 * tenant's Applications may use, and where cluster-scoped objects are allowed. Pure; the rows come from
 * tenant.queries.ts.
 *
 * Argo CD (v3.5 `AppProject.IsGroupKindNamePermitted`) decides a cluster-scoped object by the project's
 * `clusterResourceWhitelist`/`Blacklist` alone: the whitelist is project-wide and never compared with the
 * destination. So the project that lists `in-cluster` (the host, where Argo CD deploys with its own
 * credentials) never has a whitelist, and a second project per tenant, whose only destinations are the
 * tenant's environments that allow cluster resources, has one.
 */
import type { KubeObject } from '@gitops/shared';
import { normalizeRepositoryUrl } from '@gitops/shared';
import {
  AgentLabel,
  AppProjectResource,
  appProjectName,
  clusterAppProjectName,
  IN_CLUSTER,
  managedEnvironmentClusterName,
} from '../argocd.ts';

export interface TenantResources {
  clusterUserId: string;
  /** The tenant's namespace (in-cluster destination). */
  namespace: string;
  /** repoURLs of the tenant's applications on this engine instance (any form; normalised here). */
  applicationRepoUrls: readonly string[];
  /**
   * Normalised repoURLs of the tenant's applications its projects must not list: private chart repositories
   * it has no credentials for (tenant.queries.ts withheldChartRepositories). Absent: none.
   */
  withheldRepoUrls?: readonly string[];
  /** normalized_repository_url of the tenant's repository credentials on this engine instance. */
  repositoryCredentialUrls: readonly string[];
  /**
   * ids of the tenant's environments reached through a cluster Secret: its External ones, and its Workspace
   * one while it has credentials (the tenant is on an instance of another cluster).
   */
  clusterSecretEnvironmentIds: readonly string[];
  /** The subset of `clusterSecretEnvironmentIds` whose credentials allow cluster-scoped objects (allowsClusterResources). */
  clusterScopedEnvironmentIds: readonly string[];
  /**
   * The subset of `clusterSecretEnvironmentIds` an Application of the tenant deploys through with
   * `CreateNamespace=true` (its Application is in the cluster-resource project, see application.render.ts).
   */
  namespaceCreatingEnvironmentIds: readonly string[];
}

/** True when the tenant has nothing left that needs an AppProject. */
export function tenantIsEmpty(
  tenant: Omit<
    TenantResources,
    'clusterUserId' | 'namespace' | 'clusterScopedEnvironmentIds' | 'namespaceCreatingEnvironmentIds'
  >,
): boolean {
  return (
    tenant.applicationRepoUrls.length === 0 &&
    tenant.repositoryCredentialUrls.length === 0 &&
    tenant.clusterSecretEnvironmentIds.length === 0
  );
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The AppProject of a tenant, or `undefined` when the tenant has no application, External environment or
 * repository credential left (the project is then deleted). Deterministic: sorted, de-duplicated lists.
 */
function sourceReposOf(tenant: TenantResources): string[] {
  const withheld = new Set(tenant.withheldRepoUrls ?? []);
  const applications = tenant.applicationRepoUrls
    .map(normalizeRepositoryUrl)
    .filter((url) => !withheld.has(url));
  return [...new Set([...applications, ...tenant.repositoryCredentialUrls.map(normalizeRepositoryUrl)])]
    .filter((url) => url !== '')
    .sort(byString);
}

export function renderAppProject(tenant: TenantResources, namespace: string): KubeObject | undefined {
  if (tenantIsEmpty(tenant)) return undefined;
  const sourceRepos = sourceReposOf(tenant);
  const destinations = [
    { name: IN_CLUSTER, namespace: tenant.namespace },
    ...[...new Set(tenant.clusterSecretEnvironmentIds)]
      .sort(byString)
      .map((id) => ({ name: managedEnvironmentClusterName(id), namespace: '*' })),
  ];
  return {
    apiVersion: AppProjectResource.apiVersion,
    kind: AppProjectResource.kind,
    metadata: {
      name: appProjectName(tenant.clusterUserId),
      namespace,
      labels: { [AgentLabel.DatabaseId]: tenant.clusterUserId },
    },
    spec: { sourceRepos, destinations },
  };
}

/** Argo CD's "every group and kind" whitelist entry. */
export const ANY_CLUSTER_RESOURCE = { group: '*', kind: '*' } as const;

/**
 * The tenant's cluster-resource AppProject `app-project-<id>-cluster`, or `undefined` (deleted) when none of
 * its External environments allows cluster-scoped objects and none is deployed through with
 * `CreateNamespace=true`. Same `sourceRepos` as the main project; `destinations` only those environments
 * (never `in-cluster`); `clusterResourceWhitelist` every kind, so what is created there is bounded by the
 * environment's own credentials and `namespaces` (through an environment that does not allow cluster-scoped
 * objects, Argo CD's namespaced cluster cache refuses every cluster-scoped object of the repository: only the
 * destination namespace Argo CD creates itself gets through, and only if the token may create it).
 */
export function renderClusterAppProject(tenant: TenantResources, namespace: string): KubeObject | undefined {
  const allowed = new Set(tenant.clusterSecretEnvironmentIds);
  const environmentIds = [
    ...new Set([...tenant.clusterScopedEnvironmentIds, ...tenant.namespaceCreatingEnvironmentIds]),
  ]
    .filter((id) => allowed.has(id))
    .sort(byString);
  if (environmentIds.length === 0) return undefined;
  return {
    apiVersion: AppProjectResource.apiVersion,
    kind: AppProjectResource.kind,
    metadata: {
      name: clusterAppProjectName(tenant.clusterUserId),
      namespace,
      labels: { [AgentLabel.DatabaseId]: tenant.clusterUserId },
    },
    spec: {
      sourceRepos: sourceReposOf(tenant),
      destinations: environmentIds.map((id) => ({ name: managedEnvironmentClusterName(id), namespace: '*' })),
      clusterResourceWhitelist: [{ ...ANY_CLUSTER_RESOURCE }],
    },
  };
}
