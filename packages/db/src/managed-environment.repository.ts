import { type Kysely, sql, type Transaction } from 'kysely';
import { lockClusterUser } from './cluster-user.repository.ts';
import type { ClusterCredentialsRow, Database, ManagedEnvironmentRow } from './database.ts';
import { rowBy } from './keyed-rows.ts';

/**
 * managed_environment + cluster_credentials. An External environment owns its credentials row: they are
 * created, rotated and deleted together. A Workspace environment has one only while its tenant is on an
 * engine instance of another cluster (setWorkspaceCredentials). An environment with credentials is reached
 * through an Argo CD cluster Secret; one without (a Workspace on the tenant's own cluster) is `in-cluster`.
 * Token columns hold sealed bytes (sealing.ts), never plaintext.
 */

export interface ClusterCredentialsInput {
  apiUrl: string;
  /** Sealed bearer token. */
  bearerTokenSealed: Buffer;
  allowInsecureSkipTlsVerify: boolean;
  namespaces: readonly string[];
  clusterResources: boolean;
  /** Base64 of the PEM CA bundle the API server's certificate is verified against (NULL: none given). */
  caData?: string | null;
}

function credentialsColumns(input: ClusterCredentialsInput) {
  return {
    api_url: input.apiUrl,
    bearer_token_sealed: input.bearerTokenSealed,
    allow_insecure_skip_tls_verify: input.allowInsecureSkipTlsVerify,
    namespaces: [...input.namespaces],
    cluster_resources: input.clusterResources,
    ca_data: input.caData ?? null,
  };
}

/**
 * The tenant's Workspace environment, created when missing, in one statement (an existing one is only read).
 * One created by a concurrent transaction after this statement's snapshot is read by a second statement.
 */
export async function ensureWorkspaceEnvironment(
  db: Kysely<Database>,
  clusterUser: { id: string; namespaceName: string },
): Promise<ManagedEnvironmentRow> {
  const { rows } = await sql<ManagedEnvironmentRow>`
    WITH existing AS (
      SELECT * FROM managed_environment WHERE cluster_user_id = ${clusterUser.id} AND kind = 'Workspace'
    ),
    inserted AS (
      INSERT INTO managed_environment (cluster_user_id, kind, name)
      SELECT ${clusterUser.id}, 'Workspace', ${clusterUser.namespaceName}
      WHERE NOT EXISTS (SELECT 1 FROM existing)
      ON CONFLICT (cluster_user_id) WHERE kind = 'Workspace' DO NOTHING
      RETURNING *
    )
    SELECT * FROM inserted UNION ALL SELECT * FROM existing`.execute(db);
  if (rows[0]) return rows[0];
  return await db
    .selectFrom('managed_environment')
    .selectAll()
    .where('cluster_user_id', '=', clusterUser.id)
    .where('kind', '=', 'Workspace')
    .executeTakeFirstOrThrow();
}

