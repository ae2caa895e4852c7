import { type Kysely, sql } from 'kysely';
import type {
  ApplicationRow,
  ClusterCredentialsRow,
  Database,
  JsonValue,
  ManagedEnvironmentRow,
  OperationRow,
} from './database.ts';
import { type IdPage, lockRowById, pageById, rowBy, rowsBy, updateRowById } from './keyed-rows.ts';
import {
  dueOperationsStart,
  type ResourceOperation,
  resourceOperationOfRow,
  resourceOperations,
} from './operation-lifecycle.repository.ts';
import { endSyncsOfApplication } from './sync-operation.repository.ts';

/**
 * One row per GitOpsDeployment: the desired Argo CD Application. `spec` is stored as given; readers get
 * `JsonValue` and parse it at their boundary.
 */

/** Argo CD Application name for a GitOpsDeployment: `gitopsdepl-<GitOpsDeployment uid>`. */
export function applicationName(gitopsDeploymentUid: string): string {
  return `gitopsdepl-${gitopsDeploymentUid}`;
}

export interface ApplicationInput {
  name: string;
  clusterUserId: string;
  engineInstanceId: string;
  managedEnvironmentId: string | null;
  spec: { [key: string]: JsonValue };
}

export async function insertApplication(
  db: Kysely<Database>,
  input: ApplicationInput,
): Promise<ApplicationRow> {
  return await db
    .insertInto('application')
    .values(applicationValues(input))
    .returningAll()
    .executeTakeFirstOrThrow();
}

function applicationValues(input: ApplicationInput) {
  return {
    name: input.name,
    cluster_user_id: input.clusterUserId,
    engine_instance_id: input.engineInstanceId,
    managed_environment_id: input.managedEnvironmentId,
    spec: JSON.stringify(input.spec),
  };
}

/** Updates the desired spec and destination environment; undefined if the row is gone. */
export async function updateApplication(
  db: Kysely<Database>,
  id: string,
  input: Pick<ApplicationInput, 'managedEnvironmentId' | 'spec'>,
): Promise<ApplicationRow | undefined> {
  return await updateRowById(db, 'application', id, {
    managed_environment_id: input.managedEnvironmentId,
    spec: JSON.stringify(input.spec),
  });
}

export const getApplication = rowBy('application', 'id');

/**
 * The application row, locked until `trx` ends (FOR UPDATE): a concurrent tenant move (which locks its rows the
 * same way) either committed before, and this is the row as it moved, or waits for `trx`. A decision taken from
 * it (delete now, or wait for a release) cannot be overtaken by the move.
 */
export const lockApplication = lockRowById('application');

/** An application with what rendering its Argo CD Application needs from other tables. */
export interface ApplicationWithDestination {
  application: ApplicationRow;
  /** Its managed environment (none when `managed_environment_id` is null or the row is gone). */
  environment?: {
    id: string;
    kind: ManagedEnvironmentRow['kind'];
    /**
     * The environment's cluster credentials' scope: every External environment has them, a Workspace one only
     * while its tenant is on an instance of another cluster (it is then reached like an External one).
     */
    credentials?: Pick<ClusterCredentialsRow, 'namespaces' | 'cluster_resources'>;
  };
  /** The CR its api_cr_mapping names (the GitOpsDeployment that owns it). */
  owner?: { name: string; namespace: string };
}

/**
 * Agent: starts the due operations of application `id` and reads the application with its destination, in one
 * statement (one round trip where the start and the read were two): the row with its environment, the credentials'
 * scope and the owner's name. The read sees the rows as the operations' start does: an operation found comes
 * with the row it announces.
 */
export async function startDueOperationsOfApplication(
  db: Kysely<Database>,
  engineInstanceId: string,
  id: string,
): Promise<{ found: ResourceOperation[]; read: ApplicationWithDestination | undefined }> {
  type Row = (ApplicationReadColumns | { [K in keyof ApplicationReadColumns]: null }) &
    (OperationRow & { outcome: ResourceOperation['outcome'] });
  const { rows } = await sql<Row>`
    WITH ${dueOperationsStart(engineInstanceId, { type: 'Application', id })},
      read AS (${applicationRead(id)})
    SELECT o.*, r.* FROM (SELECT) one
      LEFT JOIN read r ON true
      LEFT JOIN ${resourceOperations} o ON true
    ORDER BY o.created_at, o.id`.execute(db);
  // One row per operation (or one with none), each carrying the read; the operation is what is not `app_*`.
  const found = rows
    .filter((row) => row.id !== null)
    .map((row) =>
      resourceOperationOfRow(
        Object.fromEntries(Object.entries(row).filter(([column]) => !column.startsWith('app_'))) as Row,
      ),
    );
  const first = rows[0];
  return { found, read: first?.app_row ? applicationWithDestinationOf(first) : undefined };
}

