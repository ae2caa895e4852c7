import { type CrKind, type Database, listApiCrMappingsOfKind } from '@gitops/db';
import type { Informer, KubeObject, Logger } from '@gitops/shared';
import type { Kysely } from 'kysely';

const PAGE_SIZE = 500;

/**
 * The safety net for missed delete events: every database mapping of `kind` whose CR is not in the informer
 * cache (or is there with another uid, i.e. deleted and re-created) has its `namespace/name` queued, so the
 * reconciler deletes its rows and announces that. Pages through the mappings, never all at once.
 * Returns how many were queued; does nothing before the informer has synced (an empty cache is not "gone").
 */
export async function enqueueMappingsMissingFromCache(
  db: Kysely<Database>,
  kind: CrKind,
  informer: Pick<Informer<KubeObject>, 'hasSynced' | 'get'>,
  enqueue: (key: string) => void,
  logger: Logger,
): Promise<number> {
  if (!informer.hasSynced()) return 0;
  let afterId: string | undefined;
  let found = 0;
  for (;;) {
    const page = await listApiCrMappingsOfKind(db, kind, { afterId, limit: PAGE_SIZE });
    for (const mapping of page) {
      if (informer.get(mapping.cr_namespace, mapping.cr_name)?.metadata.uid !== mapping.cr_uid) {
        found++;
        enqueue(`${mapping.cr_namespace}/${mapping.cr_name}`);
      }
    }
    if (page.length < PAGE_SIZE) break;
    afterId = page.at(-1)?.id;
  }
  if (found > 0)
    logger.info({ found, kind }, 'rows whose custom resource is missing from the cache enqueued');
  return found;
}

/** `namespace/name` of the owner of an operation when it is a CR of `kind` (to re-enqueue it). */
export function ownerKeyOf(
  operation:
    | { owner_kind: string | null; owner_namespace: string | null; owner_name: string | null }
    | undefined,
  kind: string,
): string | undefined {
  if (operation?.owner_kind !== kind || operation.owner_namespace === null || operation.owner_name === null) {
    return undefined;
  }
  return `${operation.owner_namespace}/${operation.owner_name}`;
}
