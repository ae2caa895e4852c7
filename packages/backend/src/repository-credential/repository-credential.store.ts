/**
 * The database side of a GitOpsDeploymentRepositoryCredential reconcile: one transaction writes the tenant,
 * the repository_credentials row (credentials sealed), its api_cr_mapping and the `RepositoryCredentials`
 * operation that announces it (owner = the CR). Deletes are announced the same way.
 */
import {
  type ApiCrMappingRow,
  apiCrMappingsOfKind,
  type Database,
  deleteApiCrMapping,
  deleteRepositoryCredentials,
  getRepositoryCredentials,
  insertApiCrMapping,
  insertRepositoryCredentials,
  mappedCrOf,
  type OperationRow,
  type RepositoryCredentialsRow,
  type RepositoryType,
  SealContext,
  type Sealer,
  sealCredentialsForInstances,
  updateRepositoryCredentials,
} from '@gitops/db';
import { normalizeRepositoryUrl } from '@gitops/shared';
import type { Transaction } from 'kysely';
import { refreshApplicationsOfRepository } from '../gitops-deployment/application-refresh.ts';
import { RepositoryCredentialCr } from '../kinds.ts';
import { placeNamespaceTenant, type TenantOfNamespace } from '../placement.ts';
import type { GitCredentials } from './git-ls-remote.ts';

/** Additional authenticated data of each sealed column (one definition for both processes, in @gitops/db). */
export { normalizeRepositoryUrl, SealContext };

export interface RepositoryCredentialIdentity {
  namespace: string;
  name: string;
  uid: string;
}

/** Mappings of RepositoryCredentials with this namespace/name, optionally except the incarnation `exceptUid`. */
export const findRepositoryCredentialMappings = apiCrMappingsOfKind(RepositoryCredentialCr.kind);

/** Deletes the rows of these mappings, each delete announced by an operation. Returns the operations. */
export async function deleteMappedRepositoryCredentials(
  trx: Transaction<Database>,
  mappings: readonly ApiCrMappingRow[],
): Promise<OperationRow[]> {
  const operations: OperationRow[] = [];
  for (const mapping of mappings) {
    if (mapping.repository_credentials_id === null) continue;
    const row = await getRepositoryCredentials(trx, mapping.repository_credentials_id);
    if (!row) continue;
    await deleteRepositoryCredentials(trx, row.id);
    operations.push(await announceCredentials(trx, row, mappedCrOf(mapping)));
  }
  return operations;
}

/** The `RepositoryCredentials` operation announcing `row` to its engine instance, owned by the CR `owner`. */
async function announceCredentials(
  trx: Transaction<Database>,
  row: RepositoryCredentialsRow,
  owner: RepositoryCredentialIdentity,
): Promise<OperationRow> {
  return await RepositoryCredentialCr.announce(trx, owner, {
    engineInstanceId: row.engine_instance_id,
    resourceId: row.id,
    ownerUserId: row.cluster_user_id,
  });
}

export interface DesiredRepositoryCredentials extends TenantOfNamespace {
  cr: RepositoryCredentialIdentity;
  repositoryUrl: string;
  /** git, helm or oci (spec.type; git when absent). */
  repositoryType: RepositoryType;
  secretName: string;
  credentials: GitCredentials;
}

export type RepositoryCredentialsApplyResult =
  | { change: 'none'; row: RepositoryCredentialsRow }
  | { change: 'created' | 'updated'; row: RepositoryCredentialsRow; operation: OperationRow };

function openOrUndefined(sealer: Sealer, value: Buffer | null, context: string): string | undefined {
  if (value === null) return undefined;
  try {
    return sealer.openString(value, context);
  } catch {
    return undefined; // unreadable (e.g. a retired key): treated as different, so it is resealed
  }
}

