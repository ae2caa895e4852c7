import { type Kysely, sql } from 'kysely';
import type { Database, OperationRow } from './database.ts';
import { withUnheardInstances } from './operation-relay.repository.ts';
import type { CrKind, OperationResourceType } from './schema-values.ts';

/**
 * Operations looked up by the custom resource that announced them (owner_kind/owner_uid): what the agent
 * made of a CR's work, for the conditions and Events the backend reports on it.
 */

/**
 * The operations on `resourceType` owned by the CR `owner` (optionally for one resource). With `resourceId`
 * the query uses the (resource_type, resource_id) index; without it (a deleting CR whose rows are gone) it
 * filters on the owner alone.
 */
export async function listOperationsOfOwner(
  db: Kysely<Database>,
  owner: { kind: CrKind; uid: string },
  resourceType: OperationResourceType,
  resourceId?: string,
): Promise<OperationRow[]> {
  let query = db
    .selectFrom('operation')
    .selectAll()
    .where('owner_kind', '=', owner.kind)
    .where('owner_uid', '=', owner.uid)
    .where('resource_type', '=', resourceType);
  if (resourceId !== undefined) query = query.where('resource_id', '=', resourceId);
  return await query.execute();
}

/** The newest operation on `resourceType` owned by the CR incarnation `ownerUid`. */
export async function getLatestOperationOfOwner(
  db: Kysely<Database>,
  ownerUid: string,
  resourceType: OperationResourceType,
): Promise<OperationRow | undefined> {
  return await db
    .selectFrom('operation')
    .selectAll()
    .where('owner_uid', '=', ownerUid)
    .where('resource_type', '=', resourceType)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/**
 * The owners (namespace, name) of kind `ownerKind` of operations that have waited longer than `olderThanMs`
 * for an engine instance no agent listens for now: their CRs say the instance is away.
 */
export async function listOwnersWaitingForAbsentAgents(
  db: Kysely<Database>,
  ownerKind: CrKind,
  olderThanMs: number,
): Promise<{ namespace: string; name: string }[]> {
  const rows = await withUnheardInstances(db)
    .selectFrom('operation as o')
    .select(['o.owner_namespace', 'o.owner_name'])
    .distinct()
    .where('o.state', '=', 'Waiting')
    .where('o.owner_kind', '=', ownerKind)
    .where('o.created_at', '<', sql<Date>`now() - make_interval(secs => ${olderThanMs / 1000})`)
    .where('o.engine_instance_id', 'in', (eb) => eb.selectFrom('unheard').select('unheard.id'))
    .execute();
  return rows.flatMap((r) =>
    r.owner_namespace !== null && r.owner_name !== null
      ? [{ namespace: r.owner_namespace, name: r.owner_name }]
      : [],
  );
}
