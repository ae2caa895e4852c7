/**
 * The database side of a ManagedEnvironment reconcile: one transaction writes the tenant, the sealed
 * cluster_credentials, the External managed_environment, the api_cr_mapping and the operation that
 * announces the change. A delete removes the rows and announces the environment and every application
 * that targeted it (their managed_environment_id becomes NULL by FK) in the same transaction.
 */
import {
  type ApiCrMappingRow,
  apiCrMappingsOfKind,
  type ClusterCredentialsInput,
  type ClusterCredentialsRow,
  type Database,
  deleteApiCrMapping,
  deleteManagedEnvironment,
  getApiCrMappingByUid,
  getClusterUser,
  getManagedEnvironmentWithCredentials,
  insertApiCrMapping,
  insertExternalEnvironment,
  insertOperations,
  listApplicationsOfManagedEnvironment,
  mappedCrOf,
  type OperationRequest,
  SealContext,
  type Sealer,
  sealCredentialsForInstances,
  touchManagedEnvironment,
  updateEnvironmentCredentials,
} from '@gitops/db';
import { jsonEqual } from '@gitops/shared';
import type { Kysely, Transaction } from 'kysely';
import { ManagedEnvironmentCr } from '../kinds.ts';
import { placeNamespaceTenant, type TenantOfNamespace, tenantEngineInstance } from '../placement.ts';

export interface EnvironmentIdentity {
  namespace: string;
  name: string;
  uid: string;
}

/** Sealing context of a bearer token: binds the ciphertext to its credentials row kind. */
export const BEARER_TOKEN_CONTEXT = SealContext.bearerToken;

/** Mappings of ManagedEnvironments with this namespace/name, optionally except the incarnation `exceptUid`. */
export const findEnvironmentMappings = apiCrMappingsOfKind(ManagedEnvironmentCr.kind);

export interface DesiredCredentials {
  apiUrl: string;
  bearerToken: string;
  allowInsecureSkipTlsVerify: boolean;
  namespaces: readonly string[];
  clusterResources: boolean;
  /** Base64 PEM CA bundle from the kubeconfig (undefined: none, or TLS verification skipped). */
  caData?: string | undefined;
}

/** The stored token of this CR's environment, unsealed (reuse of a created ServiceAccount's token). */
export async function storedBearerToken(
  db: Kysely<Database>,
  sealer: Sealer,
  crUid: string,
): Promise<{ apiUrl: string; token: string } | undefined> {
  const mapping = await getApiCrMappingByUid(db, crUid);
  if (!mapping?.managed_environment_id) return undefined;
  const found = await getManagedEnvironmentWithCredentials(db, mapping.managed_environment_id);
  if (!found?.credentials) return undefined;
  try {
    return {
      apiUrl: found.credentials.api_url,
      token: sealer.openString(found.credentials.bearer_token_sealed, BEARER_TOKEN_CONTEXT),
    };
  } catch {
    return undefined;
  }
}

export type ApplyEnvironmentResult = {
  change: 'none' | 'created' | 'updated';
  environmentId: string;
  operationId?: string;
};

/** Whether the stored credentials already are `desired` (and sealed with the active key). */
function sameCredentials(
  sealer: Sealer,
  stored: ClusterCredentialsRow,
  desired: DesiredCredentials,
): boolean {
  let token: string | undefined;
  try {
    token = sealer.openString(stored.bearer_token_sealed, BEARER_TOKEN_CONTEXT);
  } catch {
    token = undefined;
  }
  return (
    stored.api_url === desired.apiUrl &&
    token === desired.bearerToken &&
    !sealer.needsResealing(stored.bearer_token_sealed) &&
    stored.allow_insecure_skip_tls_verify === desired.allowInsecureSkipTlsVerify &&
    stored.cluster_resources === desired.clusterResources &&
    stored.ca_data === (desired.caData ?? null) &&
    jsonEqual(stored.namespaces, desired.namespaces)
  );
}

/**
 * Makes the rows of a connected ManagedEnvironment match `desired`; announces a change to the tenant's engine
 * instance (placing the tenant first when needed: PlacementRefusedError, and nothing is written, when it
 * cannot be placed).
 */
