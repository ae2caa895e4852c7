/**
 * Makes Argo CD match the database for one application row and for one tenant's AppProject. Level-based:
 * reads the current rows every time, so it serves operations, drift repair and orphan cleanup alike.
 *
 * An Application row's reconcile (`reconcileApplication`): row gone → removal (application.removal.ts); moved
 * to another instance → release, moved here and not yet released → wait (tenant-move.ts); otherwise render,
 * apply (with the tenant's AppProjects, app-project.reconciler.ts; a new automated Application with its first
 * sync, first-sync.ts), complete an adoption, and ask Argo CD to refresh once when the row requests it
 * (refresh.ts). Every step is a function over `ApplicationDeps`;
 * `createApplicationReconciler` only assembles them.
 */
import type { ApplicationRow, ApplicationWithDestination } from '@gitops/db';
import {
  createObject,
  createOwnWrites,
  createTurns,
  type Informer,
  isAlreadyExists,
  jsonFingerprint,
  type KubeObject,
  type Logger,
  mergePatch,
  type OwnWrites,
  objectKey,
  type Predicate,
  serverSideApply,
} from '@gitops/shared';
import type { AgentContext, ResourceOutcome } from '../agent-context.ts';
import type { FeatureContext, ResourceContext } from '../agent-feature.ts';
import { applicationRef, FIELD_MANAGER } from '../argocd.ts';
import { compareOwnedFields, undeclaredOwnedPatch } from '../resync/owned-fields.ts';
import {
  type AppProjectDeps,
  type AppProjectOptions,
  isProjectSettled,
  projectCovers,
  reconcileAppProject,
} from './app-project.reconciler.ts';
import {
  type BoundedWaits,
  boundedWaits,
  DESTINATION_WAIT_MAX_MS,
  deleteApplicationsOf,
  PENDING_DELETE_RECHECK_MS,
  type RemovalDeps,
  SYNC_END_WAIT_MAX_MS,
} from './application.removal.ts';
import {
  applicationProjectName,
  type DestinationEnvironment,
  environmentOf,
  renderApplication,
  requestsNamespaceCreation,
} from './application.render.ts';
import { deletionBudgetOf } from './deletion-guard.ts';
import { withFirstSync } from './first-sync.ts';
import { OLDER_ROW_WAIT_MAX_MS, olderRow } from './older-row.ts';
import { CREDENTIALS_WAIT_MAX_MS, type RefreshDeps, refreshIfRequested } from './refresh.ts';
import { createSettled, ownedFields, type Settled } from './settled.ts';
import { awaitingRelease, completeAdoption, moveStepOf, releaseApplicationsOf } from './tenant-move.ts';

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
  reconcileApplication(
    id: string,
    found: ApplicationWithDestination | undefined,
    options: ReconcileApplicationOptions,
  ): Promise<ResourceOutcome>;
  /** The tenant's AppProject: applied from the rows, or deleted when the tenant has nothing left. */
  reconcileAppProject(clusterUserId: string, options: AppProjectOptions): Promise<ResourceOutcome>;
  /**
   * True when nothing changed since this Application row was last found matching Argo CD: the same row
   * (spec, environment, update time) and the same owned fields on the live Application. The drift resync
   * queues only rows that are not settled, so an idle resync costs no database round trip per application.
   */
  isSettled(row: ApplicationRow): boolean;
  /** The same for a tenant's AppProject: its owned fields are as they were when it was last found matching. */
  isProjectSettled(clusterUserId: string): boolean;
  /**
   * The echo filter of our applies (`createOwnWrites`; it keeps state): drops the create or update delivering
   * an Application exactly as our apply left it (just compared with its row); holds back one arriving during
   * the apply, whose answer then queues the Application again if that was another version.
   */
  readonly ownApplies: Predicate;
}

export type ApplicationDeps = AppProjectDeps &
  RemovalDeps &
  RefreshDeps & {
    applications: Pick<Informer<KubeObject>, 'get' | 'list'>;
    /** Application id → its row and live owned fields when last found matching (`applicationFingerprint`). */
    settledApplications: Settled;
    /** Our applies of Applications, keyed by object key, whose echo the feature's predicate drops. */
    ownApplies: OwnWrites;
    /** Rows older than their live Application, waited for (older-row.ts). */
    olderRowWaits: BoundedWaits;
  };

