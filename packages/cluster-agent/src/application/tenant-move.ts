/**
 * The agent's side of moving a tenant between engine instances (docs/architecture.md, "Moving a tenant"), the
 * one place to read it. The whole move:
 *
 *   backend  `packages/backend/src/tenant-move/`: a namespace labelled `managed-gitops.redhat.com/engine-instance`
 *            with another instance than its tenant's moves that tenant there (`moveTenant`, one transaction).
 *   db       `packages/db/src/tenant-move.repository.ts`: `moveTenant` points the tenant, its application and
 *            repository credential rows at the new instance, each application row naming the instance that
 *            still holds its old Argo CD Application (`releasing_engine_instance_id`), and tells both instances
 *            (an operation per row); `completeApplicationRelease` (old instance, one transaction: the column
 *            names the new instance itself, "adopting", and that instance is told); `completeApplicationAdoption`
 *            (new instance: the column is cleared, the move of that application is over).
 *   agent    here, per application row (`moveStepOf`):
 *            - `release`, the row is another instance's now: `releaseApplicationsOf` removes the old Application
 *              without cascading (the workloads stay), then completes the release;
 *            - `await-release`, the row is ours but another instance still releases it: nothing yet (two Argo
 *              CDs must never manage the same resources); that agent announces the release, RELEASE_RECHECK_MS
 *              is the fallback;
 *            - `adopt`, the row was released to us: the Application is rendered and applied as usual (Argo CD
 *              finds the resources under the same Application name and adopts them), then `completeAdoption`.
 */
import { type ApplicationRow, completeApplicationAdoption, completeApplicationRelease } from '@gitops/db';
import { deleteIfExists, type KubeObject, type Logger, mergePatch } from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import { ARGOCD_RESOURCES_FINALIZER, applicationRef, FIELD_MANAGER } from '../argocd.ts';
import {
  endSyncBeforeDelete,
  liveApplicationOfRow,
  type RemovalDeps,
  SYNC_END_RECHECK_MS,
} from './application.removal.ts';

/**
 * How often an application moved here looks whether the instance it left has released it: a fallback only.
 * The release itself wakes this instance (`completeApplicationRelease` inserts an operation for it, whose NOTIFY
 * reaches its agent; a lost notification is found again when the LISTEN session comes back or the agent
 * starts). Each look is a claim of the row's operations and a read of the row, so the looks grow with the
 * applications waiting times how long they wait: with 5 s, a drain of 3,050 applications at 30,000 deployments
 * made 57 looks per application and took the database's time from the releases themselves (docs/performance.md,
 * "A fleet, measured").
 */
export const RELEASE_RECHECK_MS = 60_000;

type MoveRow = Pick<ApplicationRow, 'engine_instance_id' | 'releasing_engine_instance_id'>;

/** Where an application row stands in a tenant move, seen from this engine instance (header). */
export type MoveStep = 'release' | 'await-release' | 'adopt' | 'none';

export function moveStepOf(row: MoveRow, engineInstanceId: string): MoveStep {
  if (row.engine_instance_id !== engineInstanceId) return 'release';
  if (row.releasing_engine_instance_id === null) return 'none';
  return row.releasing_engine_instance_id === engineInstanceId ? 'adopt' : 'await-release';
}

/** The outcome while another instance still holds the Application of a row moved here. */
export function awaitingRelease(row: MoveRow & Pick<ApplicationRow, 'name'>): ResourceOutcome {
  return {
    status: 'pending',
    reason: `the tenant moved here; waiting for engine instance ${row.releasing_engine_instance_id} to release Application ${row.name}`,
    requeueAfterMs: RELEASE_RECHECK_MS,
  };
}

/**
 * A row being adopted (`adopt`) whose Application is here now, or that can never become one: the move is
 * over. Nothing for any other row.
 */
export async function completeAdoption(
  deps: Pick<RemovalDeps, 'db' | 'engineInstanceId'>,
  row: ApplicationRow,
  logger: Logger,
): Promise<void> {
  if (moveStepOf(row, deps.engineInstanceId) !== 'adopt') return;
  if (await completeApplicationAdoption(deps.db, row.id, deps.engineInstanceId))
    logger.info({ application: row.name }, 'Application taken over from the instance the tenant left');
}

type StepOptions = { signal: AbortSignal; logger: Logger };

/**
 * One old Application of a moved row goes without cascading: its resources finalizer is removed first (also
 * from one whose cascading delete had begun, which stops it), then it is deleted. A running sync is let
 * finish first (`syncing`; ended after the wait), a requested one withdrawn.
 */
async function releaseApplication(
  deps: RemovalDeps,
  app: KubeObject,
  options: StepOptions,
): Promise<{ syncing: boolean; changed: boolean }> {
  const { name, uid, resourceVersion, deletionTimestamp, finalizers = [] } = app.metadata;
  let changed = false;
  if (finalizers.includes(ARGOCD_RESOURCES_FINALIZER)) {
    if (
      !deletionTimestamp &&
      (await endSyncBeforeDelete(deps, app, { ...options, letRunningFinish: true })).inTheWay
    )
      return { syncing: true, changed };
    const kept = finalizers.filter((f) => f !== ARGOCD_RESOURCES_FINALIZER);
    await mergePatch(
      deps.kc,
      applicationRef(deps.namespace, name),
      { metadata: { resourceVersion, finalizers: kept } },
      { fieldManager: FIELD_MANAGER, signal: options.signal },
    );
    changed = true;
  }
  if (!deletionTimestamp) {
    await deleteIfExists(deps.kc, applicationRef(deps.namespace, name), { uid, signal: options.signal });
    changed = true;
  }
  options.logger.info(
    { application: name },
    'Application released without cascading: the tenant moved to another engine instance',
  );
  return { syncing: false, changed };
}

/**
 * A row moved to another instance (`release`): its old Argo CD Applications go without cascading; once none
 * is left the tenant's AppProjects follow and the row is released to its new instance.
 */
export async function releaseApplicationsOf(
  deps: RemovalDeps,
  row: ApplicationRow,
  options: StepOptions,
): Promise<ResourceOutcome> {
  const live = await liveApplicationOfRow(deps, row, options.signal);
  let changed = false;
  const syncing: string[] = [];
  for (const app of live) {
    const released = await releaseApplication(deps, app, options);
    if (released.syncing) syncing.push(app.metadata.name);
    changed = released.changed || changed;
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
    return { status: 'pending', reason: `releasing Application ${row.name}`, requeueAfterMs: 1_000, changed };
  }
  await deps.reconcileAppProject(row.cluster_user_id, { ...options, goneApplicationIds: [row.id] });
  if (await completeApplicationRelease(deps.db, row.id, deps.engineInstanceId)) {
    options.logger.info({ application: row.name }, 'Application released to its new engine instance');
    changed = true;
    // Its environment's cluster Secret stayed here for it: now it may go too.
    if (row.managed_environment_id !== null) deps.enqueue('ManagedEnvironment', row.managed_environment_id);
  }
  return { status: 'done', changed };
}
