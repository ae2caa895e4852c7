/**
 * A tenant's two AppProjects (`app-project-<cluster_user id>` and `…-cluster`) made to match its rows:
 * applied from them, or deleted once nothing needs them. One tenant's reconciles run one after the other
 * (`reconcileAppProject`). Every step is a function over `AppProjectDeps` (plain objects in a unit test).
 */
import type { Db } from '@gitops/db';
import {
  deleteIfExists,
  type Informer,
  type KubeConfig,
  type KubeObject,
  type Logger,
  mergePatch,
  normalizeRepositoryUrl,
  serverSideApply,
  type Turns,
} from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import {
  AgentLabel,
  appProjectName,
  appProjectRef,
  clusterAppProjectName,
  FIELD_MANAGER,
  isUuid,
} from '../argocd.ts';
import { compareOwnedFields } from '../resync/owned-fields.ts';
import { renderAppProject, renderClusterAppProject } from './app-project.render.ts';
import { sourceRepoUrls } from './application.render.ts';
import { ABSENT, ownedState, type Settled } from './settled.ts';
import { readTenantResources } from './tenant.queries.ts';

/** Top-level AppProject spec fields we own: absent on the live object when we do not declare them. */
const PROJECT_OWNED_SPEC_FIELDS = [
  'sourceRepos',
  'destinations',
  'clusterResourceWhitelist',
  'clusterResourceBlacklist',
] as const;

export interface AppProjectDeps {
  kc: KubeConfig;
  db: Db;
  /** The Argo CD namespace. */
  namespace: string;
  engineInstanceId: string;
  applications: Pick<Informer<KubeObject>, 'list'>;
  appProjects: Pick<Informer<KubeObject>, 'get'>;
  /** AppProject name → its owned fields when last found matching, or ABSENT when last found rightly absent. */
  settledProjects: Settled;
  /** One tenant's AppProject reconciles run one at a time (`reconcileAppProject`). */
  projectTurns: Turns;
}

export interface AppProjectOptions {
  signal: AbortSignal;
  logger: Logger;
  /** Applications being deleted or moved away: they no longer keep a project in use. */
  goneApplicationIds?: readonly string[];
}

/** The Applications (other than `goneApplicationIds`) that name project `name`. */
export function projectUsers(
  applications: readonly KubeObject[],
  name: string,
  goneApplicationIds: readonly string[] = [],
): KubeObject[] {
  const gone = new Set(goneApplicationIds);
  return applications.filter(
    (app) =>
      (app.spec as { project?: unknown } | undefined)?.project === name &&
      !gone.has(app.metadata.labels?.[AgentLabel.DatabaseId] ?? ''),
  );
}

/**
 * A project no longer wanted: deleted unless an Application (other than `goneApplicationIds`) still names it:
 * Argo CD needs it until it has pruned that Application's resources. True when a delete was accepted.
 */
async function deleteUnneededProject(
  deps: AppProjectDeps,
  name: string,
  live: KubeObject | undefined,
  options: AppProjectOptions,
): Promise<boolean> {
  // Absent from the cache: nothing to delete. A project created a moment ago (ours, not in the cache yet)
  // arrives as an add event, which queues the tenant again (application.feature.ts).
  if (!live) {
    deps.settledProjects.settle(name, ABSENT);
    return false;
  }
  deps.settledProjects.forget(name);
  const users = projectUsers(deps.applications.list(deps.namespace), name, options.goneApplicationIds);
  if (users.length > 0) {
    options.logger.debug({ appProject: name, applications: users.length }, 'AppProject kept while in use');
    return false;
  }
  const deleted = await deleteIfExists(deps.kc, appProjectRef(deps.namespace, name), {
    signal: options.signal,
  });
  if (deleted) options.logger.info({ appProject: name }, 'AppProject deleted: no longer needed');
  return deleted;
}

/** A wanted project: applied when its owned fields drifted (undeclared ones removed). True when written. */
async function applyProject(
  deps: AppProjectDeps,
  name: string,
  desired: KubeObject,
  live: KubeObject | undefined,
  options: AppProjectOptions,
): Promise<boolean> {
  // The cluster resource lists are ours on both projects: one another manager adds to the main project
  // would open the host cluster (Argo CD does not check the destination of a cluster-scoped object).
  const comparison = compareOwnedFields(live, desired, PROJECT_OWNED_SPEC_FIELDS);
  if (live && !comparison.drifted) {
    deps.settledProjects.settle(name, ownedState(live));
    return false;
  }
  deps.settledProjects.forget(name);
  const applied = await serverSideApply(deps.kc, desired, {
    fieldManager: FIELD_MANAGER,
    force: true,
    signal: options.signal,
  });
  if (comparison.unexpectedSpecFields.length > 0) {
    const spec = Object.fromEntries(comparison.unexpectedSpecFields.map((field) => [field, null]));
    await mergePatch(
      deps.kc,
      appProjectRef(deps.namespace, name),
      { spec },
      {
        fieldManager: FIELD_MANAGER,
        signal: options.signal,
      },
    );
  } else {
    // Settled as applied; after the extra patch the next look settles it.
    deps.settledProjects.settle(name, ownedState(applied));
  }
  options.logger.info({ appProject: name }, 'AppProject applied');
  return true;
}