/**
 * What settles an Application: its row (spec, environment, update time, the refresh it requests) and the live
 * owned fields. A refresh requested since (a stamp that leaves `updated_at` alone) unsettles it, so the drift
 * resync serves a request whose operation was lost.
 */
export function applicationFingerprint(row: ApplicationRow, live: KubeObject): string {
  return jsonFingerprint({
    row: {
      spec: row.spec,
      environment: row.managed_environment_id,
      updated: row.updated_at.getTime(),
      refresh: row.refresh_requested_at?.getTime() ?? null,
    },
    live: ownedFields(live),
  });
}

export function isSettled(
  deps: Pick<ApplicationDeps, 'namespace' | 'applications' | 'settledApplications'>,
  row: ApplicationRow,
): boolean {
  const live = deps.applications.get(deps.namespace, row.name);
  return live !== undefined && deps.settledApplications.matches(row.id, applicationFingerprint(row, live));
}

/** `spec.source` of an Application, or {} when it has none. */
function sourceOf(application: KubeObject): { targetRevision?: unknown } {
  const source = (application.spec as { source?: unknown } | undefined)?.source;
  return typeof source === 'object' && source !== null ? (source as { targetRevision?: unknown }) : {};
}

/** A targetRevision the row no longer has (HEAD): declared fields compare as a subset, so look for it. */
export function hasStaleRevision(desired: KubeObject, live: KubeObject | undefined): boolean {
  return (
    live !== undefined && sourceOf(desired).targetRevision === undefined && !!sourceOf(live).targetRevision
  );
}

/** The desired Application of a row; a row that can never become one has nothing to take over either. */
async function renderOrFail(
  deps: ApplicationDeps,
  found: ApplicationWithDestination,
  environment: DestinationEnvironment,
  logger: Logger,
): Promise<KubeObject> {
  const row = found.application;
  try {
    return renderApplication({
      id: row.id,
      name: row.name,
      clusterUserId: row.cluster_user_id,
      spec: row.spec,
      environment,
      owner: found.owner,
      namespace: deps.namespace,
      rowVersion: row.updated_at,
    });
  } catch (err) {
    // The move is over too.
    await completeAdoption(deps, row, logger);
    throw err;
  }
}

/**
 * The tenant's projects for this Application: recomputed from the rows when an operation announced a change
 * they may not cover yet, created when the one it uses is missing; else left alone.
 */
async function ensureProject(
  deps: ApplicationDeps,
  row: ApplicationRow,
  projectName: string,
  desired: KubeObject,
  live: KubeObject | undefined,
  options: ReconcileApplicationOptions,
): Promise<ResourceOutcome> {
  const needed =
    (options.recomputeProject && !projectCovers(deps, row.cluster_user_id, projectName, desired, live)) ||
    !deps.appProjects.get(deps.namespace, projectName);
  return needed
    ? await deps.reconcileAppProject(row.cluster_user_id, options)
    : { status: 'done', changed: false };
}

/**
 * Writes the desired Application inside the echo filter's write window: created when the cache has none
 * (`create`: a POST, which costs the API server less than an apply that creates; one already there after all is
 * applied to), else server-side applied. A version other than ours that arrived meanwhile (another writer, just
 * before or after us) queues it again. Only a write that left it as desired (`settledBy`) registers its echo;
 * otherwise `end` gets no object and counts every version held, ours too, so it is looked at again — as the
 * clean-up patch that follows has its own event do anyway.
 */
export async function applyNoting(
  deps: Pick<ApplicationDeps, 'kc' | 'enqueue' | 'ownApplies'>,
  row: Pick<ApplicationRow, 'id'>,
  desired: KubeObject,
  settledBy: (applied: KubeObject) => boolean,
  {
    signal,
    resourceVersion,
    create = false,
  }: { signal: AbortSignal; resourceVersion?: string | undefined; create?: boolean },
): Promise<{ applied: KubeObject; settled: boolean }> {
  const key = objectKey(desired);
  deps.ownApplies.begin(key);
  let applied: KubeObject;
  try {
    applied =
      (create && (await createUnlessThere(deps, desired, signal))) ||
      (await serverSideApply(deps.kc, desired, {
        fieldManager: FIELD_MANAGER,
        force: true,
        signal,
        ...(resourceVersion ? { resourceVersion } : {}),
      }));
  } catch (err) {
    // The failed reconcile is retried with backoff: it looks at whatever arrived meanwhile then.
    deps.ownApplies.end(key, undefined);
    throw err;
  }
  const settled = settledBy(applied);
  if (deps.ownApplies.end(key, settled ? applied : undefined)) deps.enqueue('Application', row.id);
  return { applied, settled };
}

