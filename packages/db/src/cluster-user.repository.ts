import type { Kysely } from 'kysely';
import type { ClusterUserRow, Database } from './database.ts';

/** A tenant = one user namespace, identified by the namespace uid. */

/** Returns the tenant of a namespace, creating it on first sight (and following a namespace rename). */
export async function upsertClusterUser(
  db: Kysely<Database>,
  namespace: { uid: string; name: string },
): Promise<ClusterUserRow> {
  return await db
    .insertInto('cluster_user')
    .values({ namespace_uid: namespace.uid, namespace_name: namespace.name })
    .onConflict((conflict) =>
      conflict
        .column('namespace_uid')
        .doUpdateSet(({ ref }) => ({ namespace_name: ref('excluded.namespace_name') })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function getClusterUser(db: Kysely<Database>, id: string): Promise<ClusterUserRow | undefined> {
  return await db.selectFrom('cluster_user').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function getClusterUserByNamespaceUid(
  db: Kysely<Database>,
  namespaceUid: string,
): Promise<ClusterUserRow | undefined> {
  return await db
    .selectFrom('cluster_user')
    .selectAll()
    .where('namespace_uid', '=', namespaceUid)
    .executeTakeFirst();
}

/**
 * Deletes a tenant and, by cascade, all its rows (environments, credentials, applications, sync
 * operations, repository credentials, mappings). Its operations survive with owner_user_id NULL.
 */
export async function deleteClusterUser(db: Kysely<Database>, id: string): Promise<boolean> {
  const result = await db.deleteFrom('cluster_user').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Tenants with at least one application or repository credential on the engine instance (no duplicates). */
export async function listClusterUserIdsOfEngineInstance(
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
