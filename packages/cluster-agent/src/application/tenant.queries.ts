/**
 * What the AppProject of a tenant is computed from, read through the @gitops/db repositories: everything
 * one tenant has on one engine instance.
 */
import { type Db, listRepositoryCredentialUrlsOfEngineInstance, readTenantProjectRows } from '@gitops/db';
import { normalizeRepositoryUrl } from '@gitops/shared';
import { allowsClusterResources } from '../argocd.ts';
import type { TenantResources } from './app-project.render.ts';
import { chartRepoUrls, requestsNamespaceCreation, sourceRepoUrls } from './application.render.ts';

/**
 * What the AppProject of `clusterUserId` is computed from, or `undefined` when the tenant row is gone.
 * Application repo URLs are read from the stored specs (every source of one with several); a malformed spec
 * contributes nothing (its own operation fails and reports it).
 */
export async function readTenantResources(
  db: Db,
  clusterUserId: string,
  engineInstanceId: string,
): Promise<TenantResources | undefined> {
  const rows = await readTenantProjectRows(db, clusterUserId, engineInstanceId);
  if (!rows) return undefined;
  // Only the environments whose cluster Secret is on this instance are read: a tenant that moved away keeps none
  // here (so its project goes once its Applications are released).
  const { applications: specs, repositoryCredentialUrls, clusterSecretEnvironments: environments } = rows;
  // Other tenants' credentials matter only for a tenant that deploys charts: the AppProjects of the others
  // (most, and every one in a drain's recomputes) are built without reading every credential of the instance.
  const credentialUrlsHere = specs.some((s) => chartRepoUrls(s.spec).length > 0)
    ? await listRepositoryCredentialUrlsOfEngineInstance(db, engineInstanceId)
    : [];
  const withheld = withheldChartRepositories(
    specs.map((s) => s.spec),
    repositoryCredentialUrls,
    credentialUrlsHere,
  );
  const applicationRepoUrls: string[] = [];
  const namespaceCreatingEnvironmentIds = new Set<string>();
  for (const { spec, managedEnvironmentId } of specs) {
    // Every source's repository, exactly as a single source's (issue 35).
    applicationRepoUrls.push(...sourceRepoUrls(spec));
    if (managedEnvironmentId !== null && requestsNamespaceCreation(spec))
      namespaceCreatingEnvironmentIds.add(managedEnvironmentId);
  }
  return {
    clusterUserId,
    namespace: rows.namespaceName,
    applicationRepoUrls,
    withheldRepoUrls: [...withheld],
    repositoryCredentialUrls,
    clusterSecretEnvironmentIds: environments.map((e) => e.id),
    // An environment without stored credentials has no cluster Secret: nothing is allowed through it.
    clusterScopedEnvironmentIds: environments
      .filter(
        (e) =>
          e.namespaces !== null &&
          allowsClusterResources({
            namespaces: e.namespaces,
            clusterResources: e.cluster_resources === true,
          }),
      )
      .map((e) => e.id),
    // Only environments behind a cluster Secret count (an in-cluster Workspace is not listed: its namespace
    // exists; one with credentials is the tenant's namespace on its cluster, which exists too).
    namespaceCreatingEnvironmentIds: environments
      .filter((e) => e.namespaces !== null && namespaceCreatingEnvironmentIds.has(e.id))
      .map((e) => e.id),
  };
}

/**
 * The chart repositories (Helm repositories, OCI registries; normalised URLs) the tenant's AppProject must not
 * list although its applications use them: those another tenant of this engine instance holds credentials for
 * (`credentialUrlsHere`) and the tenant does not (`ownCredentialUrls`). Argo CD's repo-server (v3.5
 * util/helm `ExtractChart`) keeps a downloaded chart in a cache keyed by repository URL, chart and version
 * only, and serves it again without asking the repository, whoever's Application asks; Git, by contrast, asks
 * the server with the Application's own credentials on every refresh. So a private chart is used only
 * with the tenant's own credentials, and Argo CD refuses the others' Applications as not permitted by their
 * project (docs/api.md). Pure.
 */
export function withheldChartRepositories(
  specs: readonly unknown[],
  ownCredentialUrls: readonly string[],
  credentialUrlsHere: readonly string[],
): Set<string> {
  const own = new Set(ownCredentialUrls);
  const privateHere = new Set(credentialUrlsHere);
  return new Set(
    specs
      .flatMap((spec) => chartRepoUrls(spec).map(normalizeRepositoryUrl))
      .filter((url) => privateHere.has(url) && !own.has(url)),
  );
}
