/**
 * The database side of a GitOpsDeploymentSyncRun reconcile: one transaction writes the sync_operation row,
 * its api_cr_mapping and the SyncOperation operation that announces it (or, for a deleted SyncRun whose
 * sync still runs, desired_state Terminated + an operation). Repositories come from @gitops/db.
 */
import {
  type ApiCrMappingRow,
  type ApplicationRow,
  type Database,
  deleteSyncOperation,
  findApiCrMappingsByName,
  getApiCrMappingByUid,
  getSyncOperation,
  insertApiCrMapping,
  insertSyncOperation,
  lockApplication,
  type OperationRow,
  type SyncOperationRow,
  setSyncOperationDesiredState,
} from '@gitops/db';
import type { Kysely, Transaction } from 'kysely';
import { SyncRunCr } from '../kinds.ts';

/** The identity of one SyncRun incarnation (a re-created one has a new uid). */
export interface SyncRunIdentity {
  namespace: string;
  name: string;
  uid: string;
}

export type RequestSyncResult =
  | { created: true; syncOperation: SyncOperationRow; operation: OperationRow }
  /** Another reconcile (or replica) requested it first. */
  | { created: false; syncOperation: SyncOperationRow | undefined }
  /** The application row was deleted since the caller read it: nothing requested (look at the parent again). */
  | { created: false; applicationGone: true };

/**
 * Requests the one sync of a SyncRun: sync_operation + mapping + operation in one transaction. A SyncRun
 * that already has a mapping keeps it (updates never create a second sync).
 */
export async function requestSync(
  db: Kysely<Database>,
  input: {
    syncRun: SyncRunIdentity;
    namespaceUid: string;
    application: ApplicationRow;
    deploymentName: string;
    revision: string;
  },
): Promise<RequestSyncResult> {
  const { syncRun, application } = input;
  return await db.transaction().execute(async (trx) => {
    await SyncRunCr.lock(trx, syncRun.namespace, syncRun.name);
    const existing = await getApiCrMappingByUid(trx, syncRun.uid);
    if (existing) {
      return {
        created: false,
        syncOperation: existing.sync_operation_id
          ? await getSyncOperation(trx, existing.sync_operation_id)
          : undefined,
      };
    }
    // The row as it is now, locked: a tenant move commits before (then this is the row as it moved, and the
    // sync is announced to the new instance) or waits for this transaction (then it sees the sync and hands
    // it to the new instance itself). Announced from the row read before the move, the sync would go to the
    // instance the tenant left, which leaves it to the new one, which was never told: it would never run.
    const current = await lockApplication(trx, application.id);
    if (!current) return { created: false, applicationGone: true };
    const syncOperation = await insertSyncOperation(trx, {
      clusterUserId: current.cluster_user_id,
      applicationId: current.id,
      deploymentName: input.deploymentName,
      revision: input.revision,
    });
    await insertApiCrMapping(
      trx,
      { ...syncRun, namespaceUid: input.namespaceUid },
      { kind: SyncRunCr.kind, syncOperationId: syncOperation.id },
    );
    const operation = await announceSync(trx, current, syncOperation, syncRun);
    return { created: true, syncOperation, operation };
  });
}

/** The sync_operation row of a SyncRun incarnation (undefined when none was requested). */
export async function syncOperationOf(
  db: Kysely<Database>,
  uid: string,
): Promise<SyncOperationRow | undefined> {
  const mapping = await getApiCrMappingByUid(db, uid);
  if (!mapping?.sync_operation_id) return undefined;
  return await getSyncOperation(db, mapping.sync_operation_id);
}

/**
 * desired_state Terminated + an operation announcing it, for an unfinished sync (in the caller's
 * transaction). Undefined when the application row is gone (nothing to terminate in Argo CD).
 */
async function requestTermination(
  trx: Transaction<Database>,
  row: SyncOperationRow,
  syncRun: SyncRunIdentity,
): Promise<OperationRow | undefined> {
  await setSyncOperationDesiredState(trx, row.id, 'Terminated');
  // Locked, as in requestSync: announced to the instance that runs the sync, also while its tenant moves.
  const application = row.application_id ? await lockApplication(trx, row.application_id) : undefined;
  if (!application) return undefined;
  return await announceSync(trx, application, row, syncRun);
}

