import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import type { ClusterUserRow, Database } from './database.ts';
import { deleteRowById, type IdPage, lockRowById, pageById, rowBy } from './keyed-rows.ts';

/** A tenant = one user namespace, identified by the namespace uid. */

/**
 * Returns the tenant of a namespace, creating it on first sight (and following a namespace rename), in one
 * statement: a tenant that exists under this name is read and not written (no row version, no row lock).
 */
export async function upsertClusterUser(
  db: Kysely<Database>,
  namespace: { uid: string; name: string },
): Promise<ClusterUserRow> {
  const { rows } = await sql<ClusterUserRow>`
    WITH existing AS (SELECT * FROM cluster_user WHERE namespace_uid = ${namespace.uid}),
    written AS (
      INSERT INTO cluster_user (namespace_uid, namespace_name)
      SELECT ${namespace.uid}, ${namespace.name}
      WHERE NOT EXISTS (SELECT 1 FROM existing WHERE namespace_name = ${namespace.name})
      ON CONFLICT (namespace_uid) DO UPDATE SET namespace_name = excluded.namespace_name
      RETURNING *
    )
    SELECT * FROM written
    UNION ALL
    SELECT * FROM existing WHERE NOT EXISTS (SELECT 1 FROM written)`.execute(db);
  const [tenant] = rows;
  if (!tenant) throw new Error(`the tenant of namespace ${namespace.name} was neither read nor written`);
  return tenant;
}

export const getClusterUser = rowBy('cluster_user', 'id');

export const getClusterUserByNamespaceUid = rowBy('cluster_user', 'namespace_uid');

/**
 * The tenant row, locked until `trx` ends (FOR UPDATE), as a tenant move (moveTenant) takes it first: a
 * transaction that takes it too does not interleave with a move.
 */
export const lockClusterUser = lockRowById('cluster_user');

/**
 * Deletes a tenant and, by cascade, all its rows (environments, credentials, applications, sync
 * operations, repository credentials, mappings). Its operations survive with owner_user_id NULL.
 */
export const deleteClusterUser = deleteRowById('cluster_user');

/** No application, sync, repository credential or External environment refers to the tenant. */
function nothingLeft(eb: ExpressionBuilder<Database, 'cluster_user'>) {
  const owned = (table: 'application' | 'sync_operation' | 'repository_credentials') =>
    eb.exists(
      eb
        .selectFrom(table)
        .select(sql<number>`1`.as('one'))
        .whereRef(`${table}.cluster_user_id`, '=', 'cluster_user.id'),
    );
  const external = eb.exists(
    eb
      .selectFrom('managed_environment')
      .select(sql<number>`1`.as('one'))
      .whereRef('managed_environment.cluster_user_id', '=', 'cluster_user.id')
      .where('managed_environment.kind', '=', 'External'),
  );
  return eb.not(
    eb.or([owned('application'), owned('sync_operation'), owned('repository_credentials'), external]),
  );
}

/** One page, in id order, of the tenants that own nothing any more (candidates for the tenant sweep). */
export async function listEmptyClusterUsers(db: Kysely<Database>, page: IdPage): Promise<ClusterUserRow[]> {
  return await pageById(db.selectFrom('cluster_user').selectAll().where(nothingLeft), page).execute();
}

/**
 * Deletes a tenant if it is still this namespace incarnation and still owns nothing (re-checked in the same
 * statement, so several backends may sweep at once). Returns whether it was deleted.
 */
export async function deleteEmptyClusterUser(
  db: Kysely<Database>,
  tenant: { id: string; namespaceUid: string },
): Promise<boolean> {
  const result = await db
    .deleteFrom('cluster_user')
    .where('id', '=', tenant.id)
    .where('namespace_uid', '=', tenant.namespaceUid)
    .where(nothingLeft)
    .executeTakeFirst();
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