/** What `applicationRead` selects: the row as JSON, then its destination's and owner's columns. */
interface ApplicationReadColumns {
  app_row: { [column: string]: JsonValue };
  app_environment_id: string | null;
  app_environment_kind: ManagedEnvironmentRow['kind'] | null;
  app_credentials_id: string | null;
  app_credentials_namespaces: ClusterCredentialsRow['namespaces'] | null;
  app_credentials_cluster_resources: boolean | null;
  app_owner_name: string | null;
  app_owner_namespace: string | null;
}

/**
 * The read of an application with its destination (one row, or none for an unknown id), its columns named
 * `app_*` so that it can be joined with the operations of the same statement. The row comes as JSON
 * (`applicationRowOfJson`).
 */
function applicationRead(id: string) {
  return sql`SELECT to_jsonb(a) AS app_row, e.id AS app_environment_id, e.kind AS app_environment_kind,
      c.id AS app_credentials_id, c.namespaces AS app_credentials_namespaces,
      c.cluster_resources AS app_credentials_cluster_resources,
      m.cr_name AS app_owner_name, m.cr_namespace AS app_owner_namespace
    FROM application a
      LEFT JOIN managed_environment e ON e.id = a.managed_environment_id
      LEFT JOIN cluster_credentials c ON c.id = e.cluster_credentials_id
      LEFT JOIN LATERAL (
        SELECT cr_name, cr_namespace FROM api_cr_mapping WHERE application_id = a.id LIMIT 1
      ) m ON true
    WHERE a.id = ${id}::uuid`;
}

/** The application table's timestamp columns, which JSON carries as text. */
const APPLICATION_TIMESTAMPS = ['created_at', 'updated_at', 'refresh_requested_at'] as const;

function applicationRowOfJson(json: { [column: string]: JsonValue }): ApplicationRow {
  const row: { [column: string]: unknown } = { ...json };
  for (const column of APPLICATION_TIMESTAMPS) {
    const value = json[column];
    row[column] = typeof value === 'string' ? new Date(value) : null;
  }
  return row as unknown as ApplicationRow;
}

function applicationWithDestinationOf(read: ApplicationReadColumns): ApplicationWithDestination {
  return {
    application: applicationRowOfJson(read.app_row),
    environment:
      read.app_environment_id !== null && read.app_environment_kind !== null
        ? {
            id: read.app_environment_id,
            kind: read.app_environment_kind,
            credentials:
              read.app_credentials_id !== null &&
              read.app_credentials_namespaces !== null &&
              read.app_credentials_cluster_resources !== null
                ? {
                    namespaces: read.app_credentials_namespaces,
                    cluster_resources: read.app_credentials_cluster_resources,
                  }
                : undefined,
          }
        : undefined,
    owner:
      read.app_owner_name !== null && read.app_owner_namespace !== null
        ? { name: read.app_owner_name, namespace: read.app_owner_namespace }
        : undefined,
  };
}

export const getApplicationByName = rowBy('application', 'name');

/**
 * Deletes the row; its application_state and api_cr_mapping go with it, sync operations keep a NULL link
 * and those not finished end first (endSyncsOfApplication; give a transaction).
 * `proven`: its GitOpsDeployment was found gone by a live read, so the same statement records the proof that
 * lets the instance's agent delete the Argo CD Application with cascading (`application_deletion`,
 * docs/deletion-guard.md). Without it (the deployment still exists, e.g. it moved to another backend shard),
 * the agent keeps the Application for whichever row comes next under its name.
 */
