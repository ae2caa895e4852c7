/**
 * Makes Argo CD match the database for one application row and for one tenant's AppProject. Level-based:
 * reads the current rows every time, so it serves operations, drift repair and orphan cleanup alike.
 */
import {
  type ApplicationRow,
  type ApplicationWithDestination,
  completeApplicationAdoption,
  completeApplicationRelease,
  getApplicationWithDestination,
  isManagedEnvironmentOnEngineInstance,
} from '@gitops/db';
import {
  collectionPath,
  deleteIfExists,
  getObject,
  HttpMethod,
  isKubeObject,
  type KubeObject,
  kubeRequest,
  type Logger,
  serverSideApply,
} from '@gitops/shared';
import type { AgentContext, ResourceOutcome } from '../agent-context.ts';
import type { FeatureContext, ResourceContext } from '../agent-feature.ts';
import {
  AgentLabel,
  ApplicationResource,
  AppProjectResource,
  ARGOCD_RESOURCES_FINALIZER,
  allowsClusterResources,
  appProjectName,
  clusterAppProjectName,
  FIELD_MANAGER,
  isUuid,
  managedEnvironmentClusterName,
} from '../argocd.ts';
import { compareOwnedFields } from '../resync/owned-fields.ts';
import { canonicalJson } from '../status/application-state.projection.ts';
import { normaliseRepoUrl, renderAppProject, renderClusterAppProject } from './app-project.render.ts';
import {
  applicationProjectName,
  type DestinationEnvironment,
  renderApplication,
  requestsNamespaceCreation,
} from './application.render.ts';
import { readTenantResources } from './tenant.queries.ts';

/** Top-level AppProject spec fields we own: absent on the live object when we do not declare them. */
const PROJECT_OWNED_SPEC_FIELDS = [
  'sourceRepos',
  'destinations',
  'clusterResourceWhitelist',
  'clusterResourceBlacklist',
] as const;

/** The fields we own on an Argo CD object (plus deletion), to tell our changes apart from status updates. */
export function ownedState(object: KubeObject): string {
  return canonicalJson({
    labels: object.metadata.labels ?? {},
    finalizers: object.metadata.finalizers ?? [],
    deletionTimestamp: object.metadata.deletionTimestamp ?? null,
    spec: object.spec ?? null,
  });
}

/** settledProjects' mark of a project found rightly absent. */
const ABSENT = 'absent';

/** How often a pending delete is re-checked if the Application's delete event is missed. */
const PENDING_DELETE_RECHECK_MS = 10_000;
/** A sync in the way of a delete is looked at again this often, and waited for at most this long. */
const SYNC_END_RECHECK_MS = 1_000;
const SYNC_END_WAIT_MAX_MS = 30_000;
/**
 * An Application whose environment's cluster Secret is not (yet) here is deleted only once it is, and at most
 * this long after we first found it missing; looked at again this often. A Secret younger than
 * CLUSTER_SECRET_SETTLE_MS is waited for too (Argo CD's informer may not have it yet).
 */
const DESTINATION_WAIT_MAX_MS = 300_000;
const DESTINATION_RECHECK_MS = 2_000;
const CLUSTER_SECRET_SETTLE_MS = 3_000;
/** How often an application moved here looks whether the instance it left has released it (fallback). */
const RELEASE_RECHECK_MS = 5_000;

/** What a reconcile of an Application row is given (`recomputeProject`: see reconcileApplication). */
export type ReconcileApplicationOptions = Pick<ResourceContext, 'ownerUserIds' | 'signal' | 'logger'> & {
  recomputeProject: boolean;
};