/** The Application created as desired; undefined when one of its name is there already (the cache is behind). */
async function createUnlessThere(
  deps: Pick<ApplicationDeps, 'kc'>,
  desired: KubeObject,
  signal: AbortSignal,
): Promise<KubeObject | undefined> {
  try {
    return await createObject(deps.kc, desired, { fieldManager: FIELD_MANAGER, signal });
  } catch (err) {
    if (isAlreadyExists(err)) return undefined;
    throw err;
  }
}

/**
 * Spec fields of an Application that are ours whether we declare them or not: one we do not declare for a row
 * must be absent (a syncPolicy a manual deployment does not have, a Helm section a deployment dropped).
 */
export const OWNED_SPEC_FIELDS = [
  'syncPolicy',
  'ignoreDifferences',
  'revisionHistoryLimit',
  // The source as a whole (a path the row replaced by a chart, a source the row replaced by sources) and each
  // of its sections, which other managers may have added to one the row keeps.
  'source',
  'sources',
  'source.helm',
  'source.kustomize',
  'source.directory',
] as const;

/**
 * What the written Application has in the spec sections we own and the row does not declare, removed: set by
 * another manager, or by our create (its entry is an Update, not an Apply), an apply leaves them in place.
 */
async function removeUndeclaredFields(
  deps: Pick<ApplicationDeps, 'kc' | 'namespace'>,
  name: string,
  spec: Record<string, unknown>,
  signal: AbortSignal,
): Promise<void> {
  await mergePatch(
    deps.kc,
    applicationRef(deps.namespace, name),
    { spec },
    { fieldManager: FIELD_MANAGER, signal },
  );
}

/** The live Application matches its row already: remembered as settled (and an adoption is over). */
async function settleUnchanged(
  deps: ApplicationDeps,
  row: ApplicationRow,
  live: KubeObject,
  project: ResourceOutcome,
  logger: Logger,
): Promise<ResourceOutcome> {
  await completeAdoption(deps, row, logger);
  deps.settledApplications.settle(row.id, applicationFingerprint(row, live));
  return { status: 'done', changed: project.status === 'done' && project.changed };
}

/**
 * What applyApplication found: the live Application (none: created), the project it belongs in now, and the
 * resourceVersion an apply carrying our first sync requires (first-sync.ts).
 */
type Drift = {
  live?: KubeObject;
  resourceVersion?: string | undefined;
  projectName: string;
};

/**
 * The row's Application is (re)written: applied, adopted if the row was moved here, undeclared owned fields
 * removed; the project it left, if it moved between the tenant's projects, is updated.
 */
async function writeApplication(
  deps: ApplicationDeps,
  row: ApplicationRow,
  desired: KubeObject,
  { live, resourceVersion, projectName }: Drift,
  options: ReconcileApplicationOptions,
): Promise<ResourceOutcome> {
  let undeclared: Record<string, unknown> | undefined;
  const { applied, settled } = await applyNoting(
    deps,
    row,
    desired,
    (object) => {
      undeclared = undeclaredOwnedPatch(object.spec, desired.spec, OWNED_SPEC_FIELDS);
      return undeclared === undefined;
    },
    { signal: options.signal, resourceVersion, create: live === undefined },
  );
  await completeAdoption(deps, row, options.logger);
  if (settled && applied.metadata.resourceVersion)
    deps.settledApplications.settle(row.id, applicationFingerprint(row, applied));
  // Fields we own but do not declare, left by another manager or our create: the apply did not remove them.
  if (undeclared) await removeUndeclaredFields(deps, row.name, undeclared, options.signal);
  options.logger.info({ application: row.name, created: live === undefined }, 'Application applied');
  const liveProject = (live?.spec as { project?: unknown } | undefined)?.project;
  // It moved between the tenant's projects (its environment's scope changed): the one it left may be
  // unused now. The informer may not have seen the move yet, so this Application does not count.
  if (typeof liveProject === 'string' && liveProject !== projectName)
    await deps.reconcileAppProject(row.cluster_user_id, { ...options, goneApplicationIds: [row.id] });
  return { status: 'done', changed: true };
}

