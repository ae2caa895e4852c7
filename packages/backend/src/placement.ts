/**
 * Placement of tenants on engine instances, as the backend's reconcilers use it: every row a tenant owns on
 * the Argo CD side (applications, repository credentials, the operations of its ManagedEnvironments) goes to
 * the tenant's one instance, chosen once by `placeTenant` (@gitops/db) from the namespace label or the load.
 */
import { PlacementMessage } from '@gitops/api';
import {
  type ClusterUserRow,
  type Database,
  type EngineInstanceRow,
  type PlacementRefusal,
  placeTenant,
  upsertClusterUser,
} from '@gitops/db';
import type { Transaction } from 'kysely';

/** An object whose tenant cannot be placed looks again this often (an instance may register or uncordon). */
export const PLACEMENT_RECHECK_MS = 30_000;

/** What the user reads when a tenant cannot be placed. */
export function placementRefusalMessage(refusal: PlacementRefusal): string {
  switch (refusal.reason) {
    case 'UnknownEngineInstance':
      return PlacementMessage.unknownInstance(refusal.instance);
    case 'EngineInstanceCordoned':
      return PlacementMessage.instanceCordoned(refusal.instance);
    case 'NoSchedulableEngineInstance':
      return PlacementMessage.noSchedulableInstance;
  }
}

/** Thrown inside a transaction to roll it back when the tenant cannot be placed; carries the user's message. */
export class PlacementRefusedError extends Error {
  readonly refusal: PlacementRefusal;

  constructor(refusal: PlacementRefusal) {
    super(placementRefusalMessage(refusal));
    this.name = 'PlacementRefusedError';
    this.refusal = refusal;
  }
}

/**
 * What `work` resolves to, or the PlacementRefusedError that ended it as a value (its transaction wrote
 * nothing; the caller shows the refusal on its CR); any other error is thrown.
 */
export async function orPlacementRefused<T>(work: Promise<T>): Promise<T | PlacementRefusedError> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof PlacementRefusedError) return err;
    throw err;
  }
}

/** The tenant's instance (placing it now if needed). @throws PlacementRefusedError when it cannot be placed. */
export async function tenantEngineInstance(
  trx: Transaction<Database>,
  clusterUserId: string,
  requested: string | undefined,
  /** The cluster the tenant's namespace lives on (the backend's own): see placeTenant. */
  tenantClusterIdentity?: string,
): Promise<EngineInstanceRow> {
  const placement = await placeTenant(trx, clusterUserId, requested, tenantClusterIdentity);
  if ('refused' in placement) throw new PlacementRefusedError(placement.refused);
  return placement.placed;
}

/** What a reconciler knows of the tenant of its object's namespace, and of where it belongs. */
export interface TenantOfNamespace {
  namespaceUid: string;
  /** The engine instance the namespace's label asks for (used when the tenant is placed now). */
  requestedEngineInstance: string | undefined;
  /** The cluster the tenant's namespace lives on (placement without a label stays on it). */
  tenantClusterIdentity?: string;
}

/**
 * The tenant of the namespace `namespaceName` (created on first sight, and renamed with it; an unchanged one is
 * read and not written, in the same statement) and its instance (tenantEngineInstance: placed now if needed).
 * @throws PlacementRefusedError when it cannot be placed.
 */
export async function placeNamespaceTenant(
  trx: Transaction<Database>,
  namespaceName: string,
  namespace: TenantOfNamespace,
): Promise<{ tenant: ClusterUserRow; instance: EngineInstanceRow }> {
  const tenant = await upsertClusterUser(trx, { uid: namespace.namespaceUid, name: namespaceName });
  const instance = await tenantEngineInstance(
    trx,
    tenant.id,
    namespace.requestedEngineInstance,
    namespace.tenantClusterIdentity,
  );
  return { tenant, instance };
}
