/**
 * Tenants (cluster_user rows, one per namespace uid) outlive their namespace: deleting a namespace deletes
 * its custom resources, whose reconciles delete their rows, but the tenant row itself (and its Workspace
 * environment) stayed for ever. This sweep removes a tenant once its namespace is gone (or re-created under
 * another uid, i.e. another tenant) and nothing of it is left in the database. Paged; safe to run from
 * several backends at once (each delete re-checks emptiness in the same statement).
 */
import {
  type ClusterUserRow,
  type Database,
  deleteEmptyClusterUser,
  listEmptyClusterUsers,
} from '@gitops/db';
import { type KubeConfig, type Logger, periodicFeature } from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { BackendContext, BackendFeature } from './backend-feature.ts';
import { readNamespaceUidIfExists } from './kube-reads.ts';

const PAGE_SIZE = 200;

/** Whether the namespace of this tenant still exists with the tenant's uid. */
async function namespaceStillThere(kc: KubeConfig, tenant: ClusterUserRow, signal: AbortSignal) {
  return (await readNamespaceUidIfExists(kc, tenant.namespace_name, signal)) === tenant.namespace_uid;
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
    const page = await listEmptyClusterUsers(db, { afterId, limit: PAGE_SIZE });
    for (const tenant of page) {
      if (signal.aborted) return deleted;
      if (await namespaceStillThere(kc, tenant, signal)) continue;
      if (await deleteEmptyClusterUser(db, { id: tenant.id, namespaceUid: tenant.namespace_uid })) {
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

/** The tenant sweep as a backend feature: now and every resync period (jittered). */
export function createTenantSweepFeature(ctx: BackendContext): BackendFeature {
  return periodicFeature(
    'tenant-sweep',
    'tenant sweep',
    ctx.config.resyncIntervalMs,
    (signal) => sweepDeletedTenants(ctx.db, ctx.kc, signal, ctx.logger),
    { logger: ctx.logger, jitter: 0.25 },
  );
}
