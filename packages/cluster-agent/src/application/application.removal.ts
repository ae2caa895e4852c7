/**
 * The delete path of an Application row: once the row is gone its Argo CD Application is deleted (with
 * cascading: Argo CD prunes what it deployed), but only when nothing is in the way of that prune — no sync of
 * it running (`endSyncBeforeDelete`) and Argo CD knowing its destination cluster (`destinationNotReady`).
 * It must also be proven and within the deletion budget (deletion-guard.ts). Once none is left, the tenant's
 * AppProjects are updated. Every step is a function over `RemovalDeps`.
 */
import { type Db, isManagedEnvironmentOnEngineInstance, settleApplicationDeletion } from '@gitops/db';
import {
  collectionPath,
  deleteIfExists,
  getObject,
  HttpMethod,
  isConflict,
  isKubeObject,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  mergePatch,
  secretRef,
} from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import type { FeatureContext } from '../agent-feature.ts';
import {
  AgentLabel,
  ApplicationResource,
  applicationRef,
  FIELD_MANAGER,
  isUuid,
  managedEnvironmentClusterName,
} from '../argocd.ts';
import type { AppProjectOptions } from './app-project.reconciler.ts';
import { admitDeletion, type DeletionGuardDeps, HOLD_RECHECK_MS } from './deletion-guard.ts';

/** How often a pending delete is re-checked if the Application's delete event is missed. */
export const PENDING_DELETE_RECHECK_MS = 10_000;
/** A sync in the way of a delete is looked at again this often, and waited for at most this long. */
export const SYNC_END_RECHECK_MS = 1_000;
export const SYNC_END_WAIT_MAX_MS = 30_000;
/**
 * An Application whose environment's cluster Secret is not (yet) here is deleted only once it is, and at most
 * this long after we first found it missing; looked at again this often. A Secret younger than
 * CLUSTER_SECRET_SETTLE_MS is waited for too (Argo CD's informer may not have it yet).
 */
export const DESTINATION_WAIT_MAX_MS = 300_000;
const DESTINATION_RECHECK_MS = 2_000;
const CLUSTER_SECRET_SETTLE_MS = 3_000;

/**
 * A wait that is given up after `maxMs`: `overdue(key)` remembers when `key` was first waited for and is true
 * (forgetting it) once that is longer ago than `maxMs`; `done(key)` forgets it when the wait is over.
 */
export interface BoundedWaits {
  overdue(key: string): boolean;
  done(key: string): void;
}

export function boundedWaits(maxMs: number, now: () => number = Date.now): BoundedWaits {
  const since = new Map<string, number>();
  return {
    overdue(key) {
      const start = since.get(key) ?? now();
      since.set(key, start);
      if (now() - start <= maxMs) return false;
      since.delete(key);
      return true;
    },
    done: (key) => void since.delete(key),
  };
}

export interface RemovalDeps extends DeletionGuardDeps {
  kc: KubeConfig;
  db: Db;
  /** The Argo CD namespace. */
  namespace: string;
  engineInstanceId: string;
  enqueue: FeatureContext['enqueue'];
  /** Application id → the tenants of its Applications whose deletion is pending (their projects follow). */
  tenantsOfPendingDeletes: Map<string, Set<string>>;
  /** Syncs in the way of a delete (SYNC_END_WAIT_MAX_MS). */
  syncEnds: BoundedWaits;
  /** Destinations whose cluster Secret a delete waits for (DESTINATION_WAIT_MAX_MS). */
  destinationWaits: BoundedWaits;
  /** The tenant's AppProjects (app-project.reconciler.ts, in the tenant's order). */
  reconcileAppProject(clusterUserId: string, options: AppProjectOptions): Promise<ResourceOutcome>;
}

type StepOptions = { signal: AbortSignal; logger: Logger };

/** Live Applications carrying database-id `id`, read from the API server (the cache may lag a delete). */
export async function liveApplicationsOf(
  deps: Pick<RemovalDeps, 'kc' | 'namespace'>,
  id: string,
  signal: AbortSignal,
): Promise<KubeObject[]> {
  const list = (await kubeRequest(deps.kc, {
    method: HttpMethod.GET,
    path: collectionPath({ ...ApplicationResource, namespace: deps.namespace }),
    query: { labelSelector: `${AgentLabel.DatabaseId}=${id}` },
    signal,
  })) as { items?: unknown };
  return Array.isArray(list.items) ? list.items.filter(isKubeObject) : [];
}