/** The SyncOperation operation announcing sync `row` of SyncRun `syncRun` to the engine instance of its application. */
async function announceSync(
  trx: Transaction<Database>,
  application: ApplicationRow,
  row: SyncOperationRow,
  syncRun: SyncRunIdentity,
): Promise<OperationRow> {
  return await SyncRunCr.announce(trx, syncRun, {
    engineInstanceId: application.engine_instance_id,
    resourceId: row.id,
    ownerUserId: row.cluster_user_id,
  });
}

/**
 * The user set `spec.terminate` on a live SyncRun: its unfinished sync is terminated (once). Returns the
 * operation announcing it, or undefined when there was nothing to do (finished, already terminating).
 */
export async function terminateSync(
  db: Kysely<Database>,
  syncRun: SyncRunIdentity,
): Promise<OperationRow | undefined> {
  return await db.transaction().execute(async (trx) => {
    await SyncRunCr.lock(trx, syncRun.namespace, syncRun.name);
    const mapping = await getApiCrMappingByUid(trx, syncRun.uid);
    const row = mapping?.sync_operation_id
      ? await getSyncOperation(trx, mapping.sync_operation_id)
      : undefined;
    if (!row || row.outcome !== null || row.desired_state === 'Terminated') return undefined;
    return await requestTermination(trx, row, syncRun);
  });
}

export type GoneSyncRunAction = 'terminating' | 'waiting-for-termination' | 'deleted';

/**
 * SyncRun incarnations of `namespace/name` whose mappings are `proven` gone (deleted, or replaced by one with
 * the same name and another uid; the caller holds the proof: a deletionTimestamp, or a live read made after it
 * read the mappings): a sync that still runs is terminated (desired_state Terminated + operation, once); a
 * finished one (or one whose Application is gone) only loses its rows — nothing happens in Argo CD.
 */
export async function releaseGoneSyncRuns(
  db: Kysely<Database>,
  namespace: string,
  name: string,
  proven: (mapping: ApiCrMappingRow) => boolean,
): Promise<{ syncOperationId: string; action: GoneSyncRunAction; operationId?: string }[]> {
  return await db.transaction().execute(async (trx) => {
    await SyncRunCr.lock(trx, namespace, name);
    const mappings = await findApiCrMappingsByName(trx, { kind: SyncRunCr.kind, namespace, name });
    const results: { syncOperationId: string; action: GoneSyncRunAction; operationId?: string }[] = [];
    const gone: { row: SyncOperationRow; uid: string }[] = [];
    for (const mapping of mappings) {
      if (!proven(mapping) || !mapping.sync_operation_id) continue;
      const row = await getSyncOperation(trx, mapping.sync_operation_id);
      if (row) gone.push({ row, uid: mapping.cr_uid });
    }
    // Their applications are locked in id order, as a tenant move locks them: never a deadlock with one.
    const idOf = (g: { row: SyncOperationRow }) => g.row.application_id ?? '';
    gone.sort((a, b) => (idOf(a) < idOf(b) ? -1 : idOf(a) > idOf(b) ? 1 : 0));
    for (const { row, uid } of gone) {
      if (row.outcome !== null || row.application_id === null) {
        await deleteSyncOperation(trx, row.id);
        results.push({ syncOperationId: row.id, action: 'deleted' });
        continue;
      }
      if (row.desired_state === 'Terminated') {
        results.push({ syncOperationId: row.id, action: 'waiting-for-termination' });
        continue;
      }
      const operation = await requestTermination(trx, row, { namespace, name, uid });
      if (!operation) {
        await deleteSyncOperation(trx, row.id);
        results.push({ syncOperationId: row.id, action: 'deleted' });
        continue;
      }
      results.push({ syncOperationId: row.id, action: 'terminating', operationId: operation.id });
    }
    return results;
  });
}
