/**
 * Resolves `spec.destination.environment` of a GitOpsDeployment: the ManagedEnvironment of that name in
 * the deployment's own namespace (never another tenant's), usable only when its connection check
 * succeeded for the current generation and its rows exist.
 */
import { ManagedEnvironmentConditionType } from '@gitops/api';
import { type Database, getApiCrMappingByUid } from '@gitops/db';
import type { Informer } from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { ManagedEnvironmentObject } from '../kinds.ts';

export type ResolvedEnvironment = { ok: true; managedEnvironmentId: string } | { ok: false };

export type EnvironmentResolver = (namespace: string, name: string) => Promise<ResolvedEnvironment>;

function isConnected(object: ManagedEnvironmentObject): boolean {
  return (
    object.status?.conditions?.some(
      (c) =>
        c.type === ManagedEnvironmentConditionType.ConnectionInitializationSucceeded && c.status === 'True',
    ) ?? false
  );
}

export function createEnvironmentResolver(
  db: Kysely<Database>,
  environments: Informer<ManagedEnvironmentObject>,
): EnvironmentResolver {
  return async (namespace, name) => {
    const object = environments.get(namespace, name);
    if (!object?.metadata.uid || object.metadata.deletionTimestamp || !isConnected(object))
      return { ok: false };
    const mapping = await getApiCrMappingByUid(db, object.metadata.uid);
    if (!mapping?.managed_environment_id || mapping.cr_namespace !== namespace) return { ok: false };
    return { ok: true, managedEnvironmentId: mapping.managed_environment_id };
  };
}