/**
 * The live Application of a row whose name is known, read by that name (as strong a read as the list of
 * liveApplicationsOf, without making the API server filter every Application of the namespace: a drain of
 * an instance releases thousands, docs/performance.md "A fleet, measured"). One of that name carrying another
 * row's database id is not this row's and is left alone.
 */
export async function liveApplicationOfRow(
  deps: Pick<RemovalDeps, 'kc' | 'namespace'>,
  row: { id: string; name: string },
  signal: AbortSignal,
): Promise<KubeObject[]> {
  const app = await getObject(deps.kc, applicationRef(deps.namespace, row.name), { signal });
  return app?.metadata.labels?.[AgentLabel.DatabaseId] === row.id ? [app] : [];
}

/** True when the Application has an `operation` (a sync asked for, or retrying). */
export function hasOperation(app: KubeObject): boolean {
  return app.operation !== undefined && app.operation !== null;
}

/**
 * What to do about a sync in the way of deleting an Application:
 * - `none`: no sync asked for or running; the delete goes ahead.
 * - `give-up`: one did not end in time (`overdue`); the delete goes ahead, its operation withdrawn first.
 * - `withdraw`: asked for, not started: withdraw the request, and wait.
 * - `terminate`: running: ask Argo CD to terminate it, and wait.
 * - `wait`: running and let finish (`letRunningFinish`), or terminating already: wait.
 * `overdue` is asked only while a sync is in the way (it starts the bounded wait).
 */
export type SyncStep = 'none' | 'give-up' | 'withdraw' | 'terminate' | 'wait';

export function syncStepBeforeDelete(
  app: KubeObject,
  options: { letRunningFinish?: boolean; overdue: () => boolean },
): SyncStep {
  const phase = (app.status as { operationState?: { phase?: unknown } } | undefined)?.operationState?.phase;
  const running = phase === 'Running' || phase === 'Terminating';
  if (!running && !hasOperation(app)) return 'none';
  if (options.overdue()) return 'give-up';
  if (!running) return 'withdraw';
  if (phase === 'Running' && !options.letRunningFinish) return 'terminate';
  return 'wait';
}

/**
 * An Application is deleted only once no sync of it runs: Argo CD prunes what its cache knows when it
 * deletes an Application, and a resource a running sync has just created may not be in that cache yet (it
 * would be left behind; seen when a GitOpsDeployment was deleted 0.1 s after its creation). A sync that was
 * asked for but not started is withdrawn; a running one is asked to terminate. `inTheWay` while one is; else
 * the Application as it is now (a withdrawal on giving up is a new version of it, which a delete then names).
 */
export async function endSyncBeforeDelete(
  deps: Pick<RemovalDeps, 'kc' | 'namespace' | 'syncEnds'>,
  app: KubeObject,
  options: StepOptions & {
    /**
     * A release (a move; nothing is pruned) lets a running sync finish instead of terminating it (until the
     * wait is over): the tenant may come back before the release ends and keep this Application, and Argo
     * CD does not retry a terminated automated sync of the same revision by itself.
     */
    letRunningFinish?: boolean;
  },
): Promise<{ inTheWay: true } | { inTheWay: false; app: KubeObject }> {
  const { name, uid = name, resourceVersion } = app.metadata;
  const step = syncStepBeforeDelete(app, {
    letRunningFinish: options.letRunningFinish,
    overdue: () => deps.syncEnds.overdue(uid),
  });
  // With the version looked at: one changed since fails (409) and the retry decides again.
  const patch = (body: Record<string, unknown>) =>
    mergePatch(
      deps.kc,
      applicationRef(deps.namespace, name),
      { metadata: { resourceVersion }, ...body },
      { fieldManager: FIELD_MANAGER, signal: options.signal },
    );
  switch (step) {
    case 'none':
      deps.syncEnds.done(uid);
      return { inTheWay: false, app };
    case 'give-up':
      // Argo CD does not end it (not running, or stuck): the delete goes ahead rather than wait for ever. Its
      // operation is withdrawn first: Argo CD finalizes no deletion while an Application has one.
      options.logger.warn({ application: name }, 'the sync did not end; deleting the Application anyway');
      return { inTheWay: false, app: hasOperation(app) ? await withdrawOperation(deps, app, options) : app };
    case 'withdraw':
      await patch({ operation: null });
      options.logger.info({ application: name }, 'sync request withdrawn: the Application goes');
      return { inTheWay: true };
    case 'terminate':
      await patch({ status: { operationState: { phase: 'Terminating' } } });
      options.logger.info({ application: name }, 'running sync terminated: the Application goes');
      return { inTheWay: true };
    case 'wait':
      return { inTheWay: true };
  }
}

