import { randomUUID } from 'node:crypto';
import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely';
import type { ApplicationInput } from './application.repository.ts';
import type { ApiCrMappingRow, ApplicationRow, Database, OperationRow } from './database.ts';
import { deleteRowById, type IdPage, pageById, rowBy } from './keyed-rows.ts';
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
  /** The CR's metadata.generation the row is written from (`cr_generation`, recordCrGeneration). */
  generation?: number;
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

/** The CR of a mapping (that incarnation): its namespace, name and uid. */
export function mappedCrOf(mapping: ApiCrMappingRow): { namespace: string; name: string; uid: string } {
  return { namespace: mapping.cr_namespace, name: mapping.cr_name, uid: mapping.cr_uid };
}

/** The columns of the mapping of `cr` to `row`. */
function mappingColumns(cr: CrReference, row: MappedRow) {
  return {
    cr_kind: row.kind,
    cr_uid: cr.uid,
    cr_name: cr.name,
    cr_namespace: cr.namespace,
    cr_namespace_uid: cr.namespaceUid,
    cr_generation: cr.generation ?? null,
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

/** What the three inserts of a new GitOpsDeployment's application answer. */
type CreatedApplication = { application: ApplicationRow; operation: OperationRow };

/**
 * The end of a statement that creates a new GitOpsDeployment's application: after `prelude`, whose last CTE
 * `target` gives at most one row of (cluster_user_id, engine_instance_id, managed_environment_id), the
 * application row (unless its name is taken), the GitOpsDeployment's mapping and the operation announcing
 * it, all from that row (data-modifying WITHs). The row's id is chosen here, so the inserts need nothing
 * back from each other. `undefined` when nothing was written.
 */
async function insertApplicationFromTarget(
  db: Kysely<Database>,
  prelude: RawBuilder<unknown>,
  application: { name: string; spec: ApplicationInput['spec'] },
  cr: CrReference,
): Promise<CreatedApplication | undefined> {
  const id = randomUUID();
  const kind: CrKind = 'GitOpsDeployment';
  const { rows } = await sql<
    OperationRow & {
      app_cluster_user_id: string;
      app_engine_instance_id: string;
      app_managed_environment_id: string | null;
    }
  >`
    with ${prelude}, app as (
      insert into application (id, name, cluster_user_id, engine_instance_id, managed_environment_id, spec)
      select ${id}::uuid, ${application.name}, t.cluster_user_id, t.engine_instance_id, t.managed_environment_id,
             ${JSON.stringify(application.spec)}::jsonb
      from target t
      on conflict (name) do nothing
      returning id, cluster_user_id, engine_instance_id, managed_environment_id
    ), mapping as (
      insert into api_cr_mapping (cr_kind, cr_uid, cr_name, cr_namespace, cr_namespace_uid, cr_generation,
                                  application_id)
      select ${kind}, ${cr.uid}, ${cr.name}, ${cr.namespace}, ${cr.namespaceUid}, ${cr.generation ?? null}::bigint,
             a.id from app a
      returning id
    ), op as (
      insert into operation (engine_instance_id, resource_type, resource_id, owner_user_id,
                             owner_kind, owner_namespace, owner_name, owner_uid)
      select a.engine_instance_id, 'Application', a.id, a.cluster_user_id, ${kind}, ${cr.namespace}, ${cr.name},
             ${cr.uid}
      from app a
      returning *
    )
    select op.*, a.cluster_user_id as app_cluster_user_id, a.engine_instance_id as app_engine_instance_id,
           a.managed_environment_id as app_managed_environment_id
    from op join app a on a.id = op.resource_id`.execute(db);
  const row = rows[0];
  if (!row) return undefined;
  const { app_cluster_user_id, app_engine_instance_id, app_managed_environment_id, ...operation } = row;
  // now() is the statement's transaction start: the application's timestamps are the operation's creation.
  return {
    application: {
      id,
      name: application.name,
      cluster_user_id: app_cluster_user_id,
      engine_instance_id: app_engine_instance_id,
      managed_environment_id: app_managed_environment_id,
      refresh_requested_at: null,
      releasing_engine_instance_id: null,
      spec: application.spec,
      created_at: operation.created_at,
      updated_at: operation.created_at,
    },
    operation,
  };
}

/**
 * A new application row for GitOpsDeployment `cr` (unless its name is taken), its mapping and the operation
 * announcing it (owned by `cr`), in one statement. `undefined` when the name is taken (nothing is written).
 */
export async function insertApplicationWithMappingAndOperation(
  trx: Transaction<Database>,
  application: ApplicationInput,
  cr: CrReference,
): Promise<CreatedApplication | undefined> {
  const target = sql`target as (
    select ${application.clusterUserId}::uuid as cluster_user_id,
           ${application.engineInstanceId}::uuid as engine_instance_id,
           ${application.managedEnvironmentId}::uuid as managed_environment_id)`;
  return await insertApplicationFromTarget(trx, target, application, cr);
}

/**
 * The common creation of a new GitOpsDeployment's application, in one statement and so without a
 * transaction's BEGIN and COMMIT (six round trips become one): the name's advisory lock (tried, not waited
 * for), the placed tenant with its engine instance and Workspace environment (KEY SHARE on the tenant, as
 * getPlacedTenant), then insertApplicationWithMappingAndOperation's three inserts. It writes nothing and
 * answers undefined, leaving the case to the locked transaction, unless all of these hold:
 * - the lock on the CR name is free (no other reconcile of the name is running);
 * - no mapping of the name exists (no earlier incarnation to delete, no own row to adopt);
 * - the tenant is placed, under this namespace name, and has its Workspace environment;
 * - the destination is an External environment (`managedEnvironmentId`), or the tenant's instance runs on
 *   `tenantClusterIdentity` (no Workspace credentials are needed to reach the namespace);
 * - the application's name is free;
 * - the CR's uid is not recorded as deleted (`recordDeletedCrs`: a cache that has not seen its delete).
 * The reads see the statement's snapshot, taken just before the lock is tried: a reconcile of the same name
 * that committed in between is not seen (microseconds; an older incarnation's mapping left that way is
 * removed by the next reconcile of the name or the orphan sweep).
 */
export async function createApplicationOfNewDeployment(
  db: Kysely<Database>,
  cr: CrReference,
  application: {
    name: string;
    spec: ApplicationInput['spec'];
    managedEnvironmentId: string | undefined;
    tenantClusterIdentity: string;
  },
): Promise<CreatedApplication | undefined> {
  const kind: CrKind = 'GitOpsDeployment';
  const external = application.managedEnvironmentId ?? null;
  const prelude = sql`lock as (
      select pg_try_advisory_xact_lock(hashtextextended(${crLockKey({ kind, ...cr })}, 0)) as held
    ), tenant as (
      select u.id as cluster_user_id, u.engine_instance_id, ei.cluster_identity, w.id as workspace_id
      from cluster_user u
      join engine_instance ei on ei.id = u.engine_instance_id
      join managed_environment w on w.cluster_user_id = u.id and w.kind = 'Workspace'
      where u.namespace_uid = ${cr.namespaceUid} and u.namespace_name = ${cr.namespace}
      for key share of u
    ), target as (
      select t.cluster_user_id, t.engine_instance_id, coalesce(${external}::uuid, t.workspace_id) as managed_environment_id
      from tenant t, lock l
      where l.held
        and not exists (
          select 1 from api_cr_mapping m
          where m.cr_kind = ${kind} and m.cr_namespace = ${cr.namespace} and m.cr_name = ${cr.name})
        and not exists (select 1 from deleted_cr d where d.cr_uid = ${cr.uid})
        and (${external}::uuid is not null or t.cluster_identity = ${application.tenantClusterIdentity})
    )`;
  return await insertApplicationFromTarget(db, prelude, application, cr);
}

export const getApiCrMappingByUid = rowBy('api_cr_mapping', 'cr_uid');

/** How long a deleted CR's uid is remembered (migration 0018): far longer than any cache lags behind. */
export const DELETED_CR_RETENTION_HOURS = 24;

/**
 * Records these CRs (by uid) as deleted, in the transaction that deletes their rows with proof that they are
 * gone: no row is written for them again (`isDeletedCr`, createApplicationOfNewDeployment). Uids recorded more
 * than DELETED_CR_RETENTION_HOURS ago are forgotten in the same statement.
 */
export async function recordDeletedCrs(db: Kysely<Database>, uids: readonly string[]): Promise<void> {
  if (uids.length === 0) return;
  await sql`with forgotten as (
      delete from deleted_cr
      where deleted_at < now() - make_interval(hours => ${DELETED_CR_RETENTION_HOURS}))
    insert into deleted_cr (cr_uid) select unnest(${[...uids]}::text[]) on conflict do nothing`.execute(db);
}

/**
 * Records that the row of the CR with this uid was written from its `generation` (never lowering what is
 * recorded): a reconcile holding an older generation (a cache behind an edit) then writes nothing.
 */
export async function recordCrGeneration(
  db: Kysely<Database>,
  uid: string,
  generation: number,
): Promise<void> {
  await db
    .updateTable('api_cr_mapping')
    .set({ cr_generation: sql<number>`greatest(coalesce(cr_generation, 0), ${generation}::bigint)` })
    .where('cr_uid', '=', uid)
    .execute();
}

/** Whether the CR with this uid was recorded as deleted (recordDeletedCrs): a cache holding it is behind. */
export async function isDeletedCr(db: Kysely<Database>, uid: string): Promise<boolean> {
  const row = await db.selectFrom('deleted_cr').select('cr_uid').where('cr_uid', '=', uid).executeTakeFirst();
  return row !== undefined;
}

/**
 * Mappings of CRs with this kind/namespace/name (several during a delete-recreate), oldest first; optionally
 * except the incarnation `exceptUid`.
 */
export async function findApiCrMappingsByName(
  db: Kysely<Database>,
  cr: { kind: CrKind; namespace: string; name: string },
  options: { exceptUid?: string } = {},
): Promise<ApiCrMappingRow[]> {
  const mappings = await db
    .selectFrom('api_cr_mapping')
    .selectAll()
    .where('cr_namespace', '=', cr.namespace)
    .where('cr_kind', '=', cr.kind)
    .where('cr_name', '=', cr.name)
    .orderBy('created_at')
    .execute();
  return mappings.filter((m) => m.cr_uid !== options.exceptUid);
}

/** `findApiCrMappingsByName` of one kind, as (db, namespace, name, { exceptUid }): a store's lookup of its CRs. */
export function apiCrMappingsOfKind(
  kind: CrKind,
): (
  db: Kysely<Database>,
  namespace: string,
  name: string,
  options?: { exceptUid?: string },
) => Promise<ApiCrMappingRow[]> {
  return (db, namespace, name, options) => findApiCrMappingsByName(db, { kind, namespace, name }, options);
}

/** The mapping of a database row (e.g. which GitOpsDeployment an application belongs to). */
export const getApiCrMappingOfApplication = rowBy('api_cr_mapping', 'application_id');

/** The mapping of a sync_operation row: which SyncRun it belongs to. */
export const getApiCrMappingOfSyncOperation = rowBy('api_cr_mapping', 'sync_operation_id');

/** One page of the mappings of one kind, in id order (keyset pagination for sweeps). */
export async function listApiCrMappingsOfKind(
  db: Kysely<Database>,
  kind: CrKind,
  page: IdPage,
): Promise<ApiCrMappingRow[]> {
  return await pageById(
    db.selectFrom('api_cr_mapping').selectAll().where('cr_kind', '=', kind),
    page,
  ).execute();
}

/** The advisory lock key of one CR name (lockCrName; tried by createApplicationOfNewDeployment). */
function crLockKey(cr: { kind: CrKind; namespace: string; name: string }): string {
  return `${cr.kind}/${cr.namespace}/${cr.name}`;
}

/**
 * Serialises reconciles of one CR name (namespace/kind/name) across backend replicas until `trx` ends: a
 * transaction-scoped advisory lock, so two replicas never both insert rows for the same name.
 */
export async function lockCrName(
  trx: Transaction<Database>,
  cr: { kind: CrKind; namespace: string; name: string },
): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${crLockKey(cr)}, 0))`.execute(trx);
}

export const deleteApiCrMapping = deleteRowById('api_cr_mapping');

/** The mapping of the ManagedEnvironment CR an environment row belongs to (none for Workspace ones). */
export const getApiCrMappingOfManagedEnvironment = rowBy('api_cr_mapping', 'managed_environment_id');
