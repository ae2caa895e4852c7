import type { Kysely } from 'kysely';
import type { ApplicationRow, Database, JsonValue } from './database.ts';

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

/**
 * Inserts the row unless an application of this name exists: then undefined, and the caller reads that one
 * (one statement for a new row instead of a look-up and an insert).
 */
export async function insertApplicationIfNameFree(
  db: Kysely<Database>,
  input: ApplicationInput,
): Promise<ApplicationRow | undefined> {
  return await db
    .insertInto('application')
    .values(applicationValues(input))
    .onConflict((conflict) => conflict.column('name').doNothing())
    .returningAll()
    .executeTakeFirst();
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
  return await db
    .updateTable('application')
    .set({ managed_environment_id: input.managedEnvironmentId, spec: JSON.stringify(input.spec) })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function getApplication(db: Kysely<Database>, id: string): Promise<ApplicationRow | undefined> {
  return await db.selectFrom('application').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function getApplicationByName(
  db: Kysely<Database>,
  name: string,
): Promise<ApplicationRow | undefined> {
  return await db.selectFrom('application').selectAll().where('name', '=', name).executeTakeFirst();
}

/** Deletes the row; its application_state and api_cr_mapping go with it, sync operations keep a NULL link. */
export async function deleteApplication(db: Kysely<Database>, id: string): Promise<boolean> {
  const result = await db.deleteFrom('application').where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** One page of an engine instance's applications in id order, for incremental resyncs. */
export async function listApplicationsOfEngineInstance(
  db: Kysely<Database>,
  engineInstanceId: string,
  page: { afterId?: string; limit: number },
): Promise<ApplicationRow[]> {
  let query = db
    .selectFrom('application')
    .selectAll()
    .where('engine_instance_id', '=', engineInstanceId)
    .orderBy('id')
    .limit(page.limit);
  if (page.afterId !== undefined) query = query.where('id', '>', page.afterId);
  return await query.execute();
}

/** The applications deployed through one managed environment. */
export async function listApplicationsOfManagedEnvironment(
  db: Kysely<Database>,
  managedEnvironmentId: string,
): Promise<ApplicationRow[]> {
  return await db
    .selectFrom('application')
    .selectAll()
    .where('managed_environment_id', '=', managedEnvironmentId)
    .execute();
}

/** The stored specs of a tenant's applications on an engine instance (what its AppProject allows). */
export async function listApplicationSpecsOfTenant(
  db: Kysely<Database>,
  clusterUserId: string,
  engineInstanceId: string,
): Promise<JsonValue[]> {
  const rows = await db
    .selectFrom('application')
    .select('spec')
    .where('cluster_user_id', '=', clusterUserId)
    .where('engine_instance_id', '=', engineInstanceId)
    .execute();
  return rows.map((row) => row.spec);
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
