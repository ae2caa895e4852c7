/**
 * The database side of a GitOpsDeployment reconcile: one transaction writes the tenant, its Workspace
 * environment, the application row, the api_cr_mapping and the operation that announces the change.
 * Repositories come from @gitops/db; the few queries they do not offer are here.
 */
import {
  type ApiCrMappingRow,
  type ApplicationRow,
  apiCrMappingsOfKind,
  applicationName,
  type ClusterCredentialsInput,
  createApplicationOfNewDeployment,
  type Database,
  deleteApplication,
  type EngineInstanceRow,
  ensureWorkspaceEnvironment,
  getApplication,
  getApplicationByName,
  getEngineInstance,
  getPlacedTenant,
  getWorkspaceEnvironment,
  insertApiCrMapping,
  insertApplicationWithMappingAndOperation,
  insertOperation,
  lockApplication,
  type ManagedEnvironmentRow,
  mappedCrOf,
  type OperationRow,
  recordCrGeneration,
  recordDeletedCrs,
  setWorkspaceCredentials,
  updateApplication,
} from '@gitops/db';
import type { Kysely, Transaction } from 'kysely';
import { type JsonObject, jsonEqual } from '../json.ts';
import { GitOpsDeploymentCr } from '../kinds.ts';
import { type OperationsOutcome, operationsOutcome } from '../operation-outcome.ts';
import { placeNamespaceTenant, type TenantOfNamespace } from '../placement.ts';
import { WorkspaceAccessNeededError } from '../workspace-access/workspace-access.ts';

/** The identity of one GitOpsDeployment incarnation (a re-created one has a new uid). */
export interface DeploymentIdentity {
  namespace: string;
  name: string;
  uid: string;
  /** The metadata.generation a row is written from (api_cr_mapping.cr_generation); unset: not recorded. */
  generation?: number;
}

export interface DeletedApplication {
  applicationId: string;
  applicationName: string;
  owner: DeploymentIdentity;
  operationId: string;
}

/** What deleteMappedApplications did. */
export interface MappedDeletes {
  deleted: DeletedApplication[];
  /**
   * Applications left for now because the engine instance their tenant left is releasing their Argo CD
   * Application (a move): deleting the row then would leave the resources with no Argo CD to prune them.
   * The caller looks again shortly (RELEASE_WAIT_MS); the release takes about a second.
   */
  waitingForRelease: number;
}

/** How soon a delete that waits for a release looks again. */
export const RELEASE_WAIT_MS = 1_000;

/**
 * Deletes the applications of these mappings (their mappings and states cascade) and announces each
 * delete with an operation owned by the GitOpsDeployment of the mapping. An application being released
 * after a move is deleted only once the release is done (`waitingForRelease`): then its new instance
 * holds it and deletes it with pruning.
 *
 * Only mappings whose GitOpsDeployment is proven gone may be passed: the object carries a deletionTimestamp, or a
 * live read made after the mappings were read found another uid of the name or none (never a cache, which may
 * be behind). The uids of those deleted are recorded as deleted (`recordDeletedCrs`): a replica whose cache has
 * not seen the delete yet writes no row for them again.
 */
export async function deleteMappedApplications(
  trx: Transaction<Database>,
  mappings: readonly ApiCrMappingRow[],
): Promise<MappedDeletes> {
  const deleted: DeletedApplication[] = [];
  const goneUids: string[] = [];
  let waitingForRelease = 0;
  for (const mapping of mappings) {
    // Locked: a move committing meanwhile would otherwise be missed (the row read before it, the delete applied
    // after it, announced to the instance the tenant left, which may already have released the Application
    // without pruning: its resources left to no Argo CD).
    const application =
      mapping.application_id === null ? undefined : await lockApplication(trx, mapping.application_id);
    if (application?.releasing_engine_instance_id != null) {
      waitingForRelease++;
      continue;
    }
    // Recorded with the delete of its mapping (not before: a uid recorded as deleted never has a mapping).
    goneUids.push(mapping.cr_uid);
    if (!application) continue;
    // Its GitOpsDeployment is proven gone (above): the delete carries the proof that lets the agent prune.
    await deleteApplication(trx, application.id, { proven: true });
    const owner = mappedCrOf(mapping);
    const operation = await GitOpsDeploymentCr.announce(trx, owner, {
      engineInstanceId: application.engine_instance_id,
      resourceId: application.id,
      ownerUserId: application.cluster_user_id,
    });
    deleted.push({
      applicationId: application.id,
      applicationName: application.name,
      owner,
      operationId: operation.id,
    });
  }
  await recordDeletedCrs(trx, goneUids);
  return { deleted, waitingForRelease };
}

