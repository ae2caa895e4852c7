import type { Kysely } from 'kysely';
import type { Database, OperationRow } from './database.ts';
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
