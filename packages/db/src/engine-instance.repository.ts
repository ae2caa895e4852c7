import type { Kysely } from 'kysely';
import type { Database, EngineInstanceRow } from './database.ts';

export interface EngineInstanceInput {
  /** Stable identity from configuration. */
  name: string;
  namespaceName: string;
  namespaceUid: string;
  clusterIdentity: string;
}

/**
 * Registers the engine instance a cluster-agent serves (at agent start). Keyed by the configured name, so
 * a re-created Argo CD namespace (new uid) keeps the same row and everything that points at it.
 */
export async function upsertEngineInstance(
  db: Kysely<Database>,
  input: EngineInstanceInput,
): Promise<EngineInstanceRow> {
  return await db
    .insertInto('engine_instance')
    .values({
      name: input.name,
      namespace_name: input.namespaceName,
      namespace_uid: input.namespaceUid,
      cluster_identity: input.clusterIdentity,
    })
    .onConflict((conflict) =>
      conflict.column('name').doUpdateSet(({ ref }) => ({
        namespace_name: ref('excluded.namespace_name'),
        namespace_uid: ref('excluded.namespace_uid'),
        cluster_identity: ref('excluded.cluster_identity'),
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function getEngineInstance(
  db: Kysely<Database>,
  id: string,
): Promise<EngineInstanceRow | undefined> {
  return await db.selectFrom('engine_instance').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function getEngineInstanceByName(
  db: Kysely<Database>,
  name: string,
): Promise<EngineInstanceRow | undefined> {
  return await db.selectFrom('engine_instance').selectAll().where('name', '=', name).executeTakeFirst();
}

/**
 * Registers the engine instance at process start; the backend and the cluster-agent both call this
 * (docs/contracts/core-pipeline.md). Idempotent: no write when the row already names this namespace and
 * uid, and an existing `cluster_identity` is kept, so the two processes never overwrite each other's;
 * `clusterIdentity` is only called when there is none yet.
 */
export async function ensureEngineInstance(
  db: Kysely<Database>,
  instance: Omit<EngineInstanceInput, 'clusterIdentity'>,
  clusterIdentity: () => Promise<string>,
): Promise<EngineInstanceRow> {
  const existing = await getEngineInstanceByName(db, instance.name);
  if (
    existing &&
    existing.namespace_name === instance.namespaceName &&
    existing.namespace_uid === instance.namespaceUid
  ) {
    return existing;
  }
  return await upsertEngineInstance(db, {
    ...instance,
    clusterIdentity: existing?.cluster_identity ?? (await clusterIdentity()),
  });
}
