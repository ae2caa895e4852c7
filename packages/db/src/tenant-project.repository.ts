/**
 * What a tenant's AppProject is computed from, read in one statement: the agent recomputes a project on
 * every change that concerns it (the tenant's first application, a credential, an environment, a move).
 */
import type { Kysely } from 'kysely';
import { jsonArrayFrom } from 'kysely/helpers/postgres';
import type { Database, JsonValue } from './database.ts';
import { clusterSecretEnvironmentIdsQuery } from './managed-environment.repository.ts';

/** What a tenant's AppProject on one engine instance is computed from (`readTenantProjectRows`). */
export interface TenantProjectRows {
  namespaceName: string;
  /** The stored specs of its applications on the instance, with the environment each deploys through. */
  applications: { spec: JsonValue; managedEnvironmentId: string | null }[];
  /** The normalised URLs of its repository credentials on the instance, in id order. */
  repositoryCredentialUrls: string[];
  /**
   * Its environments whose cluster Secret belongs on the instance (clusterSecretEnvironmentIdsQuery), with
   * their credentials' scope, in id order.
   */
  clusterSecretEnvironments: { id: string; namespaces: string[] | null; cluster_resources: boolean | null }[];
}

/**
 * Agent: everything one tenant has on one engine instance that its AppProject is computed from, in one
 * statement (undefined when the tenant row is gone).
 */
export async function readTenantProjectRows(
  db: Kysely<Database>,
  clusterUserId: string,
  engineInstanceId: string,
): Promise<TenantProjectRows | undefined> {
  const row = await db
    .selectFrom('cluster_user as u')
    .where('u.id', '=', clusterUserId)
    .select((eb) => [
      'u.namespace_name',
      jsonArrayFrom(
        eb
          .selectFrom('application as a')
          .select(['a.spec', 'a.managed_environment_id as managedEnvironmentId'])
          .whereRef('a.cluster_user_id', '=', 'u.id')
          .where('a.engine_instance_id', '=', engineInstanceId),
      ).as('applications'),
      jsonArrayFrom(
        eb
          .selectFrom('repository_credentials as r')
          .select('r.normalized_repository_url')
          .whereRef('r.cluster_user_id', '=', 'u.id')
          .where('r.engine_instance_id', '=', engineInstanceId)
          .orderBy('r.id'),
      ).as('credentials'),
      jsonArrayFrom(
        eb
          .selectFrom('managed_environment as e')
          .leftJoin('cluster_credentials as c', 'c.id', 'e.cluster_credentials_id')
          .select(['e.id', 'c.namespaces', 'c.cluster_resources'])
          .where('e.id', 'in', clusterSecretEnvironmentIdsQuery(db, { clusterUserId, engineInstanceId }))
          .orderBy('e.id'),
      ).as('environments'),
    ])
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    namespaceName: row.namespace_name,
    applications: row.applications,
    repositoryCredentialUrls: row.credentials.map((c) => c.normalized_repository_url),
    clusterSecretEnvironments: row.environments,
  };
}
