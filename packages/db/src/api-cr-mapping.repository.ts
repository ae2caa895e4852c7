import { randomUUID } from 'node:crypto';
import { type Kysely, sql, type Transaction } from 'kysely';
import { type ApplicationInput, applicationValues } from './application.repository.ts';
import type { ApiCrMappingRow, ApplicationRow, Database, OperationRow } from './database.ts';
import type { OperationRequest } from './operation.repository.ts';
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
 * A new application row (unless its name is taken), its GitOpsDeployment's mapping and the operation
 * announcing it, in one statement (data-modifying WITHs: one round trip instead of two). The row's id is
 * chosen here so the three inserts need nothing back from each other; the mapping and the operation are
 * inserted only when the application was. `undefined` when the name is taken (nothing is written).
 */
export async function insertApplicationWithMappingAndOperation(
  trx: Transaction<Database>,
  application: ApplicationInput,
  cr: CrReference,
  owner: Pick<OperationRequest, 'ownerCr'>,
): Promise<{ application: ApplicationRow; operation: OperationRow } | undefined> {
  const id = randomUUID();
  const values = { id, ...applicationValues(application) };
  const operation = await trx
    .with('app', (db) =>
      db
        .insertInto('application')
        .values(values)
        .onConflict((conflict) => conflict.column('name').doNothing())
        .returning(['id', 'engine_instance_id', 'cluster_user_id']),
    )
    .with('mapping', (db) =>
      db
        .insertInto('api_cr_mapping')
        .columns(['cr_kind', 'cr_uid', 'cr_name', 'cr_namespace', 'cr_namespace_uid', 'application_id'])
        .expression((eb) =>
          eb
            .selectFrom('app')
            .select([
              sql.val<'GitOpsDeployment'>('GitOpsDeployment').as('cr_kind'),
              sql.val(cr.uid).as('cr_uid'),
              sql.val(cr.name).as('cr_name'),
              sql.val(cr.namespace).as('cr_namespace'),
              sql.val(cr.namespaceUid).as('cr_namespace_uid'),
              'app.id',
            ]),
        )
        .returning('id'),
    )
    .insertInto('operation')
    .columns([
      'engine_instance_id',
      'resource_type',
      'resource_id',
      'owner_user_id',
      'owner_kind',
      'owner_namespace',
      'owner_name',
      'owner_uid',
    ])
    .expression((eb) =>
      eb
        .selectFrom('app')
        .select([
          'app.engine_instance_id',
          sql.val<'Application'>('Application').as('resource_type'),
          'app.id',
          'app.cluster_user_id',
          sql.val(owner.ownerCr?.kind ?? null).as('owner_kind'),
          sql.val(owner.ownerCr?.namespace ?? null).as('owner_namespace'),
          sql.val(owner.ownerCr?.name ?? null).as('owner_name'),
          sql.val(owner.ownerCr?.uid ?? null).as('owner_uid'),
        ]),
    )
    .returningAll()
    .executeTakeFirst();
  if (!operation) return undefined;
  // now() is the transaction's start: the application's timestamps are the operation's creation time.
  return {
    application: {
      ...values,
      spec: application.spec,
      releasing_engine_instance_id: null,
      created_at: operation.created_at,
      updated_at: operation.created_at,
    },
    operation,
  };
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
