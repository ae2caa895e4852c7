/**
 * Reads the agent needs that the @gitops/db repositories do not offer: everything one tenant has on one
 * engine instance (for its AppProject), and the tenants/ids present, for the drift resync.
 */
import type { Database } from '@gitops/db';
import type { Kysely } from 'kysely';
import type { TenantResources } from './app-project.render.ts';

/**
 * What the AppProject of `clusterUserId` is computed from, or `undefined` when the tenant row is gone.
 * Application repo URLs are read from the stored specs; a malformed spec contributes nothing (its own
 * operation fails and reports it).
 */
export async function readTenantResources(
  db: Kysely<Database>,
  clusterUserId: string,
  engineInstanceId: string,
): Promise<TenantResources | undefined> {
  const tenant = await db
    .selectFrom('cluster_user')
    .select('namespace_name')
    .where('id', '=', clusterUserId)
    .executeTakeFirst();
  if (!tenant) return undefined;
  const [applications, credentials, environments] = await Promise.all([
    db
      .selectFrom('application')
      .select('spec')
      .where('cluster_user_id', '=', clusterUserId)
      .where('engine_instance_id', '=', engineInstanceId)
      .execute(),
    db
      .selectFrom('repository_credentials')
      .select('normalized_repository_url')
      .where('cluster_user_id', '=', clusterUserId)
      .where('engine_instance_id', '=', engineInstanceId)
      .execute(),
    db
      .selectFrom('managed_environment')
      .select('id')
      .where('cluster_user_id', '=', clusterUserId)
      .where('kind', '=', 'External')
      .orderBy('id')
      .execute(),
  ]);
  const applicationRepoUrls: string[] = [];
  for (const { spec } of applications) {
    const repoURL = (spec as { source?: { repoURL?: unknown } } | null)?.source?.repoURL;
    if (typeof repoURL === 'string' && repoURL !== '') applicationRepoUrls.push(repoURL);
  }
  return {
    clusterUserId,
    namespace: tenant.namespace_name,
    applicationRepoUrls,
    repositoryCredentialUrls: credentials.map((c) => c.normalized_repository_url),
    externalEnvironmentIds: environments.map((e) => e.id),
  };
}

/** Tenants with at least one application or repository credential on the engine instance (resync). */
export async function listTenantsOfEngineInstance(
  db: Kysely<Database>,
  engineInstanceId: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('application')
    .select('cluster_user_id')
    .where('engine_instance_id', '=', engineInstanceId)
    .union(
      db
        .selectFrom('repository_credentials')
        .select('cluster_user_id')
        .where('engine_instance_id', '=', engineInstanceId),
    )
    .execute();
  return rows.map((row) => row.cluster_user_id);
}

/** Which of `ids` exist as application rows of the engine instance. */
export async function existingApplicationIds(
  db: Kysely<Database>,
  engineInstanceId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('application')
    .select('id')
    .where('engine_instance_id', '=', engineInstanceId)
    .where('id', 'in', ids)
    .execute();
  return new Set(rows.map((row) => row.id));
}
