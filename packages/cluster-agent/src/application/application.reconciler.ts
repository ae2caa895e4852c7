/**
 * Makes Argo CD match the database for one application row and for one tenant's AppProject. Level-based:
 * reads the current rows every time, so it serves operations, drift repair and orphan cleanup alike.
 */
import {
  type ApplicationRow,
  getApiCrMappingOfApplication,
  getApplication,
  getManagedEnvironment,
} from '@gitops/db';
import {
  collectionPath,
  deleteIfExists,
  HttpMethod,
  isKubeObject,
  type KubeObject,
  kubeRequest,
  type Logger,
  serverSideApply,
} from '@gitops/shared';
import type { AgentContext, ResourceOutcome } from '../agent-context.ts';
import {
  AgentLabel,
  ApplicationResource,
  AppProjectResource,
  appProjectName,
  FIELD_MANAGER,
  isUuid,
} from '../argocd.ts';
import { compareOwnedFields } from '../resync/owned-fields.ts';
import { canonicalJson } from '../status/application-state.projection.ts';
import { renderAppProject } from './app-project.render.ts';
import { type DestinationEnvironment, renderApplication } from './application.render.ts';
import { readTenantResources } from './tenant.queries.ts';

/** The fields we own on an Argo CD object (plus deletion), to tell our changes apart from status updates. */
export function ownedState(object: KubeObject): string {
  return canonicalJson({
    labels: object.metadata.labels ?? {},
    finalizers: object.metadata.finalizers ?? [],
    deletionTimestamp: object.metadata.deletionTimestamp ?? null,
    spec: object.spec ?? null,
  });
}

/** How often a pending delete is re-checked if the Application's delete event is missed. */
const PENDING_DELETE_RECHECK_MS = 10_000;

export interface ApplicationReconciler {
  /**
   * Application row `id` exists → apply its Application (and the tenant's AppProject); gone → delete it.
   * `recomputeProject`: recompute the AppProject from the rows (an operation announced a change); otherwise it
   * is only created when missing (drift repair; the resync checks AppProjects under their own keys).
   */
  reconcileApplication(
    id: string,
    options: {
      ownerUserIds: readonly string[];
      recomputeProject: boolean;
      signal: AbortSignal;
      logger: Logger;
    },
  ): Promise<ResourceOutcome>;
  /** The tenant's AppProject: applied from the rows, or deleted when the tenant has nothing left. */
  reconcileAppProject(
    clusterUserId: string,
    options: { signal: AbortSignal; logger: Logger; goneApplicationIds?: readonly string[] },
  ): Promise<ResourceOutcome>;
  /**
   * True when nothing changed since this Application row was last found matching Argo CD: the same row
   * (spec, environment, update time) and the same owned fields on the live Application. The drift resync
   * queues only rows that are not settled, so an idle resync costs no database round trip per application.
   */
  isSettled(row: ApplicationRow): boolean;
  /** The same for a tenant's AppProject: its owned fields are as they were when it was last found matching. */
  isProjectSettled(clusterUserId: string): boolean;
  /**
   * True (once) for the watch event of an Application exactly as our own apply left it (same
   * resourceVersion): it was just compared with its row, so it needs no second look.
   */
  isOwnApply(application: KubeObject): boolean;
}

