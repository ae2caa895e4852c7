/**
 * Tenants (cluster_user rows, one per namespace uid) outlive their namespace: deleting a namespace deletes
 * its custom resources, whose reconciles delete their rows, but the tenant row itself (and its Workspace
 * environment) stayed for ever. This sweep removes a tenant once its namespace is gone (or re-created under
 * another uid, i.e. another tenant) and nothing of it is left in the database. Paged; safe to run from
 * several backends at once (each delete re-checks emptiness in the same statement).
 */
import type { ClusterUserRow, Database } from '@gitops/db';
import { isNotFound, type KubeConfig, type Logger } from '@gitops/shared';
import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import { readNamespaceUid } from './kube-reads.ts';

const PAGE_SIZE = 200;

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

/** Whether the namespace of this tenant still exists with the tenant's uid. */
async function namespaceStillThere(kc: KubeConfig, tenant: ClusterUserRow, signal: AbortSignal) {
  try {
    return (await readNamespaceUid(kc, tenant.namespace_name, signal)) === tenant.namespace_uid;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

/** Deletes empty tenants whose namespace is gone. Returns how many were deleted. */
export async function sweepDeletedTenants(
  db: Kysely<Database>,
  kc: KubeConfig,
  signal: AbortSignal,
  logger: Logger,
): Promise<number> {
  let deleted = 0;
  let afterId: string | undefined;
  for (;;) {
    let query = db.selectFrom('cluster_user').selectAll().where(nothingLeft).orderBy('id').limit(PAGE_SIZE);
    if (afterId !== undefined) query = query.where('id', '>', afterId);
    const page = await query.execute();
    for (const tenant of page) {
      if (signal.aborted) return deleted;
      if (await namespaceStillThere(kc, tenant, signal)) continue;
      const gone = await db
        .deleteFrom('cluster_user')
        .where('id', '=', tenant.id)
        .where('namespace_uid', '=', tenant.namespace_uid)
        .where(nothingLeft)
        .executeTakeFirst();
      if (gone.numDeletedRows > 0n) {
        deleted++;
        logger.info(
          { tenant: tenant.id, namespace: tenant.namespace_name },
          'tenant removed: its namespace is gone and nothing of it is left',
        );
      }
    }
    if (page.length < PAGE_SIZE) return deleted;
    afterId = page.at(-1)?.id;
  }
}