/** An environment for one GitOpsDeploymentManagedEnvironment CR, with its credentials. */
export async function insertExternalEnvironment(
  trx: Transaction<Database>,
  input: { clusterUserId: string; name: string; credentials: ClusterCredentialsInput },
): Promise<{ environment: ManagedEnvironmentRow; credentials: ClusterCredentialsRow }> {
  const credentials = await trx
    .insertInto('cluster_credentials')
    .values({ cluster_user_id: input.clusterUserId, ...credentialsColumns(input.credentials) })
    .returningAll()
    .executeTakeFirstOrThrow();
  const environment = await trx
    .insertInto('managed_environment')
    .values({
      cluster_user_id: input.clusterUserId,
      kind: 'External',
      name: input.name,
      cluster_credentials_id: credentials.id,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { environment, credentials };
}

/** Replaces the credentials of an External environment in place (token rotation, changed URL/flags). */
export async function updateEnvironmentCredentials(
  db: Kysely<Database>,
  environmentId: string,
  credentials: ClusterCredentialsInput,
): Promise<ClusterCredentialsRow | undefined> {
  return await db
    .updateTable('cluster_credentials')
    .set(credentialsColumns(credentials))
    .where('id', '=', (eb) =>
      eb.selectFrom('managed_environment').select('cluster_credentials_id').where('id', '=', environmentId),
    )
    .returningAll()
    .executeTakeFirst();
}

/**
 * Gives the tenant's Workspace environment these credentials (replacing any it has), or takes them away
 * (`null`): a tenant on an instance of another cluster reaches its own namespace through them. Creates the
 * Workspace environment when missing. Returns the environment and whether anything changed.
 */
export async function setWorkspaceCredentials(
  trx: Transaction<Database>,
  clusterUser: { id: string; namespaceName: string },
  credentials: ClusterCredentialsInput | null,
): Promise<{ environment: ManagedEnvironmentRow; changed: boolean }> {
  const environment = await ensureWorkspaceEnvironment(trx, clusterUser);
  const current = environment.cluster_credentials_id;
  /** The environment, changed: linked to the credentials `credentialsId` (none: `null`). */
  const linkedTo = async (credentialsId: string | null) => ({
    environment: await trx
      .updateTable('managed_environment')
      .set({ cluster_credentials_id: credentialsId })
      .where('id', '=', environment.id)
      .returningAll()
      .executeTakeFirstOrThrow(),
    changed: true,
  });
  if (credentials === null) {
    if (current === null) return { environment, changed: false };
    const unlinked = await linkedTo(null);
    await trx.deleteFrom('cluster_credentials').where('id', '=', current).execute();
    return unlinked;
  }
  if (current !== null) {
    await trx
      .updateTable('cluster_credentials')
      .set(credentialsColumns(credentials))
      .where('id', '=', current)
      .execute();
  }
  const id =
    current ??
    (
      await trx
        .insertInto('cluster_credentials')
        .values({ cluster_user_id: clusterUser.id, ...credentialsColumns(credentials) })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
  return await linkedTo(id);
}

/**
 * Locks the tenant row (as moveTenant does, so a move and this transaction do not interleave) and says
 * whether its Workspace environment has credentials now.
 */
export async function lockTenantWorkspaceCredentials(
  trx: Transaction<Database>,
  clusterUserId: string,
): Promise<boolean> {
  if (!(await lockClusterUser(trx, clusterUserId))) return false;
  const workspace = await getWorkspaceEnvironment(trx, clusterUserId);
  return (workspace?.cluster_credentials_id ?? null) !== null;
}

/** A Workspace environment with credentials, with what renewing them needs. */
export interface WorkspaceCredentialsDue {
  environmentId: string;
  clusterUserId: string;
  namespaceName: string;
  /** The tenant's instance (told when the credentials change); null: not placed (not expected). */
  engineInstanceId: string | null;
}

/** Workspace environments whose credentials were last written before `before`, oldest first, at most `limit`. */
export async function listWorkspaceCredentialsWrittenBefore(
  db: Kysely<Database>,
  before: Date,
  limit: number,
): Promise<WorkspaceCredentialsDue[]> {
  const rows = await db
    .selectFrom('managed_environment as e')
    .innerJoin('cluster_credentials as c', 'c.id', 'e.cluster_credentials_id')
    .innerJoin('cluster_user as u', 'u.id', 'e.cluster_user_id')
    .select(['e.id', 'u.id as cluster_user_id', 'u.namespace_name', 'u.engine_instance_id'])
    .where('e.kind', '=', 'Workspace')
    .where('c.updated_at', '<', before)
    .orderBy('c.updated_at')
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    environmentId: row.id,
    clusterUserId: row.cluster_user_id,
    namespaceName: row.namespace_name,
    engineInstanceId: row.engine_instance_id,
  }));
}

export const getManagedEnvironment = rowBy('managed_environment', 'id');

const getClusterCredentials = rowBy('cluster_credentials', 'id');

/** An environment with its credentials (undefined for a Workspace environment on its tenant's cluster). */
export async function getManagedEnvironmentWithCredentials(
  db: Kysely<Database>,
  id: string,
): Promise<
  { environment: ManagedEnvironmentRow; credentials: ClusterCredentialsRow | undefined } | undefined
> {
  const environment = await getManagedEnvironment(db, id);
  if (!environment) return undefined;
  const credentials =
    environment.cluster_credentials_id === null
      ? undefined
      : await getClusterCredentials(db, environment.cluster_credentials_id);
  return { environment, credentials };
}

