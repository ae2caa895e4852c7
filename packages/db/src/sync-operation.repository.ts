import { type Kysely, sql } from 'kysely';
import type { Database, SyncOperationRow } from './database.ts';
import { deleteRowById, rowBy, rowsBy, updateRowById } from './keyed-rows.ts';
import type { SyncDesiredState, SyncOutcome } from './schema-values.ts';

/** One row per GitOpsDeploymentSyncRun. */

/**
 * `operation.info[].name` carrying the sync_operation id in every sync the agent requests from Argo CD, which
 * copies it into `status.operationState.operation` (docs/contracts/core-pipeline.md).
 */
export const SYNC_OPERATION_INFO = 'gitops-sync-operation-id';

/** The sync_operation id an Argo CD `operation` (requested, or its copy in `operationState`) carries, if any. */
export function syncOperationIdOf(operation: unknown): string | undefined {
  if (typeof operation !== 'object' || operation === null) return undefined;
  const info = (operation as { info?: unknown }).info;
  if (!Array.isArray(info)) return undefined;
  for (const item of info as unknown[]) {
    if (typeof item !== 'object' || item === null) continue;
    const { name, value } = item as { name?: unknown; value?: unknown };
    if (name === SYNC_OPERATION_INFO && typeof value === 'string') return value;
  }
  return undefined;
}

export interface SyncOperationInput {
  clusterUserId: string;
  /** NULL while the referenced GitOpsDeployment does not exist. */
  applicationId: string | null;
  deploymentName: string;
  revision: string;
}

export async function insertSyncOperation(
  db: Kysely<Database>,
  input: SyncOperationInput,
): Promise<SyncOperationRow> {
  return await db
    .insertInto('sync_operation')
    .values({
      cluster_user_id: input.clusterUserId,
      application_id: input.applicationId,
      deployment_name: input.deploymentName,
      revision: input.revision,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export const getSyncOperation = rowBy('sync_operation', 'id');

/** 'Terminated' asks the agent to terminate the running Argo CD operation (SyncRun deleted). */
export async function setSyncOperationDesiredState(
  db: Kysely<Database>,
  id: string,
  desiredState: SyncDesiredState,
): Promise<SyncOperationRow | undefined> {
  return await updateRowById(db, 'sync_operation', id, { desired_state: desiredState });
}

/** What Argo CD reports about a sync (`status.operationState`), as the row keeps it. */
export interface SyncProgress {
  /** Argo CD's phase (Running, Terminating, Succeeded, Failed, Error); null: not reported (yet). */
  argocdPhase: string | null;
  /** syncResult.revision ("" until known). */
  syncedRevision: string;
  startedAt: Date | null;
  finishedAt: Date | null;
  /** Argo CD's message, secrets already scrubbed. */
  argocdMessage: string;
}

/** The row's progress columns. */
export function syncProgressOf(row: SyncOperationRow): SyncProgress {
  return {
    argocdPhase: row.argocd_phase,
    syncedRevision: row.synced_revision,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    argocdMessage: row.argocd_message,
  };
}

/** True when two reports say the same (dates compared by time). */
export function sameSyncProgress(a: SyncProgress, b: SyncProgress): boolean {
  const time = (d: Date | null) => (d === null ? null : d.getTime());
  return (
    a.argocdPhase === b.argocdPhase &&
    a.syncedRevision === b.syncedRevision &&
    time(a.startedAt) === time(b.startedAt) &&
    time(a.finishedAt) === time(b.finishedAt) &&
    a.argocdMessage === b.argocdMessage
  );
}

const progressColumns = (progress: SyncProgress) => ({
  argocd_phase: progress.argocdPhase,
  synced_revision: progress.syncedRevision,
  started_at: progress.startedAt,
  finished_at: progress.finishedAt,
  argocd_message: progress.argocdMessage,
});

/**
 * Records what Argo CD reports about a sync that still runs (agent). Callers write only a changed report:
 * the table's trigger NOTIFYs gitops_sync_operation_changed and the backend rewrites the SyncRun's status.
 * A finished row is never changed.
 */
export async function recordSyncProgress(
  db: Kysely<Database>,
  id: string,
  progress: SyncProgress,
): Promise<SyncOperationRow | undefined> {
  return await db
    .updateTable('sync_operation')
    .set(progressColumns(progress))
    .where('id', '=', id)
    .where('outcome', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** Records how the sync ended (agent), with Argo CD's last report of it when there is one. */
export async function setSyncOperationOutcome(
  db: Kysely<Database>,
  id: string,
  outcome: SyncOutcome,
  message: string,
  progress?: SyncProgress,
): Promise<SyncOperationRow | undefined> {
  return await updateRowById(db, 'sync_operation', id, {
    outcome,
    outcome_message: message,
    ...(progress ? progressColumns(progress) : {}),
  });
}

/** The outcome message of a sync whose application was deleted before it ended (endSyncsOfApplication). */
export const SYNC_APPLICATION_DELETED_MESSAGE =
  "the GitOpsDeployment's Argo CD Application was deleted before the sync ended";

/**
 * Ends the unfinished syncs of an application whose row is being deleted (backend, in the transaction that
 * deletes it): none of them can run any more, and once the row is gone (application_id SET NULL) no engine
 * instance may be left to say so: the instance told about a sync sees it through the application or the
 * tenant, and a tenant that moves afterwards takes along only the syncs of its applications. One terminated
 * before it reached Argo CD is Terminated; every other one is Error. Argo CD's own report of a sync it runs
 * on the Application is not waited for: the agent terminates or withdraws it before the delete.
 */
export async function endSyncsOfApplication(
  db: Kysely<Database>,
  applicationId: string,
): Promise<SyncOperationRow[]> {
  return await db
    .updateTable('sync_operation')
    .set({
      outcome: sql<SyncOutcome>`case when desired_state = 'Terminated' and requested_at is null
        then 'Terminated' else 'Error' end`,
      outcome_message: SYNC_APPLICATION_DELETED_MESSAGE,
      finished_at: sql<Date>`coalesce(finished_at, now())`,
    })
    .where('application_id', '=', applicationId)
    .where('outcome', 'is', null)
    .returningAll()
    .execute();
}

/** An application's sync operations in creation order (they run strictly one after another). */
export const listSyncOperationsOfApplication = rowsBy('sync_operation', 'application_id', [
  'created_at',
  'id',
]);

/**
 * Records that the agent requested the sync from Argo CD on the Application with uid `applicationUid` (once
 * per Application: a row already requested on it keeps its time), so a sync is requested once, also across
 * agent restarts. A row requested on an Application that has since been replaced (another uid) is requested
 * again: the time and the uid become the new request's.
 */
export async function markSyncOperationRequested(
  db: Kysely<Database>,
  id: string,
  applicationUid: string,
): Promise<void> {
  await db
    .updateTable('sync_operation')
    .set({ requested_at: new Date(), requested_application_uid: applicationUid, updated_at: new Date() })
    .where('id', '=', id)
    .where((eb) =>
      eb.or([
        eb('requested_at', 'is', null),
        eb('requested_application_uid', 'is distinct from', applicationUid),
      ]),
    )
    .execute();
}

export const deleteSyncOperation = deleteRowById('sync_operation');