/** One of the tenant's projects: applied when `desired`, else deleted once unused. True when written. */
export async function reconcileProject(
  deps: AppProjectDeps,
  name: string,
  desired: KubeObject | undefined,
  options: AppProjectOptions,
): Promise<boolean> {
  const live = deps.appProjects.get(deps.namespace, name);
  return desired
    ? await applyProject(deps, name, desired, live, options)
    : await deleteUnneededProject(deps, name, live, options);
}

/**
 * The tenant's AppProjects, after the reconciles of them already queued. Operations of different resources
 * of one tenant run concurrently, and each computes the tenant's projects from the rows it reads: without an
 * order, a write computed from older rows could land after one computed from newer rows and undo it until
 * the next resync. One after the other, each re-reads the rows, so the last write is always from the latest
 * rows.
 */
export function reconcileAppProject(
  deps: AppProjectDeps,
  clusterUserId: string,
  options: AppProjectOptions,
): Promise<ResourceOutcome> {
  return deps.projectTurns.run(clusterUserId, () => reconcileAppProjectNow(deps, clusterUserId, options));
}

/** The tenant's AppProjects from its rows now: applied, or deleted when it has nothing left. */
export async function reconcileAppProjectNow(
  deps: AppProjectDeps,
  clusterUserId: string,
  options: AppProjectOptions,
): Promise<ResourceOutcome> {
  const tenant = isUuid(clusterUserId)
    ? await readTenantResources(deps.db, clusterUserId, deps.engineInstanceId)
    : undefined;
  // Both before any Application moves between them; the main project exists whenever the other does.
  const main = await reconcileProject(
    deps,
    appProjectName(clusterUserId),
    tenant ? renderAppProject(tenant, deps.namespace) : undefined,
    options,
  );
  const cluster = await reconcileProject(
    deps,
    clusterAppProjectName(clusterUserId),
    tenant ? renderClusterAppProject(tenant, deps.namespace) : undefined,
    options,
  );
  return { status: 'done', changed: main || cluster };
}

/** What `isProjectSettled` and `projectCovers` read. */
export type ProjectLookup = Pick<AppProjectDeps, 'namespace' | 'appProjects' | 'settledProjects'>;

/**
 * True when nothing changed since both of the tenant's projects were last found matching: each is as it was
 * then (owned fields), or still absent.
 */
export function isProjectSettled(deps: ProjectLookup, clusterUserId: string): boolean {
  return [appProjectName(clusterUserId), clusterAppProjectName(clusterUserId)].every((name) => {
    const live = deps.appProjects.get(deps.namespace, name);
    return deps.settledProjects.matches(name, live ? ownedState(live) : ABSENT);
  });
}

/**
 * True when the tenant's projects need no recompute for this Application's operation: they are as we last
 * computed them, the Application's repositories (every source's) and destination are in the project it uses,
 * and the live Application (if any) already had those repositories (so none may have left the tenant's list). The
 * recompute reads every application row of the tenant, so a tenant's n-th Application of a known
 * repository would otherwise cost O(n).
 */
export function projectCovers(
  deps: ProjectLookup,
  clusterUserId: string,
  projectName: string,
  desired: KubeObject,
  live: KubeObject | undefined,
): boolean {
  const desiredSpec = desired.spec as { destination?: { name?: unknown } };
  const repos = [...new Set(sourceRepoUrls(desired.spec).map(normalizeRepositoryUrl))].sort();
  if (repos.length === 0 || !isProjectSettled(deps, clusterUserId)) return false;
  if (live) {
    const liveRepos = [...new Set(sourceRepoUrls(live.spec).map(normalizeRepositoryUrl))].sort();
    if (liveRepos.join('\n') !== repos.join('\n')) return false;
  }
  const projectSpec = deps.appProjects.get(deps.namespace, projectName)?.spec as
    | { sourceRepos?: unknown; destinations?: unknown }
    | undefined;
  const listed = Array.isArray(projectSpec?.sourceRepos) ? projectSpec.sourceRepos : [];
  const destinations = Array.isArray(projectSpec?.destinations) ? projectSpec.destinations : [];
  return (
    repos.every((repo) => listed.includes(repo)) &&
    destinations.some((d) => (d as { name?: unknown } | null)?.name === desiredSpec.destination?.name)
  );
}