export async function deleteApplication(
  db: Kysely<Database>,
  id: string,
  options: { proven: boolean },
): Promise<boolean> {
  await endSyncsOfApplication(db, id);
  if (!options.proven) {
    const result = await db.deleteFrom('application').where('id', '=', id).executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
  const recorded = await db
    .with('gone', (q) =>
      q
        .deleteFrom('application')
        .where('id', '=', id)
        .returning(['id', 'engine_instance_id', 'cluster_user_id', 'name']),
    )
    .insertInto('application_deletion')
    .columns(['application_id', 'engine_instance_id', 'cluster_user_id', 'application_name'])
    .expression((eb) =>
      eb
        .selectFrom('gone')
        .select(['gone.id', 'gone.engine_instance_id', 'gone.cluster_user_id', 'gone.name']),
    )
    .onConflict((oc) => oc.column('application_id').doNothing())
    .executeTakeFirst();
  return (recorded.numInsertedOrUpdatedRows ?? 0n) > 0n;
}

/** One page of an engine instance's applications in id order, for incremental resyncs. */
export async function listApplicationsOfEngineInstance(
  db: Kysely<Database>,
  engineInstanceId: string,
  page: IdPage,
): Promise<ApplicationRow[]> {
  const ofInstance = db
    .selectFrom('application')
    .selectAll()
    .where('engine_instance_id', '=', engineInstanceId);
  return await pageById(ofInstance, page).execute();
}

/** The applications deployed through one managed environment. */
export const listApplicationsOfManagedEnvironment = rowsBy('application', 'managed_environment_id');

/**
 * The tenants (cluster_user ids) of an engine instance with an application that deploys a chart of a Helm
 * repository or of an OCI registry (a source, or one of its sources, with `chart` or an `oci://` repoURL),
 * with those specs: whose AppProjects depend on which chart repositories are private (issue 35).
 */
export async function listChartApplicationSpecsOfEngineInstance(
  db: Kysely<Database>,
  engineInstanceId: string,
): Promise<{ clusterUserId: string; spec: JsonValue }[]> {
  const chartSource = '(exists(@.chart) || @.repoURL like_regex "^oci://" flag "i")';
  const rows = await db
    .selectFrom('application')
    .select(['cluster_user_id', 'spec'])
    .where('engine_instance_id', '=', engineInstanceId)
    .where(
      sql<boolean>`(jsonb_path_exists(spec, ${`$.source ? ${chartSource}`}::jsonpath) OR jsonb_path_exists(spec, ${`$.sources[*] ? ${chartSource}`}::jsonpath))`,
    )
    .execute();
  return rows.map((row) => ({ clusterUserId: row.cluster_user_id, spec: row.spec }));
}

/** Which of `ids` exist as application rows of the engine instance. */
export async function existingApplicationIds(
  db: Kysely<Database>,
  engineInstanceId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('application')
    .select('id')
    .where('engine_instance_id', '=', engineInstanceId)
    .where('id', 'in', ids)
    .execute();
  return new Set(rows.map((row) => row.id));
}

/** When a GitOpsDeployment's create passed each step of the pipeline (createPathTimes). */
export interface CreatePathTimes {
  crUid: string;
  /** The backend committed the application row (its transaction's start). */
  rowAt: Date;
  /** The agent last began an attempt of the row's first operation (null: not yet). */
  startedAt: Date | null;
  /** The agent finished that operation (the Application applied; null: not yet). */
  finishedAt: Date | null;
}

/**
 * Benchmarks only: for these GitOpsDeployment uids, when their application row was written and when the
 * agent took and finished its first operation (the create). Finished operations must not have been
 * deleted by retention yet.
 */
export async function createPathTimes(
  db: Kysely<Database>,
  crUids: readonly string[],
): Promise<CreatePathTimes[]> {
  if (crUids.length === 0) return [];
  const { rows } = await sql<CreatePathTimes>`
    select distinct on (m.cr_uid) m.cr_uid as "crUid", a.created_at as "rowAt",
      o.last_attempt_at as "startedAt", o.finished_at as "finishedAt"
    from api_cr_mapping m
    join application a on a.id = m.application_id
    left join operation o on o.resource_type = 'Application' and o.resource_id = a.id
    where m.cr_uid = any(${crUids}::text[])
    order by m.cr_uid, o.created_at`.execute(db);
  return rows;
}