function sameCredentials(sealer: Sealer, row: RepositoryCredentialsRow, c: GitCredentials): boolean {
  return (
    openOrUndefined(sealer, row.username_sealed, SealContext.username) === c.username &&
    openOrUndefined(sealer, row.password_sealed, SealContext.password) === c.password &&
    openOrUndefined(sealer, row.ssh_private_key_sealed, SealContext.sshPrivateKey) === c.sshPrivateKey &&
    !(row.username_sealed && sealer.needsResealing(row.username_sealed)) &&
    !(row.password_sealed && sealer.needsResealing(row.password_sealed)) &&
    !(row.ssh_private_key_sealed && sealer.needsResealing(row.ssh_private_key_sealed))
  );
}

/** The row's columns for `desired`, each credential sealed under its own context. */
function columnsOf(sealer: Sealer, desired: DesiredRepositoryCredentials) {
  const { credentials } = desired;
  const seal = (value: string | undefined, context: SealContext) =>
    value !== undefined ? sealer.seal(value, context) : null;
  return {
    repositoryUrl: desired.repositoryUrl,
    normalizedRepositoryUrl: normalizeRepositoryUrl(desired.repositoryUrl),
    repositoryType: desired.repositoryType,
    secretName: desired.secretName,
    usernameSealed: seal(credentials.username, SealContext.username),
    passwordSealed: seal(credentials.password, SealContext.password),
    sshPrivateKeySealed: seal(credentials.sshPrivateKey, SealContext.sshPrivateKey),
  };
}

/**
 * Makes the row of a live CR match `desired`; writes (and announces) only when the URL, Secret name or a
 * credential changed (credentials are compared after opening them). A new row goes to the tenant's engine
 * instance (PlacementRefusedError when the tenant cannot be placed; nothing is written).
 */
export async function applyRepositoryCredentials(
  trx: Transaction<Database>,
  sealer: Sealer,
  desired: DesiredRepositoryCredentials,
): Promise<RepositoryCredentialsApplyResult> {
  const { cr, credentials } = desired;
  const mapping = (await findRepositoryCredentialMappings(trx, cr.namespace, cr.name)).find(
    (m) => m.cr_uid === cr.uid,
  );
  const existing =
    mapping?.repository_credentials_id != null
      ? await getRepositoryCredentials(trx, mapping.repository_credentials_id)
      : undefined;
  const columns = columnsOf(sealer, desired);

  if (existing) {
    if (
      existing.repository_url === desired.repositoryUrl &&
      existing.repository_type === desired.repositoryType &&
      existing.secret_name === desired.secretName &&
      sameCredentials(sealer, existing, credentials)
    ) {
      return { change: 'none', row: existing };
    }
    const updated = await updateRepositoryCredentials(trx, existing.id, columns);
    if (!updated) throw new Error(`repository_credentials ${existing.id} vanished inside its transaction`);
    // Sealed for the instance in this transaction: its agent reads them with the operation.
    await sealCredentialsForInstances(trx, sealer, { clusterUserIds: [updated.cluster_user_id] });
    const operation = await announceCredentials(trx, updated, cr);
    // Argo CD uses the new credentials at once, not at its next poll of each application.
    await refreshApplicationsOfRepository(trx, updated.cluster_user_id, updated.normalized_repository_url);
    return { change: 'updated', row: updated, operation };
  }

  const { tenant, instance } = await placeNamespaceTenant(trx, cr.namespace, desired);
  const created = await insertRepositoryCredentials(trx, {
    clusterUserId: tenant.id,
    engineInstanceId: instance.id,
    ...columns,
  });
  await sealCredentialsForInstances(trx, sealer, { clusterUserIds: [tenant.id] });
  if (mapping) {
    // A mapping whose row is gone cannot exist (CASCADE), but be safe: replace it.
    await deleteApiCrMapping(trx, mapping.id);
  }
  await insertApiCrMapping(
    trx,
    { ...cr, namespaceUid: desired.namespaceUid },
    { kind: RepositoryCredentialCr.kind, repositoryCredentialsId: created.id },
  );
  const operation = await announceCredentials(trx, created, cr);
  // An application of that repository that could not read it may now.
  await refreshApplicationsOfRepository(trx, tenant.id, created.normalized_repository_url);
  return { change: 'created', row: created, operation };
}
