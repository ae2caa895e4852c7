import { type Kysely, sql, type Transaction } from 'kysely';
import { notifyApplicationStatesChanged } from './application-state.repository.ts';
import { lockClusterUser } from './cluster-user.repository.ts';
import type { Database } from './database.ts';
import { leastLoadedEngineInstance } from './engine-instance.repository.ts';
import { type InsertedOperation, insertOperations, type OperationRequest } from './operation.repository.ts';

/**
 * Moving a tenant between engine instances (docs/architecture.md, "Moving a tenant"):
 *
 *   backend   moveTenant: the tenant, its application and repository credential rows point at the new
 *             instance; each application row names the instance that still holds its old Argo CD
 *             Application (`releasing_engine_instance_id`); both instances are told (operations)
 *   old agent removes the old Application without cascading (the workloads stay), then
 *             completeApplicationRelease: the column names the new instance itself ("adopting") and the new
 *             instance is told, in one transaction
 *   new agent creates the Application once the column names no other instance; Argo CD adopts the resources
 *             (same name); then completeApplicationAdoption clears the column
 *
 * While the column is set (released or adopting), the backend does not delete the row: deleted between the
 * release and the adoption, no Argo CD would hold the resources to prune them.
 *
 * Every step is a committed row or operation, so a move interrupted by a crash of any process goes on after
 * the restart.
 */

export interface TenantMove {
  /** The instance the tenant was on. */
  from: string;
  to: string;
  applicationIds: string[];
  repositoryCredentialIds: string[];
  managedEnvironmentIds: string[];
  operations: InsertedOperation[];
}

/**
 * Moves a tenant to instance `to` inside `trx` (which must also hold whatever decided the move). Undefined
 * when the tenant does not exist, is not placed yet, or is on `to` already.
 */
export async function moveTenant(
  trx: Transaction<Database>,
  clusterUserId: string,
  to: string,
): Promise<TenantMove | undefined> {
  const from = (await lockClusterUser(trx, clusterUserId))?.engine_instance_id;
  if (!from || from === to) return undefined;
  await trx
    .updateTable('cluster_user')
    .set({ engine_instance_id: to })
    .where('id', '=', clusterUserId)
    .execute();
  // Rows are locked (and so moved) in id order: a concurrent writer of the same rows waits, never deadlocks.
  const before = await trx
    .selectFrom('application')
    .select(['id', 'engine_instance_id', 'releasing_engine_instance_id'])
    .where('cluster_user_id', '=', clusterUserId)
    .orderBy('id')
    .forUpdate()
    .execute();
  // The instance holding the old Application: the one releasing it already (its successor never created one),
  // else the current one. When that is the destination (moved back before the move ended) the row is
  // "adopting" there: its release may have deleted the Application already, so the agent makes sure it is
  // there again before the move counts as over (a delete meanwhile waits; completeApplicationAdoption).
  await trx
    .updateTable('application')
    .set({
      engine_instance_id: to,
      releasing_engine_instance_id: sql<string>`coalesce(releasing_engine_instance_id, engine_instance_id)`,
    })
    .where('cluster_user_id', '=', clusterUserId)
    .execute();
  const credentials = await trx
    .updateTable('repository_credentials')
    .set({ engine_instance_id: to })
    .where('cluster_user_id', '=', clusterUserId)
    .returning('id')
    .execute();
  // Every environment, the Workspace one included: it has credentials (a cluster Secret) exactly when the
  // tenant's instance runs on another cluster, which the caller may just have changed in `trx`.
  const environments = await trx
    .selectFrom('managed_environment')
    .select('id')
    .where('cluster_user_id', '=', clusterUserId)
    .execute();
  const requests: OperationRequest[] = [];
  const tell = (instances: Iterable<string>, resourceType: OperationRequest['resourceType'], id: string) => {
    for (const instance of new Set(instances)) {
      requests.push({ engineInstanceId: instance, resourceType, resourceId: id, ownerUserId: clusterUserId });
    }
  };
  for (const row of before) {
    tell(
      [row.engine_instance_id, row.releasing_engine_instance_id ?? row.engine_instance_id, to],
      'Application',
      row.id,
    );
  }
  // A sync not finished yet runs on the new instance (the old one ends any it runs when it releases the
  // Application, and then leaves the row to the new one). Its request is forgotten: the release may have
  // withdrawn it, also from an Application that stays because the tenant came back before the release ended;
  // the agent asks again only what Argo CD does not have (sync-operation.reconciler.ts never asks twice).
  const unfinishedSyncs =
    before.length === 0
      ? []
      : await trx
          .updateTable('sync_operation')
          .set({ requested_at: null, requested_application_uid: null })
          .where(
            'application_id',
            'in',
            before.map((row) => row.id),
          )
          .where('outcome', 'is', null)
          .returning('id')
          .execute();
  for (const row of unfinishedSyncs) tell([to], 'SyncOperation', row.id);
  for (const row of credentials) tell([from, to], 'RepositoryCredentials', row.id);
  for (const row of environments) tell([from, to], 'ManagedEnvironment', row.id);
  const operations = await insertOperations(trx, requests);
  // The instance is part of what the status path shows (status.engineInstance): it changed for every
  // application now, whether or not an Argo CD reports anything new soon (its agent may be away).
  await notifyApplicationStatesChanged(
    trx,
    before.map((row) => row.id),
  );
  return {
    from,
    to,
    applicationIds: before.map((row) => row.id),
    repositoryCredentialIds: credentials.map((row) => row.id),
    managedEnvironmentIds: environments.map((row) => row.id),
    operations,
  };
}