/** Mappings of GitOpsDeployments with this namespace/name, optionally except the incarnation `exceptUid`. */
export const findDeploymentMappings = apiCrMappingsOfKind(GitOpsDeploymentCr.kind);

/** The tenant's Workspace environment (an unchanged reconcile only reads it: ensureWorkspaceEnvironment). */
async function workspaceEnvironment(
  trx: Transaction<Database>,
  clusterUserId: string,
  namespaceName: string,
): Promise<ManagedEnvironmentRow> {
  return await ensureWorkspaceEnvironment(trx, { id: clusterUserId, namespaceName });
}

export interface DesiredApplication extends TenantOfNamespace {
  deployment: DeploymentIdentity;
  spec: JsonObject;
  /** An External environment (spec.destination.environment); unset: the tenant's Workspace environment. */
  managedEnvironmentId?: string;
  /**
   * The cluster the tenant's namespace lives on (the backend's own): without an environment a deployment goes
   * there, through the Workspace's credentials when its instance runs elsewhere (ensureWorkspaceReach).
   */
  tenantClusterIdentity: string;
  /** Credentials for the tenant's namespace, when a WorkspaceAccessNeededError asked for them. */
  workspaceCredentials?: ClusterCredentialsInput;
}

/**
 * A deployment without an environment on an instance of another cluster than the tenant's reaches the
 * tenant's namespace through its Workspace environment's credentials (workspace-access.ts). Stores
 * `desired.workspaceCredentials` when the Workspace has none yet, and tells the instance (its cluster
 * Secret); without them, asks the caller for them (WorkspaceAccessNeededError rolls the transaction back).
 */
async function ensureWorkspaceReach(
  trx: Transaction<Database>,
  desired: DesiredApplication,
  instance: EngineInstanceRow,
  clusterUserId: string,
): Promise<void> {
  if (desired.managedEnvironmentId !== undefined) return;
  if (instance.cluster_identity === desired.tenantClusterIdentity) return;
  const workspace = await workspaceEnvironment(trx, clusterUserId, desired.deployment.namespace);
  if (workspace.cluster_credentials_id !== null) return;
  if (!desired.workspaceCredentials) throw new WorkspaceAccessNeededError(instance.name);
  const { environment } = await setWorkspaceCredentials(
    trx,
    { id: clusterUserId, namespaceName: desired.deployment.namespace },
    desired.workspaceCredentials,
  );
  await insertOperation(trx, {
    engineInstanceId: instance.id,
    resourceType: 'ManagedEnvironment',
    resourceId: environment.id,
    ownerUserId: clusterUserId,
  });
}

/**
 * The tenant of a new application and its engine instance: for a placed tenant one statement
 * (getPlacedTenant); otherwise the tenant is ensured and placed (PlacementRefusedError when it cannot be).
 */
async function placedTenant(
  trx: Transaction<Database>,
  desired: DesiredApplication,
): Promise<{ clusterUserId: string; instance: EngineInstanceRow; workspaceEnvironmentId?: string }> {
  const namespace = desired.deployment.namespace;
  const placed = await getPlacedTenant(trx, desired.namespaceUid);
  if (placed && placed.clusterUser.namespace_name === namespace)
    return {
      clusterUserId: placed.clusterUser.id,
      instance: placed.instance,
      workspaceEnvironmentId: placed.workspaceEnvironmentId,
    };
  const { tenant, instance } = await placeNamespaceTenant(trx, namespace, desired);
  return { clusterUserId: tenant.id, instance };
}

export type ApplyResult =
  | { change: 'none'; application: ApplicationRow }
  | { change: 'created' | 'updated'; application: ApplicationRow; operation: OperationRow };

/**
 * The application row of `mapping` when it already matches `desired` (read without a transaction or lock:
 * a reconcile that finds nothing to change writes nothing, so it needs neither). `undefined` when something
 * differs or is missing; then `applyDesiredApplication` decides under the lock.
 */
export async function unchangedApplication(
  db: Kysely<Database>,
  mapping: ApiCrMappingRow,
  desired: Pick<DesiredApplication, 'spec' | 'managedEnvironmentId'>,
): Promise<ApplicationRow | undefined> {
  if (mapping.application_id === null) return undefined;
  const application = await getApplication(db, mapping.application_id);
  if (!application || !jsonEqual(application.spec, desired.spec)) return undefined;
  const environmentId =
    desired.managedEnvironmentId ?? (await getWorkspaceEnvironment(db, application.cluster_user_id))?.id;
  return environmentId !== undefined && application.managed_environment_id === environmentId
    ? application
    : undefined;
}