export function createApplicationReconciler(ctx: AgentContext): ApplicationReconciler {
  const { kc, db, namespace, engineInstanceId } = ctx;
  /** Tenants of Applications whose deletion is pending, to update their AppProjects once they are gone. */
  const tenantsOfPendingDeletes = new Map<string, Set<string>>();
  /** Application id → the row and the live owned fields when they were last found matching. */
  const settledApplications = new Map<string, { row: string; live: string }>();
  /** Tenant → the live AppProject's owned fields when it was last found matching. */
  const settledProjects = new Map<string, string>();
  const rowState = (row: ApplicationRow) =>
    canonicalJson({
      spec: row.spec,
      environment: row.managed_environment_id,
      updated: row.updated_at.getTime(),
    });
  /** Application name → resourceVersion our last apply returned (until its watch event arrives). */
  const ownApplies = new Map<string, string>();

  async function environmentOf(managedEnvironmentId: string | null): Promise<DestinationEnvironment> {
    if (managedEnvironmentId === null) return { kind: 'None' };
    const environment = await getManagedEnvironment(db, managedEnvironmentId);
    if (!environment) return { kind: 'None' };
    return environment.kind === 'Workspace'
      ? { kind: 'Workspace' }
      : { kind: 'External', id: environment.id };
  }

  /** Live Applications carrying database-id `id`, read from the API server (the cache may lag a delete). */
  async function liveApplicationsOf(id: string, signal: AbortSignal): Promise<KubeObject[]> {
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: collectionPath({ ...ApplicationResource, namespace }),
      query: { labelSelector: `${AgentLabel.DatabaseId}=${id}` },
      signal,
    })) as { items?: unknown };
    return Array.isArray(list.items) ? list.items.filter(isKubeObject) : [];
  }

  async function reconcileAppProject(
    clusterUserId: string,
    options: { signal: AbortSignal; logger: Logger; goneApplicationIds?: readonly string[] },
  ): Promise<ResourceOutcome> {
    const name = appProjectName(clusterUserId);
    const tenant = isUuid(clusterUserId)
      ? await readTenantResources(db, clusterUserId, engineInstanceId)
      : undefined;
    const desired = tenant ? renderAppProject(tenant, namespace) : undefined;
    const live = ctx.appProjects.get(namespace, name);
    if (!desired) {
      settledProjects.delete(clusterUserId);
      // An Application still being deleted needs its project until Argo CD has pruned its resources.
      const gone = new Set(options.goneApplicationIds ?? []);
      const users = ctx.applications
        .list(namespace)
        .filter(
          (app) =>
            (app.spec as { project?: unknown } | undefined)?.project === name &&
            !gone.has(app.metadata.labels?.[AgentLabel.DatabaseId] ?? ''),
        );
      if (users.length > 0) {
        options.logger.debug(
          { appProject: name, applications: users.length },
          'AppProject kept while in use',
        );
        return { status: 'done', changed: false };
      }
      const deleted = await deleteIfExists(
        kc,
        { apiVersion: AppProjectResource.apiVersion, kind: AppProjectResource.kind, name, namespace },
        { signal: options.signal },
      );
      if (deleted)
        options.logger.info({ appProject: name }, 'AppProject deleted: the tenant has nothing left');
      return { status: 'done', changed: deleted };
    }
    if (live && !compareOwnedFields(live, desired, ['sourceRepos', 'destinations']).drifted) {
      settledProjects.set(clusterUserId, ownedState(live));
      return { status: 'done', changed: false };
    }
    settledProjects.delete(clusterUserId);
    const applied = await serverSideApply(kc, desired, {
      fieldManager: FIELD_MANAGER,
      force: true,
      signal: options.signal,
    });
    settledProjects.set(clusterUserId, ownedState(applied));
    options.logger.info({ appProject: name }, 'AppProject applied');
    return { status: 'done', changed: true };
  }

  async function deleteApplicationsOf(
    id: string,
    options: { ownerUserIds: readonly string[]; signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const live = await liveApplicationsOf(id, options.signal);
    const tenants = tenantsOfPendingDeletes.get(id) ?? new Set<string>();
    for (const owner of options.ownerUserIds) tenants.add(owner);
    let deleted = false;
    for (const app of live) {
      const tenant = app.metadata.labels?.[AgentLabel.ClusterUserId];
      if (tenant) tenants.add(tenant);
      if (app.metadata.deletionTimestamp) continue;
      deleted =
        (await deleteIfExists(
          kc,
          {
            apiVersion: ApplicationResource.apiVersion,
            kind: ApplicationResource.kind,
            name: app.metadata.name,
            namespace,
          },
          { uid: app.metadata.uid, signal: options.signal },
        )) || deleted;
      options.logger.info({ application: app.metadata.name }, 'Application deleted (its row is gone)');
    }
    if (live.length > 0) {
      tenantsOfPendingDeletes.set(id, tenants);
      return {
        status: 'pending',
        reason: `waiting for Argo CD to delete Application ${live.map((a) => a.metadata.name).join(', ')}`,
        requeueAfterMs: PENDING_DELETE_RECHECK_MS,
        changed: deleted,
      };
    }
    tenantsOfPendingDeletes.delete(id);
    for (const tenant of tenants) {
      await reconcileAppProject(tenant, { ...options, goneApplicationIds: [id] });
    }
    return { status: 'done', changed: deleted };
  }

  async function reconcileApplication(
    id: string,
    options: {
      ownerUserIds: readonly string[];
      recomputeProject: boolean;
      signal: AbortSignal;
      logger: Logger;
    },
  ): Promise<ResourceOutcome> {
    settledApplications.delete(id);
    const row = isUuid(id) ? await getApplication(db, id) : undefined;
    if (!row || row.engine_instance_id !== engineInstanceId) return await deleteApplicationsOf(id, options);

    const [environment, mapping] = await Promise.all([
      environmentOf(row.managed_environment_id),
      getApiCrMappingOfApplication(db, row.id),
    ]);
    const desired = renderApplication({
      id: row.id,
      name: row.name,
      clusterUserId: row.cluster_user_id,
      spec: row.spec,
      environment,
      owner: mapping ? { name: mapping.cr_name, namespace: mapping.cr_namespace } : undefined,
      namespace,
    });
    const project =
      options.recomputeProject || !ctx.appProjects.get(namespace, appProjectName(row.cluster_user_id))
        ? await reconcileAppProject(row.cluster_user_id, options)
        : { status: 'done' as const, changed: false };
    const live = ctx.applications.get(namespace, row.name);
    if (live?.metadata.deletionTimestamp) {
      return {
        status: 'pending',
        reason: `Application ${row.name} is being deleted; it is re-created once gone`,
        requeueAfterMs: PENDING_DELETE_RECHECK_MS,
      };
    }
    const comparison = compareOwnedFields(live, desired, ['syncPolicy']);
    if (live && !comparison.drifted) {
      settledApplications.set(row.id, { row: rowState(row), live: ownedState(live) });
      return { status: 'done', changed: project.status === 'done' && project.changed };
    }
    const applied = await serverSideApply(kc, desired, {
      fieldManager: FIELD_MANAGER,
      force: true,
      signal: options.signal,
    });
    if (comparison.unexpectedSpecFields.length === 0 && applied.metadata.resourceVersion) {
      ownApplies.set(row.name, applied.metadata.resourceVersion);
      settledApplications.set(row.id, { row: rowState(row), live: ownedState(applied) });
    }
    if (comparison.unexpectedSpecFields.length > 0) {
      // Fields we own but do not declare, set by another manager: apply cannot remove them.
      const patch = Object.fromEntries(comparison.unexpectedSpecFields.map((field) => [field, null]));
      await kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path: `${collectionPath({ ...ApplicationResource, namespace })}/${encodeURIComponent(row.name)}`,
        query: { fieldManager: FIELD_MANAGER },
        body: { spec: patch },
        contentType: 'application/merge-patch+json',
        signal: options.signal,
      });
    }
    options.logger.info({ application: row.name, created: live === undefined }, 'Application applied');
    return { status: 'done', changed: true };
  }

  function isOwnApply(application: KubeObject): boolean {
    const { name, resourceVersion } = application.metadata;
    const own = ownApplies.get(name);
    if (own === undefined) return false;
    ownApplies.delete(name);
    return own === resourceVersion;
  }

  function isSettled(row: ApplicationRow): boolean {
    const settled = settledApplications.get(row.id);
    const live = settled && ctx.applications.get(namespace, row.name);
    return live !== undefined && settled?.row === rowState(row) && settled.live === ownedState(live);
  }

  function isProjectSettled(clusterUserId: string): boolean {
    const settled = settledProjects.get(clusterUserId);
    if (settled === undefined) return false;
    const live = ctx.appProjects.get(namespace, appProjectName(clusterUserId));
    return live !== undefined && settled === ownedState(live);
  }

  return { reconcileApplication, reconcileAppProject, isOwnApply, isSettled, isProjectSettled };
}