export interface ApplicationReconciler {
  /**
   * Application row `id` exists → apply its Application (and the tenant's AppProject); gone → delete it.
   * `recomputeProject`: recompute the AppProject from the rows (an operation announced a change); otherwise it
   * is only created when missing (drift repair; the resync checks AppProjects under their own keys).
   */
  reconcileApplication(id: string, options: ReconcileApplicationOptions): Promise<ResourceOutcome>;
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
   * resourceVersion): it was just compared with its row, so it needs no second look. Also true for an event
   * that arrives while our apply of that Application is on its way: when the apply answers, a version other
   * than the one it wrote queues the Application again.
   */
  isOwnApply(application: KubeObject): boolean;
}

/** `spec.source` of an Application, or {} when it has none. */
function sourceOf(application: KubeObject): { targetRevision?: unknown } {
  const source = (application.spec as { source?: unknown } | undefined)?.source;
  return typeof source === 'object' && source !== null ? (source as { targetRevision?: unknown }) : {};
}

/**
 * A wait that is given up after `maxMs`: `overdue(key)` remembers when `key` was first waited for and is true
 * (forgetting it) once that is longer ago than `maxMs`; `done(key)` forgets it when the wait is over.
 */
function boundedWaits(maxMs: number) {
  const since = new Map<string, number>();
  return {
    overdue(key: string): boolean {
      const start = since.get(key) ?? Date.now();
      since.set(key, start);
      if (Date.now() - start <= maxMs) return false;
      since.delete(key);
      return true;
    },
    done: (key: string) => void since.delete(key),
  };
}