/**
 * Makes the application row of a live GitOpsDeployment match `desired` (Workspace target). Writes only
 * when the spec changed semantically or the destination environment differs; then announces it. A new
 * application goes to the tenant's engine instance (placing the tenant first: PlacementRefusedError when it
 * cannot be, and nothing is written).
 */
export async function applyDesiredApplication(
  trx: Transaction<Database>,
  desired: DesiredApplication,
  /** This incarnation's mapping, read in `trx` under the deployment's lock (`findDeploymentMappings`). */
  mapping: ApiCrMappingRow | undefined,
): Promise<ApplyResult> {
  const { deployment } = desired;
  const environmentOf = async (clusterUserId: string) =>
    desired.managedEnvironmentId !== undefined
      ? { id: desired.managedEnvironmentId }
      : await workspaceEnvironment(trx, clusterUserId, deployment.namespace);
  let application =
    mapping?.application_id != null ? await getApplication(trx, mapping.application_id) : undefined;

  if (!application) {
    const { clusterUserId, instance, workspaceEnvironmentId } = await placedTenant(trx, desired);
    const name = applicationName(deployment.uid);
    await ensureWorkspaceReach(trx, desired, instance, clusterUserId);
    const created = await insertApplicationWithMappingAndOperation(
      trx,
      {
        name,
        clusterUserId,
        engineInstanceId: instance.id,
        managedEnvironmentId:
          desired.managedEnvironmentId ?? workspaceEnvironmentId ?? (await environmentOf(clusterUserId)).id,
        spec: desired.spec,
      },
      { ...deployment, namespaceUid: desired.namespaceUid },
    );
    if (created) return { change: 'created', ...created };
    // A row of this name without a mapping (e.g. a mapping removed by hand) is adopted rather than duplicated.
    application = await getApplicationByName(trx, name);
    if (!application) throw new Error(`application ${name} vanished inside its transaction`);
  }

  if (!mapping) {
    await insertApiCrMapping(
      trx,
      { ...deployment, namespaceUid: desired.namespaceUid },
      { kind: GitOpsDeploymentCr.kind, applicationId: application.id },
    );
  }
  const environment = await environmentOf(application.cluster_user_id);
  if (jsonEqual(application.spec, desired.spec) && application.managed_environment_id === environment.id) {
    return { change: 'none', application };
  }
  if (desired.managedEnvironmentId === undefined && environment.id !== application.managed_environment_id) {
    const instance = await getEngineInstance(trx, application.engine_instance_id);
    if (instance) await ensureWorkspaceReach(trx, desired, instance, application.cluster_user_id);
  }
  const updated = await updateApplication(trx, application.id, {
    managedEnvironmentId: environment.id,
    spec: desired.spec,
  });
  if (!updated) throw new Error(`application ${application.id} vanished inside its transaction`);
  if (deployment.generation !== undefined)
    await recordCrGeneration(trx, deployment.uid, deployment.generation);
  const operation = await GitOpsDeploymentCr.announce(trx, deployment, {
    engineInstanceId: updated.engine_instance_id,
    resourceId: updated.id,
    ownerUserId: application.cluster_user_id,
  });
  return { change: 'updated', application: updated, operation };
}

/**
 * A new GitOpsDeployment's application in one statement when nothing about it needs the transaction
 * (createApplicationOfNewDeployment: a placed tenant, no mapping of the name, no Workspace credentials to
 * add); undefined otherwise, and then applyDesiredApplication decides under the lock.
 */
export async function createNewApplication(
  db: Kysely<Database>,
  desired: Omit<DesiredApplication, 'requestedEngineInstance' | 'workspaceCredentials'>,
): Promise<ApplyResult | undefined> {
  const { deployment } = desired;
  const created = await createApplicationOfNewDeployment(
    db,
    { ...deployment, namespaceUid: desired.namespaceUid },
    {
      name: applicationName(deployment.uid),
      spec: desired.spec,
      managedEnvironmentId: desired.managedEnvironmentId,
      tenantClusterIdentity: desired.tenantClusterIdentity,
    },
  );
  return created && { change: 'created', ...created };
}

/** The Application operations owned by GitOpsDeployment `ownerUid` (optionally for one application). */
export function applicationOperationsOutcome(
  db: Kysely<Database>,
  ownerUid: string,
  applicationId?: string,
): Promise<OperationsOutcome> {
  return operationsOutcome(db, GitOpsDeploymentCr, ownerUid, applicationId);
}
