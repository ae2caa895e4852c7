/**
 * The tenant's Argo CD AppProject (docs/contracts/core-pipeline.md): which repositories and destinations the
 * tenant's Applications may use. Pure; the rows come from tenant.queries.ts.
 */
import type { KubeObject } from '@gitops/shared';
import {
  AgentLabel,
  AppProjectResource,
  appProjectName,
  IN_CLUSTER,
  managedEnvironmentClusterName,
} from '../argocd.ts';

/**
 * Normalises a Git repository URL the way Argo CD compares them (util/git NormalizeGitURL): trimmed, lower
 * case, without trailing slashes and without a trailing `.git`.
 */
export function normaliseRepoUrl(url: string): string {
  let normalised = url.trim().toLowerCase();
  while (normalised.endsWith('/')) normalised = normalised.slice(0, -1);
  if (normalised.endsWith('.git')) normalised = normalised.slice(0, -4);
  while (normalised.endsWith('/')) normalised = normalised.slice(0, -1);
  return normalised;
}

export interface TenantResources {
  clusterUserId: string;
  /** The tenant's namespace (in-cluster destination). */
  namespace: string;
  /** repoURLs of the tenant's applications on this engine instance (any form; normalised here). */
  applicationRepoUrls: readonly string[];
  /** normalized_repository_url of the tenant's repository credentials on this engine instance. */
  repositoryCredentialUrls: readonly string[];
  /** ids of the tenant's External managed environments. */
  externalEnvironmentIds: readonly string[];
}

/** True when the tenant has nothing left that needs an AppProject. */
export function tenantIsEmpty(tenant: Omit<TenantResources, 'clusterUserId' | 'namespace'>): boolean {
  return (
    tenant.applicationRepoUrls.length === 0 &&
    tenant.repositoryCredentialUrls.length === 0 &&
    tenant.externalEnvironmentIds.length === 0
  );
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The AppProject of a tenant, or `undefined` when the tenant has no application, External environment or
 * repository credential left (the project is then deleted). Deterministic: sorted, de-duplicated lists.
 */
export function renderAppProject(tenant: TenantResources, namespace: string): KubeObject | undefined {
  if (tenantIsEmpty(tenant)) return undefined;
  const sourceRepos = [
    ...new Set([...tenant.applicationRepoUrls, ...tenant.repositoryCredentialUrls].map(normaliseRepoUrl)),
  ]
    .filter((url) => url !== '')
    .sort(byString);
  const destinations = [
    { name: IN_CLUSTER, namespace: tenant.namespace },
    ...[...new Set(tenant.externalEnvironmentIds)]
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