/** Removes the Application's `operation` (a sync asked for or retrying), leaving its status alone; the result. */
export async function withdrawOperation(
  deps: Pick<RemovalDeps, 'kc' | 'namespace'>,
  app: KubeObject,
  options: StepOptions,
): Promise<KubeObject> {
  const withdrawn = await mergePatch(
    deps.kc,
    applicationRef(deps.namespace, app.metadata.name),
    { operation: null },
    { fieldManager: FIELD_MANAGER, signal: options.signal },
  );
  options.logger.info({ application: app.metadata.name }, 'operation withdrawn: the Application is deleted');
  return withdrawn;
}

/**
 * The managed environment whose cluster Secret (`managed-env-<id>`) an Application's destination names;
 * undefined for any other destination (in-cluster, a Workspace).
 */
export function destinationEnvironmentId(app: KubeObject): string | undefined {
  const destination = (app.spec as { destination?: { name?: unknown } } | undefined)?.destination?.name;
  const prefix = managedEnvironmentClusterName('');
  const id =
    typeof destination === 'string' && destination.startsWith(prefix)
      ? destination.slice(prefix.length)
      : undefined;
  return isUuid(id) ? id : undefined;
}

/** A cluster Secret Argo CD surely knows: present and at least CLUSTER_SECRET_SETTLE_MS old. */
export function clusterSecretSettled(secret: KubeObject | undefined, now: number): boolean {
  if (secret === undefined) return false;
  const created = Date.parse(String(secret.metadata.creationTimestamp ?? ''));
  return !(now - created < CLUSTER_SECRET_SETTLE_MS);
}

/**
 * Argo CD deletes an Application whose destination cluster it does not know without pruning anything
 * ("Resource entries removed from undefined cluster"): the deployed resources would be left behind. That
 * happens when the Application of an External environment goes while the environment's cluster Secret is
 * not here yet (a tenant just moved here, its ManagedEnvironment operation still in backoff). So while the
 * environment is this instance's and its Secret is missing or brand new, the delete waits (bounded, then
 * goes ahead as before; the environment is also queued, so the Secret is written now). Returns why it waits.
 */
export async function destinationNotReady(
  deps: Pick<RemovalDeps, 'kc' | 'db' | 'namespace' | 'engineInstanceId' | 'enqueue' | 'destinationWaits'>,
  app: KubeObject,
  options: StepOptions,
): Promise<string | undefined> {
  const { name, uid = name } = app.metadata;
  const environmentId = destinationEnvironmentId(app);
  if (environmentId === undefined) return undefined;
  const secretName = managedEnvironmentClusterName(environmentId);
  const secret = await getObject(deps.kc, secretRef(deps.namespace, secretName), { signal: options.signal });
  if (
    clusterSecretSettled(secret, Date.now()) ||
    !(await isManagedEnvironmentOnEngineInstance(deps.db, environmentId, deps.engineInstanceId))
  ) {
    deps.destinationWaits.done(uid);
    return undefined;
  }
  if (deps.destinationWaits.overdue(uid)) {
    options.logger.warn(
      { application: name, clusterSecret: secretName },
      'the destination cluster Secret did not appear; deleting the Application anyway (Argo CD will not prune)',
    );
    return undefined;
  }
  if (secret === undefined) deps.enqueue('ManagedEnvironment', environmentId);
  return `waiting for cluster Secret ${secretName} before deleting Application ${name} (Argo CD prunes nothing on a cluster it does not know)`;
}

/** What became of one live Application on the delete path. */
type Removal =
  | { step: 'deleting' }
  | { step: 'held'; reason: string }
  | { step: 'syncing' }
  | { step: 'waiting'; reason: string }
  | { step: 'deleted'; accepted: boolean };

