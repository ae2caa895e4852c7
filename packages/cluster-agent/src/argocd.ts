/**
 * Names and constants of the Argo CD objects the agent owns (docs/api.md "Argo CD objects the agent owns",
 * docs/contracts/core-pipeline.md "What the agent derives").
 */
import { FieldManager, Finalizer, Label } from '@gitops/api';
import type { KubeObject, ObjectRef } from '@gitops/shared';

export const ARGOCD_API_VERSION = 'argoproj.io/v1alpha1';
export const ApplicationResource = {
  apiVersion: ARGOCD_API_VERSION,
  kind: 'Application',
  plural: 'applications',
};
export const AppProjectResource = {
  apiVersion: ARGOCD_API_VERSION,
  kind: 'AppProject',
  plural: 'appprojects',
};

/** The ref of Argo CD Application `name` in `namespace` (for getObject, mergePatch, deleteIfExists). */
export function applicationRef(namespace: string, name: string): ObjectRef {
  return { apiVersion: ApplicationResource.apiVersion, kind: ApplicationResource.kind, name, namespace };
}

/** The ref of Argo CD AppProject `name` in `namespace`. */
export function appProjectRef(namespace: string, name: string): ObjectRef {
  return { apiVersion: AppProjectResource.apiVersion, kind: AppProjectResource.kind, name, namespace };
}

/** Our server-side apply field manager (never another tool's). */
export const FIELD_MANAGER = FieldManager.ClusterAgent;

export const AgentLabel = {
  DatabaseId: Label.DatabaseId,
  ClusterUserId: 'managed-gitops.redhat.com/cluster-user-id',
  GitOpsDeploymentName: 'managed-gitops.redhat.com/gitopsdeployment-name',
  GitOpsDeploymentNamespace: 'managed-gitops.redhat.com/gitopsdeployment-namespace',
} as const;

/**
 * The Argo CD Secret (`secretType`: cluster or repository) of a tenant's row `databaseId`, labelled as Argo CD
 * and the agent find it, with `values` as its `data` (base64-encoded, as the API server stores it).
 */
export function argoCdSecret(
  secret: { name: string; namespace: string; secretType: string; databaseId: string; clusterUserId: string },
  values: Record<string, string>,
) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secret.name,
      namespace: secret.namespace,
      labels: {
        [Label.ArgoCDSecretType]: secret.secretType,
        [AgentLabel.DatabaseId]: secret.databaseId,
        [AgentLabel.ClusterUserId]: secret.clusterUserId,
      },
    },
    type: 'Opaque',
    data: Object.fromEntries(
      Object.entries(values).map(([key, value]) => [key, Buffer.from(value, 'utf8').toString('base64')]),
    ),
  };
}

/**
 * Annotations the agent sets on its Applications. `RowVersion`: the `updated_at` of the application row it was
 * last applied from (ISO 8601); an older row is never applied over it (application.reconciler.ts, a database
 * restored from an older backup). `RefreshServed`: the row's `refresh_requested_at` (ISO 8601) for which Argo CD
 * was last asked to refresh (application/refresh.ts): one refresh per request, also across restarts.
 */
export const AgentAnnotation = {
  RowVersion: 'managed-gitops.redhat.com/row-version',
  RefreshServed: 'managed-gitops.redhat.com/refresh-served',
} as const;

/**
 * Argo CD's annotation that asks its application controller to compare the Application with Git again now
 * (`normal`: the revision resolved afresh); Argo CD removes it once it has refreshed.
 */
export const REFRESH_ANNOTATION = 'argocd.argoproj.io/refresh';

export const ARGOCD_RESOURCES_FINALIZER = Finalizer.ArgoCDResources;

/** The Argo CD cluster name of the cluster Argo CD runs in. */
export const IN_CLUSTER = 'in-cluster';

/** The tenant's AppProject: `app-project-<cluster_user id>`. */
export function appProjectName(clusterUserId: string): string {
  return `app-project-${clusterUserId}`;
}

/**
 * The tenant's second AppProject, `app-project-<cluster_user id>-cluster`: the only one with a cluster
 * resource whitelist, and its destinations are only the tenant's External environments that allow
 * cluster-scoped resources (docs/api.md "Argo CD objects the agent owns"). Argo CD's whitelist is
 * project-wide and not checked against the destination, so it must never share a project with `in-cluster`.
 */
export function clusterAppProjectName(clusterUserId: string): string {
  return `app-project-${clusterUserId}-cluster`;
}

/**
 * True when Argo CD manages cluster-scoped objects through an environment's cluster Secret: no `namespaces`
 * (the whole cluster), or `namespaces` with `clusterResources: true` (gitops-engine's cluster cache refuses
 * cluster-level objects in namespaced mode otherwise). What the credentials may do is still up to the API
 * server.
 */
export function allowsClusterResources(credentials: {
  namespaces: readonly string[];
  clusterResources: boolean;
}): boolean {
  return credentials.namespaces.length === 0 || credentials.clusterResources;
}

/** The Argo CD cluster (Secret) name of an External managed environment. */
export function managedEnvironmentClusterName(managedEnvironmentId: string): string {
  return `managed-env-${managedEnvironmentId}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a uuid (row ids, database-id label values). */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** The database id an object of ours carries in its database-id label, when that is a valid one. */
export function databaseIdOf(object: Pick<KubeObject, 'metadata'>): string | undefined {
  const id = object.metadata.labels?.[Label.DatabaseId];
  return isUuid(id) ? id : undefined;
}

/** True for a valid Kubernetes label value (max 63 characters, alphanumeric at both ends). */
export function isLabelValue(value: string): boolean {
  return value.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(value);
}
