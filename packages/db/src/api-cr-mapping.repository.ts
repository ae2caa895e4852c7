import { type Kysely, sql, type Transaction } from 'kysely';
import type { ApiCrMappingRow, Database } from './database.ts';
import {
  type InsertedOperation,
  insertedOperation,
  type OperationRequest,
  operationInsert,
} from './operation.repository.ts';
import type { CrKind } from './schema-values.ts';

/**
 * User CR <-> database row. Deleting the row deletes its mapping (FK cascade). Looked up by CR uid (delete
 * events; a re-created CR with the same name has a new uid) or by namespace/kind/name.
 */

/** The row a CR kind maps to, as a discriminated union. */
export type MappedRow =
  | { kind: 'GitOpsDeployment'; applicationId: string }
  | { kind: 'GitOpsDeploymentSyncRun'; syncOperationId: string }
  | { kind: 'GitOpsDeploymentManagedEnvironment'; managedEnvironmentId: string }
  | { kind: 'GitOpsDeploymentRepositoryCredential'; repositoryCredentialsId: string };

export interface CrReference {
  uid: string;
  name: string;
  namespace: string;
  namespaceUid: string;
}

function rowColumns(row: MappedRow) {
  return {
    application_id: row.kind === 'GitOpsDeployment' ? row.applicationId : null,
    sync_operation_id: row.kind === 'GitOpsDeploymentSyncRun' ? row.syncOperationId : null,
    managed_environment_id:
      row.kind === 'GitOpsDeploymentManagedEnvironment' ? row.managedEnvironmentId : null,
    repository_credentials_id:
      row.kind === 'GitOpsDeploymentRepositoryCredential' ? row.repositoryCredentialsId : null,
  };
}

/** The mapped row of a mapping. */
export function mappedRowOf(mapping: ApiCrMappingRow): MappedRow {
  switch (mapping.cr_kind) {
    case 'GitOpsDeployment':
      return { kind: mapping.cr_kind, applicationId: mapping.application_id! };
    case 'GitOpsDeploymentSyncRun':
      return { kind: mapping.cr_kind, syncOperationId: mapping.sync_operation_id! };
    case 'GitOpsDeploymentManagedEnvironment':
      return { kind: mapping.cr_kind, managedEnvironmentId: mapping.managed_environment_id! };
    case 'GitOpsDeploymentRepositoryCredential':
      return { kind: mapping.cr_kind, repositoryCredentialsId: mapping.repository_credentials_id! };
  }
}

/** The columns of the mapping of `cr` to `row`. */
function mappingColumns(cr: CrReference, row: MappedRow) {
  return {
    cr_kind: row.kind,
    cr_uid: cr.uid,
    cr_name: cr.name,
    cr_namespace: cr.namespace,
    cr_namespace_uid: cr.namespaceUid,
    ...rowColumns(row),
  };
}

export async function insertApiCrMapping(
  db: Kysely<Database>,
  cr: CrReference,
  row: MappedRow,
): Promise<ApiCrMappingRow> {
  return await db
    .insertInto('api_cr_mapping')
    .values(mappingColumns(cr, row))
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * insertApiCrMapping and insertOperation in one statement (a data-modifying WITH): the mapping of a new row
 * and the operation announcing it, one round trip instead of two.
 */
export async function insertApiCrMappingAndOperation(
  trx: Transaction<Database>,
  cr: CrReference,
  row: MappedRow,
  request: OperationRequest,
): Promise<InsertedOperation> {
  const inserted = await operationInsert(
    trx.with('mapping', (db) =>
      db.insertInto('api_cr_mapping').values(mappingColumns(cr, row)).returning('id'),
    ),
    request,
  ).executeTakeFirstOrThrow();
  return insertedOperation(inserted);
}

export async function getApiCrMappingByUid(
  db: Kysely<Database>,
  crUid: string,
): Promise<ApiCrMappingRow | undefined> {
  return await db.selectFrom('api_cr_mapping').selectAll().where('cr_uid', '=', crUid).executeTakeFirst();
}

/** Mappings of CRs with this kind/namespace/name (several during a delete-recreate), oldest first. */
export async function findApiCrMappingsByName(
  db: Kysely<Database>,
  cr: { kind: CrKind; namespace: string; name: string },
): Promise<ApiCrMappingRow[]> {
  return await db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('cr_namespace', '=', cr.namespace)
    .where('cr_kind', '=', cr.kind)
    .where('cr_name', '=', cr.name)
    .orderBy('created_at')
    .execute();
}

/** The mapping of a database row (e.g. which GitOpsDeployment an application belongs to). */
export async function getApiCrMappingOfApplication(
  db: Kysely<Database>,
  applicationId: string,
): Promise<ApiCrMappingRow | undefined> {
  return await db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('application_id', '=', applicationId)
    .executeTakeFirst();
}

/** The mapping of a sync_operation row: which SyncRun it belongs to. */
export async function getApiCrMappingOfSyncOperation(
  db: Kysely<Database>,
  syncOperationId: string,
): Promise<ApiCrMappingRow | undefined> {
  return await db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('sync_operation_id', '=', syncOperationId)
    .executeTakeFirst();
}

export async function deleteApiCrMappingByUid(db: Kysely<Database>, crUid: string): Promise<boolean> {
  const result = await db.deleteFrom('api_cr_mapping').where('cr_uid', '=', crUid).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** One page of the mappings of one kind, in id order (keyset pagination for sweeps). */
export async function listApiCrMappingsOfKind(
  db: Kysely<Database>,
  kind: CrKind,
  page: { afterId?: string; limit: number },
): Promise<ApiCrMappingRow[]> {
  let query = db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('cr_kind', '=', kind)
    .orderBy('id')
    .limit(page.limit);
  if (page.afterId !== undefined) query = query.where('id', '>', page.afterId);
  return await query.execute();
}

/**
 * Serialises reconciles of one CR name (namespace/kind/name) across backend replicas until `trx` ends: a
 * transaction-scoped advisory lock, so two replicas never both insert rows for the same name.
 */
export async function lockCrName(
  trx: Transaction<Database>,
  cr: { kind: CrKind; namespace: string; name: string },
): Promise<void> {
  const key = `${cr.kind}/${cr.namespace}/${cr.name}`;
  await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
}

export async function deleteApiCrMapping(db: Kysely<Database>, id: string): Promise<boolean> {
  const result = await db.deleteFrom('api_cr_mapping').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** The mapping of the ManagedEnvironment CR an environment row belongs to (none for Workspace ones). */
export async function getApiCrMappingOfManagedEnvironment(
  db: Kysely<Database>,
  managedEnvironmentId: string,
): Promise<ApiCrMappingRow | undefined> {
  return await db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('managed_environment_id', '=', managedEnvironmentId)
    .executeTakeFirst();
}