/**
 * Deletes an environment and its credentials. Applications that targeted it keep existing with
 * managed_environment_id NULL (empty destination); their ids are returned so the caller can announce
 * them (insertOperation) in the same transaction.
 */
export async function deleteManagedEnvironment(
  trx: Transaction<Database>,
  id: string,
): Promise<{ deleted: boolean; affectedApplicationIds: string[] }> {
  const applications = await trx
    .selectFrom('application')
    .select('id')
    .where('managed_environment_id', '=', id)
    .forUpdate()
    .execute();
  const deleted = await trx
    .deleteFrom('managed_environment')
    .where('id', '=', id)
    .returning('cluster_credentials_id')
    .executeTakeFirst();
  if (deleted?.cluster_credentials_id) {
    await trx.deleteFrom('cluster_credentials').where('id', '=', deleted.cluster_credentials_id).execute();
  }
  return { deleted: deleted !== undefined, affectedApplicationIds: applications.map((a) => a.id) };
}

/** The tenant's Workspace environment, if it was created (read before ensureWorkspaceEnvironment writes). */
export async function getWorkspaceEnvironment(
  db: Kysely<Database>,
  clusterUserId: string,
): Promise<ManagedEnvironmentRow | undefined> {
  return await db
    .selectFrom('managed_environment')
    .selectAll()
    .where('cluster_user_id', '=', clusterUserId)
    .where('kind', '=', 'Workspace')
    .executeTakeFirst();
}

/** Marks an environment as changed (`updated_at = now()`), e.g. after its credentials were replaced. */
export async function touchManagedEnvironment(db: Kysely<Database>, id: string): Promise<void> {
  await db.updateTable('managed_environment').set({ updated_at: sql`now()` }).where('id', '=', id).execute();
}

/**
 * Ids of the environments reached through an Argo CD cluster Secret (those with credentials: every External
 * one, and a Workspace one whose tenant is on another cluster's instance), in id order: of one tenant when
 * `clusterUserId` is given; whose cluster Secret belongs on one instance when `engineInstanceId` is (see
 * isManagedEnvironmentOnEngineInstance).
 */
export async function listClusterSecretEnvironmentIds(
  db: Kysely<Database>,
  filter: { clusterUserId?: string; engineInstanceId?: string; id?: string } = {},
): Promise<string[]> {
  const rows = await clusterSecretEnvironmentIdsQuery(db, filter).orderBy('e.id').execute();
  return rows.map((row) => row.id);
}

/** The query of `listClusterSecretEnvironmentIds`, unordered (a subquery of readTenantProjectRows). */
export function clusterSecretEnvironmentIdsQuery(
  db: Kysely<Database>,
  filter: { clusterUserId?: string; engineInstanceId?: string; id?: string },
) {
  let query = db
    .selectFrom('managed_environment as e')
    .select('e.id')
    .where('e.cluster_credentials_id', 'is not', null);
  if (filter.clusterUserId !== undefined) query = query.where('e.cluster_user_id', '=', filter.clusterUserId);
  if (filter.id !== undefined) query = query.where('e.id', '=', filter.id);
  const instance = filter.engineInstanceId;
  if (instance !== undefined) {
    query = query.where((eb) =>
      eb.or([
        eb(
          'e.cluster_user_id',
          'in',
          eb
            .selectFrom('cluster_user as u')
            .select('u.id')
            .where((w) =>
              w.or([w('u.engine_instance_id', '=', instance), w('u.engine_instance_id', 'is', null)]),
            ),
        ),
        eb.exists(
          eb
            .selectFrom('application as a')
            .select('a.id')
            .whereRef('a.managed_environment_id', '=', 'e.id')
            .where('a.releasing_engine_instance_id', '=', instance),
        ),
      ]),
    );
  }
  return query;
}

/**
 * Whether an environment's cluster Secret belongs on this instance: its tenant is placed there (or
 * not placed yet: rows from before placement), or an application targeting it still has its Argo CD
 * Application there, being released in a move.
 */
export async function isManagedEnvironmentOnEngineInstance(
  db: Kysely<Database>,
  managedEnvironmentId: string,
  engineInstanceId: string,
): Promise<boolean> {
  const ids = await listClusterSecretEnvironmentIds(db, { id: managedEnvironmentId, engineInstanceId });
  return ids.length > 0;
}
