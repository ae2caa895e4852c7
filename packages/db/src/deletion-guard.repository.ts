/**
 * The deletion guard's rows (db/migrations/0014_deletion_guard.sql, docs/deletion-guard.md): the proof that an
 * application's GitOpsDeployment is gone (`application_deletion`, written with the row's delete), its prune
 * stamps (the deletion budget's count) and the Applications whose delete an agent holds.
 */
import type { Kysely, Selectable } from 'kysely';
import type * as Tables from './database.generated.ts';
import type { Database } from './database.ts';
import { rowBy, rowsBy } from './keyed-rows.ts';

export type ApplicationDeletionRow = Selectable<Tables.ApplicationDeletion>;
export type DeletionHoldRow = Selectable<Tables.ApplicationDeletionHold>;
/** Why an agent holds a delete: no proof, or the instance's or the tenant's deletion budget is spent. */
export type DeletionHoldReason = DeletionHoldRow['reason'];

/** The proof of an application row's deletion, if the backend wrote one. */
export const getApplicationDeletion = rowBy('application_deletion', 'application_id');

/** Stamps the proof as used: the agent lets the Application's cascading delete go ahead (counted in the budget). */
export async function markApplicationPruned(db: Kysely<Database>, applicationId: string): Promise<void> {
  await db
    .updateTable('application_deletion')
    .set({ pruned_at: new Date() })
    .where('application_id', '=', applicationId)
    .where('pruned_at', 'is', null)
    .execute();
}

/**
 * Applications an instance deleted with cascading since `since`: all of them, and those of one tenant.
 * One statement over the partial index of stamped proofs.
 */
export async function countPrunedSince(
  db: Kysely<Database>,
  engineInstanceId: string,
  clusterUserId: string | undefined,
  since: Date,
): Promise<{ instance: number; tenant: number }> {
  const row = await db
    .selectFrom('application_deletion')
    .select((eb) => [
      eb.fn.countAll<string>().as('instance'),
      eb.fn
        .count<string>('application_id')
        .filterWhere('cluster_user_id', '=', clusterUserId ?? null)
        .as('tenant'),
    ])
    .where('engine_instance_id', '=', engineInstanceId)
    .where('pruned_at', 'is not', null)
    .where('pruned_at', '>=', since)
    .executeTakeFirstOrThrow();
  return { instance: Number(row.instance), tenant: Number(row.tenant) };
}

/**
 * The proofs and holds of an application are over (its Applications are gone): the hold goes, and a proof
 * that was never used (there was no Application to delete) too; a stamped one stays for the budget's window.
 */
export async function settleApplicationDeletion(db: Kysely<Database>, applicationId: string): Promise<void> {
  await db.deleteFrom('application_deletion_hold').where('application_id', '=', applicationId).execute();
  await db
    .deleteFrom('application_deletion')
    .where('application_id', '=', applicationId)
    .where('pruned_at', 'is', null)
    .execute();
}

/** Stamped proofs older than `before` (past every budget window) are deleted. Returns how many. */
export async function deletePrunedApplicationDeletions(
  db: Kysely<Database>,
  engineInstanceId: string,
  before: Date,
): Promise<number> {
  const result = await db
    .deleteFrom('application_deletion')
    .where('engine_instance_id', '=', engineInstanceId)
    .where('pruned_at', '<', before)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export const getDeletionHold = rowBy('application_deletion_hold', 'application_id');

/** Records a held delete (kept as it is when one is recorded already). */
export async function holdDeletion(
  db: Kysely<Database>,
  hold: {
    applicationId: string;
    engineInstanceId: string;
    clusterUserId: string | undefined;
    applicationName: string;
    reason: DeletionHoldReason;
    message: string;
  },
): Promise<void> {
  await db
    .insertInto('application_deletion_hold')
    .values({
      application_id: hold.applicationId,
      engine_instance_id: hold.engineInstanceId,
      cluster_user_id: hold.clusterUserId ?? null,
      application_name: hold.applicationName,
      reason: hold.reason,
      message: hold.message,
    })
    .onConflict((oc) => oc.column('application_id').doNothing())
    .execute();
}

export async function releaseDeletionHold(db: Kysely<Database>, applicationId: string): Promise<void> {
  await db.deleteFrom('application_deletion_hold').where('application_id', '=', applicationId).execute();
}

/**
 * Whether a spent budget holds deletes now: unconfirmed holds because the instance's budget is spent, or the
 * tenant's. Either stops further deletes of that scope until they are confirmed or no longer needed.
 */
export async function spentDeletionBudgets(
  db: Kysely<Database>,
  engineInstanceId: string,
  clusterUserId: string | undefined,
): Promise<{ instance: boolean; tenant: boolean }> {
  const rows = await db
    .selectFrom('application_deletion_hold')
    .select(['reason', 'cluster_user_id'])
    .where('engine_instance_id', '=', engineInstanceId)
    .where('confirmed_at', 'is', null)
    .where((eb) =>
      eb.or([
        eb('reason', '=', 'InstanceBudget'),
        eb.and([eb('reason', '=', 'TenantBudget'), eb('cluster_user_id', '=', clusterUserId ?? null)]),
      ]),
    )
    .limit(2)
    .execute();
  return {
    instance: rows.some((r) => r.reason === 'InstanceBudget'),
    tenant: rows.some((r) => r.reason === 'TenantBudget'),
  };
}

/** The held deletes of an instance, oldest first. */
export const listDeletionHolds = rowsBy('application_deletion_hold', 'engine_instance_id', [
  'held_at',
  'application_id',
]);

/** An operator's word: every unconfirmed held delete of the instance may go ahead. Returns those confirmed. */
export async function confirmDeletionHolds(
  db: Kysely<Database>,
  engineInstanceId: string,
): Promise<DeletionHoldRow[]> {
  return await db
    .updateTable('application_deletion_hold')
    .set({ confirmed_at: new Date() })
    .where('engine_instance_id', '=', engineInstanceId)
    .where('confirmed_at', 'is', null)
    .returningAll()
    .execute();
}
