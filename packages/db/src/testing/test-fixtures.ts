import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import pg from 'pg';
import { insertApiCrMapping, type MappedRow } from '../api-cr-mapping.repository.ts';
import { insertApplication } from '../application.repository.ts';
import { upsertClusterUser } from '../cluster-user.repository.ts';
import type {
  ApplicationRow,
  ClusterUserRow,
  Database,
  EngineInstanceRow,
  OperationRow,
  RepositoryCredentialsRow,
  SyncOperationRow,
} from '../database.ts';
import { upsertEngineInstance } from '../engine-instance.repository.ts';
import { insertOperation, type OperationRequest } from '../operation.repository.ts';
import { holdAgentListeningLock } from '../operation-relay.repository.ts';
import { insertRepositoryCredentials } from '../repository-credentials.repository.ts';
import type { OperationResourceType } from '../schema-values.ts';
import { SealContext, type Sealer } from '../sealing.ts';
import { insertSyncOperation } from '../sync-operation.repository.ts';

/** Rows the db package's integration tests build on. Exported from `@gitops/db/testing`, not from the package's production index. */

/** An engine instance whose Argo CD namespace is its name, on the cluster `test-cluster` unless told another. */
export async function givenEngineInstance(
  db: Kysely<Database>,
  name = `argocd-${randomUUID()}`,
  options: { clusterIdentity?: string } = {},
): Promise<EngineInstanceRow> {
  return await upsertEngineInstance(db, {
    name,
    namespaceName: name,
    namespaceUid: randomUUID(),
    clusterIdentity: options.clusterIdentity ?? 'test-cluster',
  });
}

