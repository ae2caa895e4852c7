/**
 * The periodic drift resync (docs/data-model.md): every Argo CD object we own is compared with the
 * database. It only queues resource keys, in pages; the resource queue does the comparing (owned fields
 * only) and the fixing — missing → create, different → fix, no row → delete — and counts what it corrected.
 * Rows and AppProjects found matching earlier and unchanged on both sides since (`isSettled`) are not
 * queued, so an idle pass reads the rows in pages and nothing more (docs/performance.md).
 */
import {
  type ApplicationRow,
  type Db,
  existingApplicationIds,
  listApplicationsOfEngineInstance,
  listClusterUserIdsOfEngineInstance,
} from '@gitops/db';
import type { Informer, KubeObject, Logger } from '@gitops/shared';
import { databaseIdOf } from '../argocd.ts';

const PAGE_SIZE = 200;

export interface DriftResyncOptions {
  db: Db;
  logger: Logger;
  namespace: string;
  engineInstanceId: string;
  applications: Informer<KubeObject>;
  appProjects: Informer<KubeObject>;
  enqueueResource(resourceType: 'Application' | 'AppProject', resourceId: string): void;
  /** Rows found matching Argo CD and unchanged since (neither the row nor our fields of the live object). */
  isSettled?: (row: ApplicationRow) => boolean;
  /** The same for a tenant's AppProject (its live owned fields unchanged since it was found matching). */
  isProjectSettled?: (clusterUserId: string) => boolean;
}

/** One full pass. Returns the number of keys queued. */
export async function resyncOnce(options: DriftResyncOptions, signal: AbortSignal): Promise<number> {
  const { db, engineInstanceId } = options;
  let queued = 0;
  /** Tenants with an application row that is queued: their AppProject is looked at again too. */
  const unsettledTenants = new Set<string>();
  // Rows → their Applications (missing or different ones are fixed by the reconcile).
  let afterId: string | undefined;
  for (;;) {
    const page = await listApplicationsOfEngineInstance(db, engineInstanceId, { afterId, limit: PAGE_SIZE });
    for (const row of page) {
      if (options.isSettled?.(row)) continue;
      options.enqueueResource('Application', row.id);
      unsettledTenants.add(row.cluster_user_id);
      queued++;
    }
    if (page.length < PAGE_SIZE || signal.aborted) break;
    afterId = page[page.length - 1]!.id;
  }
  // Live Applications without a row (orphans).
  const liveIds = [
    ...new Set(
      options.applications
        .list(options.namespace)
        .map(databaseIdOf)
        .filter((id) => id !== undefined),
    ),
  ];
  for (let i = 0; i < liveIds.length && !signal.aborted; i += PAGE_SIZE) {
    const batch = liveIds.slice(i, i + PAGE_SIZE);
    const existing = await existingApplicationIds(db, engineInstanceId, batch);
    for (const id of batch) {
      if (existing.has(id)) continue;
      options.enqueueResource('Application', id);
      queued++;
    }
  }
  // AppProjects: of every tenant with rows here, and every live one (deleted when its tenant has nothing left).
  const tenants = new Set(await listClusterUserIdsOfEngineInstance(db, engineInstanceId));
  for (const project of options.appProjects.list(options.namespace)) {
    const tenant = databaseIdOf(project);
    if (tenant) tenants.add(tenant);
  }
  for (const tenant of tenants) {
    if (!unsettledTenants.has(tenant) && options.isProjectSettled?.(tenant)) continue;
    options.enqueueResource('AppProject', tenant);
    queued++;
  }
  options.logger.debug({ queued }, 'drift resync queued');
  return queued;
}