/** An Application row that is this instance's: render, project, apply (or find it matching). */
export async function applyApplication(
  deps: ApplicationDeps,
  found: ApplicationWithDestination,
  options: ReconcileApplicationOptions,
): Promise<ResourceOutcome> {
  const row = found.application;
  const environment = environmentOf(found.environment);
  const desired = await renderOrFail(deps, found, environment, options.logger);
  const projectName = applicationProjectName(
    row.cluster_user_id,
    environment,
    requestsNamespaceCreation(row.spec),
  );
  const live = deps.applications.get(deps.namespace, row.name);
  const project = await ensureProject(deps, row, projectName, desired, live, options);
  if (live?.metadata.deletionTimestamp) {
    return {
      status: 'pending',
      reason: `Application ${row.name} is being deleted; it is re-created once gone`,
      requeueAfterMs: PENDING_DELETE_RECHECK_MS,
    };
  }
  const { drifted } = compareOwnedFields(live, desired, OWNED_SPEC_FIELDS);
  const staleRevision = hasStaleRevision(desired, live);
  const adopting = moveStepOf(row, deps.engineInstanceId) === 'adopt';
  const applying = withFirstSync(desired, live, { adopting, environment });
  if (live && !drifted && !staleRevision && !applying.startsSync)
    return await settleUnchanged(deps, row, live, project, options.logger);
  const older = olderRow(deps, row, live, options.logger);
  if (older) return older;
  return await writeApplication(
    deps,
    row,
    applying.desired,
    { live, resourceVersion: applying.resourceVersion, projectName },
    options,
  );
}

/**
 * Application row `id`, as read with the start of its operations (`startDueOperationsOfApplication`; undefined:
 * gone): removed, released, waited for or applied and refreshed if it asks (header).
 */
export async function reconcileApplication(
  deps: ApplicationDeps,
  id: string,
  found: ApplicationWithDestination | undefined,
  options: ReconcileApplicationOptions,
): Promise<ResourceOutcome> {
  deps.settledApplications.forget(id);
  if (!found) {
    deps.servedRefreshes.delete(id);
    return await deleteApplicationsOf(deps, id, options);
  }
  switch (moveStepOf(found.application, deps.engineInstanceId)) {
    case 'release':
      // The tenant moved to another instance: what it deployed stays; that instance's Argo CD takes it over.
      return await releaseApplicationsOf(deps, found.application, options);
    case 'await-release':
      return awaitingRelease(found.application);
    default:
      return await refreshIfRequested(
        deps,
        found.application,
        await applyApplication(deps, found, options),
        options,
      );
  }
}

/** The reconciler of the `application` feature: its steps over one set of memos. */
export function createApplicationReconciler(
  ctx: AgentContext & Pick<FeatureContext, 'enqueue' | 'config'>,
): ApplicationReconciler {
  const { config } = ctx;
  const deps: ApplicationDeps = {
    kc: ctx.kc,
    db: ctx.db,
    namespace: ctx.namespace,
    engineInstanceId: ctx.engineInstanceId,
    applications: ctx.applications,
    appProjects: ctx.appProjects,
    enqueue: (type, id) => ctx.enqueue(type, id),
    settledApplications: createSettled(),
    settledProjects: createSettled(),
    projectTurns: createTurns(),
    deletionTurns: createTurns(),
    tenantsOfPendingDeletes: new Map(),
    syncEnds: boundedWaits(SYNC_END_WAIT_MAX_MS),
    destinationWaits: boundedWaits(DESTINATION_WAIT_MAX_MS),
    olderRowWaits: boundedWaits(OLDER_ROW_WAIT_MAX_MS),
    servedRefreshes: new Map(),
    credentialWaits: boundedWaits(CREDENTIALS_WAIT_MAX_MS),
    ownApplies: createOwnWrites(),
    deletionBudget: deletionBudgetOf(config),
    reconcileAppProject: (clusterUserId, options) => reconcileAppProject(deps, clusterUserId, options),
  };
  return {
    reconcileApplication: (id, found, options) => reconcileApplication(deps, id, found, options),
    reconcileAppProject: deps.reconcileAppProject,
    isSettled: (row) => isSettled(deps, row),
    isProjectSettled: (clusterUserId) => isProjectSettled(deps, clusterUserId),
    ownApplies: deps.ownApplies.predicate,
  };
}