async function removeApplication(
  deps: RemovalDeps,
  id: string,
  app: KubeObject,
  options: StepOptions,
): Promise<Removal> {
  const { name, uid } = app.metadata;
  if (app.metadata.deletionTimestamp) {
    // Deleted with an operation still set (e.g. by a process before a restart): Argo CD would never
    // finalize it, so the operation goes.
    if (hasOperation(app)) await withdrawOperation(deps, app, options);
    return { step: 'deleting' };
  }
  // Before anything is touched (a sync withdrawn is a change too): is this delete proven and within budget?
  const verdict = await admitDeletion(deps, id, app, options.logger);
  if (!verdict.admitted) return { step: 'held', reason: verdict.message };
  const sync = await endSyncBeforeDelete(deps, app, options);
  if (sync.inTheWay) return { step: 'syncing' };
  const notReady = await destinationNotReady(deps, sync.app, options);
  if (notReady !== undefined) return { step: 'waiting', reason: notReady };
  let accepted: boolean;
  try {
    // The version looked at above: Argo CD may have started a sync since, or another row's apply taken the
    // Application over (a GitOpsDeployment deleted while a second backend still created its row); either is
    // decided again on the Application as it is now (seen in test:chaos seed 922645316: a ConfigMap the sync
    // created was left behind).
    accepted = await deleteIfExists(deps.kc, applicationRef(deps.namespace, name), {
      uid,
      resourceVersion: sync.app.metadata.resourceVersion,
      signal: options.signal,
    });
  } catch (err) {
    if (!isConflict(err)) throw err;
    return { step: 'waiting', reason: `Application ${name} changed since it was looked at; looking again` };
  }
  options.logger.info({ application: name }, 'Application deleted (its row is gone)');
  return { step: 'deleted', accepted };
}

/**
 * Why the delete of a row's Applications is not over, and when to look again; undefined once none is left.
 * `syncing`: names of Applications whose sync is in the way; `waitingFor`: reasons of destinationNotReady;
 * `live`: names of all the Applications found.
 */
export function pendingRemoval(found: {
  held: readonly string[];
  syncing: readonly string[];
  waitingFor: readonly string[];
  live: readonly string[];
}): { reason: string; requeueAfterMs: number } | undefined {
  if (found.held.length > 0) return { reason: found.held.join('; '), requeueAfterMs: HOLD_RECHECK_MS };
  if (found.syncing.length > 0)
    return {
      reason: `waiting for the sync of Application ${found.syncing.join(', ')} to end before deleting it`,
      requeueAfterMs: SYNC_END_RECHECK_MS,
    };
  if (found.waitingFor.length > 0)
    return { reason: found.waitingFor.join('; '), requeueAfterMs: DESTINATION_RECHECK_MS };
  if (found.live.length > 0)
    return {
      reason: `waiting for Argo CD to delete Application ${found.live.join(', ')}`,
      requeueAfterMs: PENDING_DELETE_RECHECK_MS,
    };
  return undefined;
}

/**
 * Application row `id` is gone: its Applications are deleted; once none is left, the AppProjects of their
 * tenants (and of `ownerUserIds`, the owners of the operations) are updated without them.
 */
export async function deleteApplicationsOf(
  deps: RemovalDeps,
  id: string,
  options: StepOptions & { ownerUserIds: readonly string[] },
): Promise<ResourceOutcome> {
  const live = await liveApplicationsOf(deps, id, options.signal);
  const tenants = deps.tenantsOfPendingDeletes.get(id) ?? new Set<string>();
  for (const owner of options.ownerUserIds) tenants.add(owner);
  let deleted = false;
  const held: string[] = [];
  const syncing: string[] = [];
  const waitingFor: string[] = [];
  for (const app of live) {
    const tenant = app.metadata.labels?.[AgentLabel.ClusterUserId];
    if (tenant) tenants.add(tenant);
    const removal = await removeApplication(deps, id, app, options);
    if (removal.step === 'held') held.push(removal.reason);
    if (removal.step === 'syncing') syncing.push(app.metadata.name);
    if (removal.step === 'waiting') waitingFor.push(removal.reason);
    if (removal.step === 'deleted') deleted = removal.accepted || deleted;
  }
  const pending = pendingRemoval({ held, syncing, waitingFor, live: live.map((app) => app.metadata.name) });
  if (pending) {
    // Not gone yet: its tenants are kept (their AppProjects are updated once it is).
    deps.tenantsOfPendingDeletes.set(id, tenants);
    return { status: 'pending', ...pending, changed: deleted };
  }
  deps.tenantsOfPendingDeletes.delete(id);
  // Nothing of it is left: its hold (if any) and an unused proof go.
  await settleApplicationDeletion(deps.db, id);
  for (const tenant of tenants) {
    await deps.reconcileAppProject(tenant, { ...options, goneApplicationIds: [id] });
  }
  return { status: 'done', changed: deleted };
}