/**
 * The releasing instance's agent has removed its old Argo CD Application: the row is free for its new
 * instance, which is told at once; the column names that instance until it has created its Application
 * (completeApplicationAdoption). False when this instance was not releasing it (done already, or moved
 * back meanwhile).
 */
export async function completeApplicationRelease(
  db: Kysely<Database>,
  applicationId: string,
  engineInstanceId: string,
): Promise<boolean> {
  // A security-definer function (migration 0012): the operation it inserts is the new instance's, which the
  // releasing agent's own role can neither see nor write.
  const { rows } = await sql<{ released: boolean }>`
    select gitops_complete_application_release(${applicationId}::uuid, ${engineInstanceId}::uuid) as released`.execute(
    db,
  );
  return rows[0]?.released === true;
}

/**
 * The new instance's agent has created the Argo CD Application of a row it was adopting: the move of that
 * application is over (the column is cleared). False when there was nothing to adopt.
 */
export async function completeApplicationAdoption(
  db: Kysely<Database>,
  applicationId: string,
  engineInstanceId: string,
): Promise<boolean> {
  const result = await db
    .updateTable('application')
    .set({ releasing_engine_instance_id: null })
    .where('id', '=', applicationId)
    .where('engine_instance_id', '=', engineInstanceId)
    .where('releasing_engine_instance_id', '=', engineInstanceId)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** What one step of a drain did. */
export interface DrainStep {
  /** The tenants moved in this step (their namespace names), with the name of the instance each went to. */
  moved: { tenant: string; to: string; move: TenantMove }[];
  /** Tenants still placed on the instance. */
  remaining: number;
  /** True when tenants remain and no other instance takes them (all cordoned, or none registered). */
  noTarget: boolean;
}

/**
 * Moves up to `limit` tenants off an instance, each in its own transaction to the least loaded instance that
 * takes new tenants (the drained one is expected to be cordoned; it is excluded either way).
 */
export async function drainEngineInstance(
  db: Kysely<Database>,
  engineInstanceId: string,
  limit: number,
  /** The cluster tenants' namespaces live on: a tenant with deployments without environment stays on it. */
  tenantClusterIdentity: string,
): Promise<DrainStep> {
  const tenants = await db
    .selectFrom('cluster_user')
    .select(['id', 'namespace_name'])
    .where('engine_instance_id', '=', engineInstanceId)
    .orderBy('id')
    .limit(limit)
    .execute();
  const moved: DrainStep['moved'] = [];
  let noTarget = false;
  for (const tenant of tenants) {
    const step = await db.transaction().execute(async (trx) => {
      const ownCluster = await hasWorkspaceApplications(trx, tenant.id);
      const target = await leastLoadedEngineInstance(trx, {
        excluding: engineInstanceId,
        ...(ownCluster ? { clusterIdentity: tenantClusterIdentity } : {}),
      });
      if (!target) return 'noTarget' as const;
      const move = await moveTenant(trx, tenant.id, target.id);
      return move && { tenant: tenant.namespace_name, to: target.name, move };
    });
    if (step === 'noTarget') {
      noTarget = true;
      continue;
    }
    if (step) moved.push(step);
  }
  const remaining = await db
    .selectFrom('cluster_user')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('engine_instance_id', '=', engineInstanceId)
    .executeTakeFirstOrThrow();
  return { moved, remaining: Number(remaining.n), noTarget: noTarget && Number(remaining.n) > 0 };
}

/**
 * Whether the tenant has applications without an External environment (GitOpsDeployments without
 * spec.destination.environment): they deploy into its namespace on its own cluster, so it can only be on an
 * instance of that cluster.
 */
export async function hasWorkspaceApplications(
  db: Kysely<Database>,
  clusterUserId: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('application as a')
    .leftJoin('managed_environment as e', 'e.id', 'a.managed_environment_id')
    .select('a.id')
    .where('a.cluster_user_id', '=', clusterUserId)
    .where((eb) => eb.or([eb('e.kind', 'is', null), eb('e.kind', '=', 'Workspace')]))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