export function createApplicationReconciler(
  ctx: AgentContext & Pick<FeatureContext, 'enqueue'>,
): ApplicationReconciler {
  const { kc, db, namespace, engineInstanceId } = ctx;
  /** Tenants of Applications whose deletion is pending, to update their AppProjects once they are gone. */
  const tenantsOfPendingDeletes = new Map<string, Set<string>>();
  /** Application id → the row and the live owned fields when they were last found matching. */
  const settledApplications = new Map<string, { row: string; live: string }>();
  /**
   * AppProject name → its live owned fields when it was last found matching, or ABSENT when it was last found
   * rightly absent (a tenant's cluster-resource project usually is).
   */
  const settledProjects = new Map<string, string>();
  const rowState = (row: ApplicationRow) =>
    canonicalJson({
      spec: row.spec,
      environment: row.managed_environment_id,
      updated: row.updated_at.getTime(),
    });
  /** Application name → resourceVersion our last apply returned (until its watch event arrives). */
  const ownApplies = new Map<string, string>();
  /**
   * Application name → the versions the informer delivered while our apply of it was on its way. The watch
   * event often arrives before the apply's answer: whether it was our own write is known only then.
   */
  const applying = new Map<string, string[]>();

  function environmentOf(environment: ApplicationWithDestination['environment']): DestinationEnvironment {
    if (!environment) return { kind: 'None' };
    const { credentials } = environment;
    // A Workspace with credentials is the tenant's namespace on another cluster than this instance's: it is
    // reached through its cluster Secret, exactly like an External environment (namespace-scoped token).
    if (environment.kind === 'Workspace' && credentials === undefined) return { kind: 'Workspace' };
    return {
      kind: 'External',
      id: environment.id,
      allowsClusterResources:
        credentials !== undefined &&
        allowsClusterResources({
          namespaces: credentials.namespaces,
          clusterResources: credentials.cluster_resources,
        }),
    };
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

  /**
   * One of the tenant's projects: applied when `desired`, else deleted unless an Application (other than
   * `goneApplicationIds`) still names it: Argo CD needs it until it has pruned that Application's resources.
   */
  async function reconcileProject(
    name: string,
    desired: KubeObject | undefined,
    options: { signal: AbortSignal; logger: Logger; goneApplicationIds?: readonly string[] },
  ): Promise<boolean> {
    const live = ctx.appProjects.get(namespace, name);
    if (!desired) {
      // Absent from the cache: nothing to delete. A project created a moment ago (ours, not in the cache yet)
      // arrives as an add event, which queues the tenant again (application.feature.ts).
      if (!live) {
        settledProjects.set(name, ABSENT);
        return false;
      }
      settledProjects.delete(name);
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
        return false;
      }
      const deleted = await deleteIfExists(
        kc,
        { apiVersion: AppProjectResource.apiVersion, kind: AppProjectResource.kind, name, namespace },
        { signal: options.signal },
      );
      if (deleted) options.logger.info({ appProject: name }, 'AppProject deleted: no longer needed');
      return deleted;
    }
    // The cluster resource lists are ours on both projects: one another manager adds to the main project
    // would open the host cluster (Argo CD does not check the destination of a cluster-scoped object).
    const comparison = compareOwnedFields(live, desired, PROJECT_OWNED_SPEC_FIELDS);
    if (live && !comparison.drifted) {
      settledProjects.set(name, ownedState(live));
      return false;
    }
    settledProjects.delete(name);
    const applied = await serverSideApply(kc, desired, {
      fieldManager: FIELD_MANAGER,
      force: true,
      signal: options.signal,
    });
    if (comparison.unexpectedSpecFields.length > 0) {
      await kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path: `${collectionPath({ ...AppProjectResource, namespace })}/${encodeURIComponent(name)}`,
        query: { fieldManager: FIELD_MANAGER },
        body: { spec: Object.fromEntries(comparison.unexpectedSpecFields.map((field) => [field, null])) },
        contentType: 'application/merge-patch+json',
        signal: options.signal,
      });
    } else {
      // Settled as applied; after the extra patch the next look settles it.
      settledProjects.set(name, ownedState(applied));
    }
    options.logger.info({ appProject: name }, 'AppProject applied');
    return true;
  }

  /**
   * Tenant → the tail of its AppProject reconciles. Operations of different resources of one tenant run
   * concurrently, and each computes the tenant's projects from the rows it reads: without an order, a write
   * computed from older rows could land after one computed from newer rows and undo it until the next resync.
   * One after the other, each re-reads the rows, so the last write is always from the latest rows.
   */
  const projectQueues = new Map<string, Promise<unknown>>();
  function reconcileAppProject(
    clusterUserId: string,
    options: { signal: AbortSignal; logger: Logger; goneApplicationIds?: readonly string[] },
  ): Promise<ResourceOutcome> {
    const previous = projectQueues.get(clusterUserId) ?? Promise.resolve();
    const run = previous.catch(() => {}).then(() => reconcileAppProjectNow(clusterUserId, options));
    projectQueues.set(clusterUserId, run);
    void run
      .catch(() => {})
      .finally(() => {
        if (projectQueues.get(clusterUserId) === run) projectQueues.delete(clusterUserId);
      });
    return run;
  }

  async function reconcileAppProjectNow(
    clusterUserId: string,
    options: { signal: AbortSignal; logger: Logger; goneApplicationIds?: readonly string[] },
  ): Promise<ResourceOutcome> {
    const tenant = isUuid(clusterUserId)
      ? await readTenantResources(db, clusterUserId, engineInstanceId)
      : undefined;
    // Both before any Application moves between them; the main project exists whenever the other does.
    const main = await reconcileProject(
      appProjectName(clusterUserId),
      tenant ? renderAppProject(tenant, namespace) : undefined,
      options,
    );
    const cluster = await reconcileProject(
      clusterAppProjectName(clusterUserId),
      tenant ? renderClusterAppProject(tenant, namespace) : undefined,
      options,
    );
    return { status: 'done', changed: main || cluster };
  }

  /**
   * An Application is deleted only once no sync of it runs: Argo CD prunes what its cache knows when it
   * deletes an Application, and a resource a running sync has just created may not be in that cache yet (it
   * would be left behind; seen when a GitOpsDeployment was deleted 0.1 s after its creation). A sync that was
   * asked for but not started is withdrawn; a running one is asked to terminate. True while one is in the way.
   */
  const syncEnds = boundedWaits(SYNC_END_WAIT_MAX_MS);
  async function endSyncBeforeDelete(
    app: KubeObject,
    options: {
      signal: AbortSignal;
      logger: Logger;
      /**
       * A release (a move; nothing is pruned) lets a running sync finish instead of terminating it (until the
       * wait is over): the tenant may come back before the release ends and keep this Application, and Argo
       * CD does not retry a terminated automated sync of the same revision by itself.
       */
      letRunningFinish?: boolean;
    },
  ) {
    const state = (app.status as { operationState?: { phase?: unknown; finishedAt?: unknown } } | undefined)
      ?.operationState;
    const running = state?.phase === 'Running' || state?.phase === 'Terminating';
    const requested = app.operation !== undefined && app.operation !== null;
    const uid = app.metadata.uid ?? app.metadata.name;
    if (!running && !requested) {
      syncEnds.done(uid);
      return false;
    }
    if (syncEnds.overdue(uid)) {
      // Argo CD does not end it (not running, or stuck): the delete goes ahead rather than wait for ever. Its
      // operation is withdrawn first: Argo CD finalizes no deletion while an Application has one.
      options.logger.warn(
        { application: app.metadata.name },
        'the sync did not end; deleting the Application anyway',
      );
      if (requested) await withdrawOperation(app, options);
      return false;
    }
    const path = `${collectionPath({ ...ApplicationResource, namespace })}/${encodeURIComponent(app.metadata.name)}`;
    const patch = (body: Record<string, unknown>) =>
      kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path,
        query: { fieldManager: FIELD_MANAGER },
        body: { metadata: { resourceVersion: app.metadata.resourceVersion }, ...body },
        contentType: 'application/merge-patch+json',
        signal: options.signal,
      });
    if (requested && !running) {
      await patch({ operation: null });
      options.logger.info({ application: app.metadata.name }, 'sync request withdrawn: the Application goes');
      return true;
    }
    if (state?.phase === 'Running' && !options.letRunningFinish) {
      await patch({ status: { operationState: { phase: 'Terminating' } } });
      options.logger.info(
        { application: app.metadata.name },
        'running sync terminated: the Application goes',
      );
    }
    return true;
  }

  /** Removes the Application's `operation` (a sync asked for or retrying), leaving its status alone. */
  async function withdrawOperation(app: KubeObject, options: { signal: AbortSignal; logger: Logger }) {
    await kubeRequest(kc, {
      method: HttpMethod.PATCH,
      path: `${collectionPath({ ...ApplicationResource, namespace })}/${encodeURIComponent(app.metadata.name)}`,
      query: { fieldManager: FIELD_MANAGER },
      body: { operation: null },
      contentType: 'application/merge-patch+json',
      signal: options.signal,
    });
    options.logger.info(
      { application: app.metadata.name },
      'operation withdrawn: the Application is deleted',
    );
  }

  /**
   * Argo CD deletes an Application whose destination cluster it does not know without pruning anything
   * ("Resource entries removed from undefined cluster"): the deployed resources would be left behind. That
   * happens when the Application of an External environment goes while the environment's cluster Secret is
   * not here yet (a tenant just moved here, its ManagedEnvironment operation still in backoff). So while the
   * environment is this instance's and its Secret is missing or brand new, the delete waits (bounded, then
   * goes ahead as before; the environment is also queued, so the Secret is written now). Returns why it waits.
   */
  const destinationWaits = boundedWaits(DESTINATION_WAIT_MAX_MS);
  async function destinationNotReady(
    app: KubeObject,
    options: { signal: AbortSignal; logger: Logger },
  ): Promise<string | undefined> {
    const uid = app.metadata.uid ?? app.metadata.name;
    const destination = (app.spec as { destination?: { name?: unknown } } | undefined)?.destination?.name;
    const environmentId =
      typeof destination === 'string' && destination.startsWith(managedEnvironmentClusterName(''))
        ? destination.slice(managedEnvironmentClusterName('').length)
        : undefined;
    if (!isUuid(environmentId)) return undefined;
    const secret = await getObject(
      kc,
      { apiVersion: 'v1', kind: 'Secret', name: destination as string, namespace },
      { signal: options.signal },
    );
    const created = Date.parse(String(secret?.metadata.creationTimestamp ?? ''));
    const settled = secret !== undefined && !(Date.now() - created < CLUSTER_SECRET_SETTLE_MS);
    if (settled || !(await isManagedEnvironmentOnEngineInstance(db, environmentId, engineInstanceId))) {
      destinationWaits.done(uid);
      return undefined;
    }
    if (destinationWaits.overdue(uid)) {
      options.logger.warn(
        { application: app.metadata.name, clusterSecret: destination },
        'the destination cluster Secret did not appear; deleting the Application anyway (Argo CD will not prune)',
      );
      return undefined;
    }
    if (secret === undefined) ctx.enqueue('ManagedEnvironment', environmentId);
    return `waiting for cluster Secret ${destination} before deleting Application ${app.metadata.name} (Argo CD prunes nothing on a cluster it does not know)`;
  }

  async function deleteApplicationsOf(
    id: string,
    options: { ownerUserIds: readonly string[]; signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const live = await liveApplicationsOf(id, options.signal);
    const tenants = tenantsOfPendingDeletes.get(id) ?? new Set<string>();
    for (const owner of options.ownerUserIds) tenants.add(owner);
    let deleted = false;
    const syncing: string[] = [];
    const waitingFor: string[] = [];
    for (const app of live) {
      const tenant = app.metadata.labels?.[AgentLabel.ClusterUserId];
      if (tenant) tenants.add(tenant);
      if (app.metadata.deletionTimestamp) {
        // Deleted with an operation still set (e.g. by a process before a restart): Argo CD would never
        // finalize it, so the operation goes.
        if (app.operation !== undefined && app.operation !== null) await withdrawOperation(app, options);
        continue;
      }
      if (await endSyncBeforeDelete(app, options)) {
        syncing.push(app.metadata.name);
        continue;
      }
      const notReady = await destinationNotReady(app, options);
      if (notReady !== undefined) {
        waitingFor.push(notReady);
        continue;
      }
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
    /** Not gone yet: its tenants are kept (their AppProjects are updated once it is), and a later pass looks again. */
    const pending = (reason: string, requeueAfterMs: number) => {
      tenantsOfPendingDeletes.set(id, tenants);
      return { status: 'pending' as const, reason, requeueAfterMs, changed: deleted };
    };
    if (syncing.length > 0)
      return pending(
        `waiting for the sync of Application ${syncing.join(', ')} to end before deleting it`,
        SYNC_END_RECHECK_MS,
      );
    if (waitingFor.length > 0) return pending(waitingFor.join('; '), DESTINATION_RECHECK_MS);
    if (live.length > 0)
      return pending(
        `waiting for Argo CD to delete Application ${live.map((a) => a.metadata.name).join(', ')}`,
        PENDING_DELETE_RECHECK_MS,
      );
    tenantsOfPendingDeletes.delete(id);
    for (const tenant of tenants) {
      await reconcileAppProject(tenant, { ...options, goneApplicationIds: [id] });
    }
    return { status: 'done', changed: deleted };
  }

  /**
   * A moved application's old Argo CD Application goes without cascading: its resources finalizer is removed
   * first (also from one whose cascading delete had begun, which stops it), then it is deleted; a running
   * sync is let finish first (ended after the wait), a requested one withdrawn. Once none is left the row is
   * released to its new instance.
   */
  async function releaseApplicationsOf(
    row: ApplicationRow,
    options: { signal: AbortSignal; logger: Logger },
  ): Promise<ResourceOutcome> {
    const live = await liveApplicationsOf(row.id, options.signal);
    let changed = false;
    const syncing: string[] = [];
    for (const app of live) {
      const name = app.metadata.name;
      const finalizers = app.metadata.finalizers ?? [];
      if (finalizers.includes(ARGOCD_RESOURCES_FINALIZER)) {
        if (
          !app.metadata.deletionTimestamp &&
          (await endSyncBeforeDelete(app, { ...options, letRunningFinish: true }))
        ) {
          syncing.push(name);
          continue;
        }
        await kubeRequest(kc, {
          method: HttpMethod.PATCH,
          path: `${collectionPath({ ...ApplicationResource, namespace })}/${encodeURIComponent(name)}`,
          query: { fieldManager: FIELD_MANAGER },
          body: {
            metadata: {
              resourceVersion: app.metadata.resourceVersion,
              finalizers: finalizers.filter((f) => f !== ARGOCD_RESOURCES_FINALIZER),
            },
          },
          contentType: 'application/merge-patch+json',
          signal: options.signal,
        });
        changed = true;
      }
      if (!app.metadata.deletionTimestamp) {
        await deleteIfExists(
          kc,
          { apiVersion: ApplicationResource.apiVersion, kind: ApplicationResource.kind, name, namespace },
          { uid: app.metadata.uid, signal: options.signal },
        );
        changed = true;
      }
      options.logger.info(
        { application: name },
        'Application released without cascading: the tenant moved to another engine instance',
      );
    }
    if (syncing.length > 0) {
      return {
        status: 'pending',
        reason: `waiting for the sync of Application ${syncing.join(', ')} to end before releasing it`,
        requeueAfterMs: SYNC_END_RECHECK_MS,
        changed,
      };
    }
    if (live.length > 0) {
      // Deleted without a finalizer it is gone at once: the next look finds none and releases the row.
      return {
        status: 'pending',
        reason: `releasing Application ${row.name}`,
        requeueAfterMs: 1_000,
        changed,
      };
    }
    await reconcileAppProject(row.cluster_user_id, { ...options, goneApplicationIds: [row.id] });
    if (await completeApplicationRelease(db, row.id, engineInstanceId)) {
      options.logger.info({ application: row.name }, 'Application released to its new engine instance');
      changed = true;
      // Its environment's cluster Secret stayed here for it: now it may go too.
      if (row.managed_environment_id !== null) ctx.enqueue('ManagedEnvironment', row.managed_environment_id);
    }
    return { status: 'done', changed };
  }

  /** The desired Application of a row; a row that can never become one has nothing to take over either. */
  async function renderOrFail(
    input: Omit<Parameters<typeof renderApplication>[0], 'namespace'>,
    adopted: () => Promise<void>,
  ): Promise<KubeObject> {
    try {
      return renderApplication({ ...input, namespace });
    } catch (err) {
      // The move is over too.
      await adopted();
      throw err;
    }
  }

  /**
   * Server-side applies the desired Application, noting the versions of it the watch delivers meanwhile
   * (`isOwnApply` decides about them with the answer).
   */
  async function applyNoting(name: string, desired: KubeObject, signal: AbortSignal) {
    const seenMeanwhile: string[] = [];
    applying.set(name, seenMeanwhile);
    try {
      const applied = await serverSideApply(kc, desired, {
        fieldManager: FIELD_MANAGER,
        force: true,
        signal,
      });
      return { applied, seenMeanwhile };
    } finally {
      if (applying.get(name) === seenMeanwhile) applying.delete(name);
    }
  }

  /**
   * After an apply: a version other than ours that arrived meanwhile (another writer, just before or after us)
   * makes it look again; when the apply left it as desired (`settled`), the echo of ours wakes nothing and the
   * row and Application are remembered as matching.
   */
  function noteApplied(row: ApplicationRow, applied: KubeObject, seenMeanwhile: string[], settled: boolean) {
    const version = applied.metadata.resourceVersion;
    if (seenMeanwhile.some((seen) => seen !== version)) ctx.enqueue('Application', row.id);
    if (!settled || !version) return;
    if (!seenMeanwhile.includes(version)) ownApplies.set(row.name, version);
    settledApplications.set(row.id, { row: rowState(row), live: ownedState(applied) });
  }

  /** Fields we own but do not declare (set by another manager; apply cannot remove them), set to null. */
  async function removeUndeclaredFields(
    name: string,
    fields: readonly string[],
    revisionLeft: boolean,
    signal: AbortSignal,
  ) {
    const patch: Record<string, unknown> = Object.fromEntries(fields.map((field) => [field, null]));
    if (revisionLeft) patch.source = { targetRevision: null };
    await kubeRequest(kc, {
      method: HttpMethod.PATCH,
      path: `${collectionPath({ ...ApplicationResource, namespace })}/${encodeURIComponent(name)}`,
      query: { fieldManager: FIELD_MANAGER },
      body: { spec: patch },
      contentType: 'application/merge-patch+json',
      signal,
    });
  }

  async function reconcileApplication(
    id: string,
    options: ReconcileApplicationOptions,
  ): Promise<ResourceOutcome> {
    settledApplications.delete(id);
    const found = isUuid(id) ? await getApplicationWithDestination(db, id) : undefined;
    const row = found?.application;
    if (!found || !row) return await deleteApplicationsOf(id, options);
    // The tenant moved to another instance: what it deployed stays; that instance's Argo CD takes it over.
    if (row.engine_instance_id !== engineInstanceId) return await releaseApplicationsOf(row, options);
    if (row.releasing_engine_instance_id !== null && row.releasing_engine_instance_id !== engineInstanceId) {
      // Moved here; the instance it left still has its Application. Two Argo CDs must never manage the same
      // resources: created once that one is gone (its agent announces it; this look is the fallback).
      return {
        status: 'pending',
        reason: `the tenant moved here; waiting for engine instance ${row.releasing_engine_instance_id} to release Application ${row.name}`,
        requeueAfterMs: RELEASE_RECHECK_MS,
      };
    }

    /** Released to this instance by the one the tenant left: once its Application is here, the move is over. */
    const adopting = row.releasing_engine_instance_id === engineInstanceId;
    const adopted = async () => {
      if (adopting && (await completeApplicationAdoption(db, row.id, engineInstanceId)))
        options.logger.info(
          { application: row.name },
          'Application taken over from the instance the tenant left',
        );
    };
    const environment = environmentOf(found.environment);
    const desired = await renderOrFail(
      {
        id: row.id,
        name: row.name,
        clusterUserId: row.cluster_user_id,
        spec: row.spec,
        environment,
        owner: found.owner,
      },
      adopted,
    );
    const projectName = applicationProjectName(
      row.cluster_user_id,
      environment,
      requestsNamespaceCreation(row.spec),
    );
    const live = ctx.applications.get(namespace, row.name);
    const project =
      (options.recomputeProject && !projectCovers(row.cluster_user_id, projectName, desired, live)) ||
      !ctx.appProjects.get(namespace, projectName)
        ? await reconcileAppProject(row.cluster_user_id, options)
        : { status: 'done' as const, changed: false };
    if (live?.metadata.deletionTimestamp) {
      return {
        status: 'pending',
        reason: `Application ${row.name} is being deleted; it is re-created once gone`,
        requeueAfterMs: PENDING_DELETE_RECHECK_MS,
      };
    }
    const comparison = compareOwnedFields(live, desired, ['syncPolicy']);
    // A targetRevision the row no longer has (HEAD): declared fields compare as a subset, so look for it.
    const staleRevision =
      live !== undefined && sourceOf(desired).targetRevision === undefined && !!sourceOf(live).targetRevision;
    if (live && !comparison.drifted && !staleRevision) {
      await adopted();
      settledApplications.set(row.id, { row: rowState(row), live: ownedState(live) });
      return { status: 'done', changed: project.status === 'done' && project.changed };
    }
    const { applied, seenMeanwhile } = await applyNoting(row.name, desired, options.signal);
    await adopted();
    // Fields we own but do not declare, set by another manager: apply cannot remove them.
    const revisionLeft = staleRevision && !!sourceOf(applied).targetRevision;
    noteApplied(row, applied, seenMeanwhile, comparison.unexpectedSpecFields.length === 0 && !revisionLeft);
    if (comparison.unexpectedSpecFields.length > 0 || revisionLeft)
      await removeUndeclaredFields(row.name, comparison.unexpectedSpecFields, revisionLeft, options.signal);
    options.logger.info({ application: row.name, created: live === undefined }, 'Application applied');
    const liveProject = (live?.spec as { project?: unknown } | undefined)?.project;
    // It moved between the tenant's projects (its environment's scope changed): the one it left may be
    // unused now. The informer may not have seen the move yet, so this Application does not count.
    if (typeof liveProject === 'string' && liveProject !== projectName)
      await reconcileAppProject(row.cluster_user_id, { ...options, goneApplicationIds: [row.id] });
    return { status: 'done', changed: true };
  }

  function isOwnApply(application: KubeObject): boolean {
    const { name, resourceVersion } = application.metadata;
    const inFlight = applying.get(name);
    if (inFlight) {
      // Decided when the apply answers (above).
      inFlight.push(resourceVersion ?? '');
      return true;
    }
    const own = ownApplies.get(name);
    if (own === undefined) return false;
    ownApplies.delete(name);
    return own === resourceVersion;
  }

  /**
   * True when the tenant's projects need no recompute for this Application's operation: they are as we last
   * computed them, the Application's repository and destination are in the project it uses, and the live
   * Application (if any) already had that repository (so none may have left the tenant's list). The
   * recompute reads every application row of the tenant, so a tenant's n-th Application of a known
   * repository would otherwise cost O(n).
   */
  function projectCovers(
    clusterUserId: string,
    projectName: string,
    desired: KubeObject,
    live: KubeObject | undefined,
  ): boolean {
    const desiredSpec = desired.spec as { source?: { repoURL?: unknown }; destination?: { name?: unknown } };
    const repo =
      typeof desiredSpec.source?.repoURL === 'string' ? normaliseRepoUrl(desiredSpec.source.repoURL) : '';
    if (repo === '' || !isProjectSettled(clusterUserId)) return false;
    if (live) {
      const liveRepo = (live.spec as { source?: { repoURL?: unknown } } | undefined)?.source?.repoURL;
      if (typeof liveRepo !== 'string' || normaliseRepoUrl(liveRepo) !== repo) return false;
    }
    const projectSpec = ctx.appProjects.get(namespace, projectName)?.spec as
      | { sourceRepos?: unknown; destinations?: unknown }
      | undefined;
    const repos = Array.isArray(projectSpec?.sourceRepos) ? projectSpec.sourceRepos : [];
    const destinations = Array.isArray(projectSpec?.destinations) ? projectSpec.destinations : [];
    return (
      repos.includes(repo) &&
      destinations.some((d) => (d as { name?: unknown } | null)?.name === desiredSpec.destination?.name)
    );
  }

  function isSettled(row: ApplicationRow): boolean {
    const settled = settledApplications.get(row.id);
    const live = settled && ctx.applications.get(namespace, row.name);
    return live !== undefined && settled?.row === rowState(row) && settled.live === ownedState(live);
  }

  function isProjectSettled(clusterUserId: string): boolean {
    return [appProjectName(clusterUserId), clusterAppProjectName(clusterUserId)].every((name) => {
      const settled = settledProjects.get(name);
      if (settled === undefined) return false;
      const live = ctx.appProjects.get(namespace, name);
      return settled === ABSENT ? live === undefined : live !== undefined && settled === ownedState(live);
    });
  }

  return { reconcileApplication, reconcileAppProject, isOwnApply, isSettled, isProjectSettled };
}