export async function applyEnvironment(
  trx: Transaction<Database>,
  sealer: Sealer,
  input: TenantOfNamespace & { environment: EnvironmentIdentity; credentials: DesiredCredentials },
): Promise<ApplyEnvironmentResult> {
  const { environment } = input;
  const mapping = await getApiCrMappingByUid(trx, environment.uid);
  const existing =
    mapping?.managed_environment_id != null
      ? await getManagedEnvironmentWithCredentials(trx, mapping.managed_environment_id)
      : undefined;
  const desired = input.credentials;
  const sealed = (): ClusterCredentialsInput => ({
    apiUrl: desired.apiUrl,
    bearerTokenSealed: sealer.seal(desired.bearerToken, BEARER_TOKEN_CONTEXT),
    allowInsecureSkipTlsVerify: desired.allowInsecureSkipTlsVerify,
    namespaces: desired.namespaces,
    clusterResources: desired.clusterResources,
    caData: desired.caData ?? null,
  });

  if (existing?.credentials) {
    if (sameCredentials(sealer, existing.credentials, desired))
      return { change: 'none', environmentId: existing.environment.id };
    const instance = await tenantEngineInstance(
      trx,
      existing.environment.cluster_user_id,
      input.requestedEngineInstance,
      input.tenantClusterIdentity,
    );
    await updateEnvironmentCredentials(trx, existing.environment.id, sealed());
    await touchManagedEnvironment(trx, existing.environment.id);
    // Sealed for the instance in this transaction: its agent reads them with the operation.
    await sealCredentialsForInstances(trx, sealer, {
      clusterUserIds: [existing.environment.cluster_user_id],
    });
    const operation = await ManagedEnvironmentCr.announce(trx, environment, {
      engineInstanceId: instance.id,
      resourceId: existing.environment.id,
      ownerUserId: existing.environment.cluster_user_id,
    });
    return { change: 'updated', environmentId: existing.environment.id, operationId: operation.id };
  }

  const { tenant: clusterUser, instance } = await placeNamespaceTenant(trx, environment.namespace, input);
  const created = await insertExternalEnvironment(trx, {
    clusterUserId: clusterUser.id,
    name: environment.name,
    credentials: sealed(),
  });
  await sealCredentialsForInstances(trx, sealer, { clusterUserIds: [clusterUser.id] });
  if (mapping) await deleteApiCrMapping(trx, mapping.id);
  await insertApiCrMapping(
    trx,
    { ...environment, namespaceUid: input.namespaceUid },
    { kind: ManagedEnvironmentCr.kind, managedEnvironmentId: created.environment.id },
  );
  const operation = await ManagedEnvironmentCr.announce(trx, environment, {
    engineInstanceId: instance.id,
    resourceId: created.environment.id,
    ownerUserId: clusterUser.id,
  });
  return { change: 'created', environmentId: created.environment.id, operationId: operation.id };
}

export interface DeletedEnvironment {
  environmentId: string;
  affectedApplicationIds: string[];
}

/**
 * Deletes the environments of these mappings (credentials too; applications' managed_environment_id
 * becomes NULL) and announces the environment (to its tenant's engine instance; a tenant never placed has
 * nothing on any) and each affected application (to its own), in `trx`.
 */
export async function deleteMappedEnvironments(
  trx: Transaction<Database>,
  mappings: readonly ApiCrMappingRow[],
): Promise<DeletedEnvironment[]> {
  const deleted: DeletedEnvironment[] = [];
  for (const mapping of mappings) {
    if (!mapping.managed_environment_id) continue;
    const found = await getManagedEnvironmentWithCredentials(trx, mapping.managed_environment_id);
    if (!found) continue;
    const applications = await listApplicationsOfManagedEnvironment(trx, found.environment.id);
    const { affectedApplicationIds } = await deleteManagedEnvironment(trx, found.environment.id);
    const owner = { kind: ManagedEnvironmentCr.kind, ...mappedCrOf(mapping) };
    const engineInstanceId = (await getClusterUser(trx, found.environment.cluster_user_id))
      ?.engine_instance_id;
    const requests: OperationRequest[] = [
      ...(engineInstanceId
        ? [
            {
              engineInstanceId,
              resourceType: 'ManagedEnvironment' as const,
              resourceId: found.environment.id,
              ownerUserId: found.environment.cluster_user_id,
              ownerCr: owner,
            },
          ]
        : []),
      ...applications.map((a) => ({
        engineInstanceId: a.engine_instance_id,
        resourceType: 'Application' as const,
        resourceId: a.id,
        ownerUserId: a.cluster_user_id,
      })),
    ];
    await insertOperations(trx, requests);
    deleted.push({ environmentId: found.environment.id, affectedApplicationIds });
  }
  return deleted;
}