/** A new tenant; with `placedOn`, placed on that engine instance (its row as placed). */
export async function givenClusterUser(
  db: Kysely<Database>,
  options: { placedOn?: Pick<EngineInstanceRow, 'id'> } = {},
): Promise<ClusterUserRow> {
  const uid = randomUUID();
  const user = await upsertClusterUser(db, { uid, name: `tenant-${uid.slice(0, 8)}` });
  if (!options.placedOn) return user;
  return await db
    .updateTable('cluster_user')
    .set({ engine_instance_id: options.placedOn.id })
    .where('id', '=', user.id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function givenApplication(
  db: Kysely<Database>,
  input: {
    clusterUser: ClusterUserRow;
    engineInstance: EngineInstanceRow;
    managedEnvironmentId?: string | null;
  },
): Promise<ApplicationRow> {
  return await insertApplication(db, {
    name: `gitopsdepl-${randomUUID()}`,
    clusterUserId: input.clusterUser.id,
    engineInstanceId: input.engineInstance.id,
    managedEnvironmentId: input.managedEnvironmentId ?? null,
    spec: { source: { repoURL: 'https://github.com/org/repo', path: 'env/dev' } },
  });
}

/** `count` applications of the tenant on the instance (an instance's load), one after another. */
export async function givenApplications(
  db: Kysely<Database>,
  count: number,
  input: { clusterUser: ClusterUserRow; engineInstance: EngineInstanceRow },
): Promise<ApplicationRow[]> {
  const applications: ApplicationRow[] = [];
  for (let i = 0; i < count; i++) applications.push(await givenApplication(db, input));
  return applications;
}

/** An application of a new tenant on a new engine instance, with the two rows it stands on. */
export async function givenTenantApplication(db: Kysely<Database>): Promise<{
  clusterUser: ClusterUserRow;
  engineInstance: EngineInstanceRow;
  application: ApplicationRow;
}> {
  const clusterUser = await givenClusterUser(db);
  const engineInstance = await givenEngineInstance(db);
  const application = await givenApplication(db, { clusterUser, engineInstance });
  return { clusterUser, engineInstance, application };
}

/** A tenant placed on instance `a` with one application, and another instance `b` to move it to. */
export async function givenTenantToMove(db: Kysely<Database>): Promise<{
  a: EngineInstanceRow;
  b: EngineInstanceRow;
  tenant: ClusterUserRow;
  application: ApplicationRow;
}> {
  const a = await givenEngineInstance(db);
  const b = await givenEngineInstance(db);
  const tenant = await givenClusterUser(db, { placedOn: a });
  const application = await givenApplication(db, { clusterUser: tenant, engineInstance: a });
  return { a, b, tenant, application };
}

/**
 * A tenant's stored credentials of the repository `url` (its normalized URL the same unless given) on the
 * instance, from the user's Secret `secretName`: the values given in `sealed` sealed with its sealer, each in
 * its own context (what the backend stores), the others NULL.
 */
export async function givenRepositoryCredentials(
  db: Kysely<Database>,
  owner: { clusterUserId: string; engineInstanceId: string },
  repository: { url: string; normalizedUrl?: string; secretName: string },
  sealed?: { sealer: Sealer; username?: string; password?: string; sshPrivateKey?: string },
): Promise<RepositoryCredentialsRow> {
  const seal = (value: string | undefined, context: SealContext) =>
    sealed && value !== undefined ? sealed.sealer.seal(value, context) : null;
  return await insertRepositoryCredentials(db, {
    ...owner,
    repositoryUrl: repository.url,
    normalizedRepositoryUrl: repository.normalizedUrl ?? repository.url,
    secretName: repository.secretName,
    usernameSealed: seal(sealed?.username, SealContext.username),
    passwordSealed: seal(sealed?.password, SealContext.password),
    sshPrivateKeySealed: seal(sealed?.sshPrivateKey, SealContext.sshPrivateKey),
  });
}

/** A SyncRun's sync_operation row for an application of the tenant (deployment `d`, no revision). */
export async function givenSyncOperation(
  db: Kysely<Database>,
  input: { clusterUser: ClusterUserRow; application: ApplicationRow },
): Promise<SyncOperationRow> {
  return await insertSyncOperation(db, {
    clusterUserId: input.clusterUser.id,
    applicationId: input.application.id,
    deploymentName: 'd',
    revision: '',
  });
}

/**
 * What the backend writes for a change of a row, in one transaction: the change itself (`change`, when the
 * test plays one: a delete, a desired state) and the operation announcing it (`request`).
 */
export async function givenOperation(
  db: Kysely<Database>,
  request: OperationRequest,
  change?: (trx: Transaction<Database>) => Promise<unknown>,
): Promise<OperationRow> {
  return await db.transaction().execute(async (trx) => {
    await change?.(trx);
    return (await insertOperation(trx, request)).operation;
  });
}

/**
 * An operation that is not due for an hour from its commit on (an agent that hears of it leaves it Waiting): a
 * change committed and not carried out yet, without the race of making it not due in a second statement.
 */
export async function givenNotDueOperation(
  db: Kysely<Database>,
  request: OperationRequest,
): Promise<OperationRow> {
  return await db.transaction().execute(async (trx) => {
    const { operation } = await insertOperation(trx, request);
    await trx
      .updateTable('operation')
      .set({ next_attempt_at: new Date(Date.now() + 3_600_000) })
      .where('id', '=', operation.id)
      .execute();
    return operation;
  });
}

/**
 * Plays a cluster-agent's LISTEN connection: a session of its own (not from a pool) holding the
 * agent-listening lock of `engineInstanceId`. `end()` closes the session, as an agent that stops or crashes.
 */
export async function givenListeningAgentSession(
  url: string,
  engineInstanceId: string,
): Promise<{ held: boolean; end(): Promise<void> }> {
  const session = new pg.Client({ connectionString: url });
  await session.connect();
  const held = await holdAgentListeningLock(session, engineInstanceId);
  return { held, end: () => session.end() };
}

/** The operation's resource of each mapped row (the row a CR's mapping names is the resource announced). */
function resourceOf(row: MappedRow): { resourceType: OperationResourceType; resourceId: string } {
  switch (row.kind) {
    case 'GitOpsDeployment':
      return { resourceType: 'Application', resourceId: row.applicationId };
    case 'GitOpsDeploymentSyncRun':
      return { resourceType: 'SyncOperation', resourceId: row.syncOperationId };
    case 'GitOpsDeploymentManagedEnvironment':
      return { resourceType: 'ManagedEnvironment', resourceId: row.managedEnvironmentId };
    case 'GitOpsDeploymentRepositoryCredential':
      return { resourceType: 'RepositoryCredentials', resourceId: row.repositoryCredentialsId };
  }
}

/**
 * What the backend writes, inside the transaction that wrote `row`, for a tenant's CR: the CR's mapping to
 * the row and the operation announcing the row to `engineInstanceId`, owned by the tenant and the CR.
 */
export async function givenOwnedOperation(
  trx: Transaction<Database>,
  input: {
    tenant: ClusterUserRow;
    engineInstanceId: string;
    cr: { uid: string; name: string; namespace: string };
    row: MappedRow;
  },
): Promise<OperationRow> {
  const { tenant, cr, row } = input;
  await insertApiCrMapping(trx, { ...cr, namespaceUid: tenant.namespace_uid }, row);
  const { operation } = await insertOperation(trx, {
    engineInstanceId: input.engineInstanceId,
    ...resourceOf(row),
    ownerUserId: tenant.id,
    ownerCr: { kind: row.kind, ...cr },
  });
  return operation;
}
