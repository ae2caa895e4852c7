/**
 * The GitOpsDeployment's deletion path: a CR that is gone loses its rows; one being deleted loses them too,
 * and its user finalizer goes once the delete operation is Completed (completion is an event: NOTIFY →
 * re-enqueue, never a wait); a failed delete is announced again after GITOPS_OPERATION_RETRY_INTERVAL. Each
 * step is a top-level function over the reconciler's `deps` (`GitOpsDeploymentSteps`).
 */
import { DeploymentEventReason, Finalizer } from '@gitops/api';
import { type ApiCrMappingRow, getApplication, type OperationRow } from '@gitops/db';
import {
  isNotFound,
  type Logger,
  mergePatch,
  type ReconcileContext,
  type ReconcileResult,
} from '@gitops/shared';
import { BACKEND_FIELD_MANAGER, GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import { reannounceFailedOperation, retryDueIn } from '../operation-outcome.ts';
import { provenGoneOfName } from '../reconcile-current.ts';
import {
  applicationOperationsOutcome,
  type DeletedApplication,
  deleteMappedApplications,
  findDeploymentMappings,
  RELEASE_WAIT_MS,
} from './application.store.ts';
import {
  DeploymentErrorMessage,
  failedOperationState,
  writeErrorOccurred,
} from './gitops-deployment.conditions.ts';
import type { GitOpsDeploymentSteps } from './gitops-deployment.reconciler.ts';

/** An Event on the GitOpsDeployment for each application deleted from the database. */
export async function recordDeletes(
  deps: Pick<GitOpsDeploymentSteps, 'events'>,
  object: GitOpsDeploymentObject | undefined,
  deleted: readonly DeletedApplication[],
) {
  if (!object) return;
  for (const d of deleted) {
    await deps.events.event(
      GitOpsDeploymentCr.withTypeMeta(object),
      'Normal',
      DeploymentEventReason.ApplicationDeleted,
      `Deleted application ${d.applicationName} from the database (operation ${d.operationId})`,
    );
  }
}

/**
 * Deletes the applications of the GitOpsDeployment `namespace/name` whose mappings are `proven` gone (under
 * its lock), each announced, and logs each with `why` the GitOpsDeployment lets it go.
 */
async function deleteApplicationsOf(
  deps: Pick<GitOpsDeploymentSteps, 'db'>,
  namespace: string,
  name: string,
  proven: (mapping: ApiCrMappingRow) => boolean,
  logger: Logger,
  why: string,
) {
  const result = await deps.db.transaction().execute(async (trx) => {
    await GitOpsDeploymentCr.lock(trx, namespace, name);
    const mappings = await findDeploymentMappings(trx, namespace, name);
    return await deleteMappedApplications(trx, mappings.filter(proven));
  });
  for (const d of result.deleted) {
    logger.info(
      { application: d.applicationId, operation: d.operationId },
      `application deleted: the GitOpsDeployment ${why}`,
    );
  }
  return result;
}

/**
 * The CR is gone (a live read found none): the applications of this name go, each announced. Only those whose
 * mapping was read before a live read that found no object of the name, or another uid: one created for an
 * incarnation made since is left to that incarnation's reconcile.
 */
export async function reconcileGone(
  deps: Pick<GitOpsDeploymentSteps, 'db' | 'liveUid'>,
  namespace: string,
  name: string,
  { logger, signal }: Pick<ReconcileContext, 'logger' | 'signal'>,
): Promise<ReconcileResult | undefined> {
  const { mappings, gone } = await provenGoneOfName(
    deps,
    findDeploymentMappings,
    { namespace, name },
    signal,
  );
  if (mappings.length === 0) return undefined;
  const { waitingForRelease } = await deleteApplicationsOf(
    deps,
    namespace,
    name,
    (m) => gone.has(m.id),
    logger,
    'is gone',
  );
  return waitingForRelease > 0 ? { requeueAfter: RELEASE_WAIT_MS } : undefined;
}

/**
 * The agent gave up deleting the Argo CD Application (its operation Failed) while the user finalizer waits
 * for it: announce the delete again once `deleteRetryMs` have passed since the failure, so a transient
 * cause (Argo CD down, a stuck prune that an admin fixed) does not leave the GitOpsDeployment stuck.
 * Returns the delay after which to look again, or 0 when a new operation was announced.
 */
export async function retryFailedDelete(
  deps: Pick<GitOpsDeploymentSteps, 'db' | 'deleteRetryMs' | 'now'>,
  failed: OperationRow,
  logger: Logger,
): Promise<number> {
  const dueIn = retryDueIn(failed, deps.deleteRetryMs, deps.now());
  if (dueIn > 0) return dueIn;
  const reannounced = await deps.db.transaction().execute(async (trx) => {
    if (failed.owner_namespace && failed.owner_name) {
      await GitOpsDeploymentCr.lock(trx, failed.owner_namespace, failed.owner_name);
    }
    // The application row is gone (deleted with the first announcement): the agent deletes what has none.
    if (await getApplication(trx, failed.resource_id)) return undefined;
    return await reannounceFailedOperation(trx, failed);
  });
  if (reannounced) {
    logger.info(
      { application: failed.resource_id, operation: reannounced.operation.id, failedOperation: failed.id },
      'application delete announced again: the previous attempt failed',
    );
  }
  return 0;
}

/** The CR is being deleted: its rows go, then (once the delete operation Completed) the user finalizer. */
export async function reconcileDeleting(
  deps: GitOpsDeploymentSteps,
  object: GitOpsDeploymentObject,
  logger: Logger,
): Promise<ReconcileResult | undefined> {
  const { namespace = '', name, uid = '' } = object.metadata;
  // Its own rows only: the deletionTimestamp proves this uid is going, not that another uid of the name is
  // (a cache that is behind may still show this one being deleted after the name was created again).
  const { deleted, waitingForRelease } = await deleteApplicationsOf(
    deps,
    namespace,
    name,
    (m) => m.cr_uid === uid,
    logger,
    'is being deleted',
  );
  await recordDeletes(deps, object, deleted);
  // A move's release is on its way: the delete (and so the finalizer) waits for it.
  if (waitingForRelease > 0) return { requeueAfter: RELEASE_WAIT_MS };

  const finalizers = object.metadata.finalizers ?? [];
  if (!finalizers.includes(Finalizer.GitOpsDeploymentResources)) return;
  const outcome = await applicationOperationsOutcome(deps.db, uid);
  // Completion arrives as gitops_operation_state_changed, which re-enqueues this key: no waiting here.
  if (outcome.pending) return;
  const errorState = failedOperationState(
    outcome.lastFinished,
    DeploymentErrorMessage.applicationDeleteFailed,
  );
  if (errorState.status === 'error' && outcome.lastFinished) {
    await writeErrorOccurred(deps, object, errorState, logger);
    const retryAfter = await retryFailedDelete(deps, outcome.lastFinished, logger);
    // A new operation re-enqueues this key when it finishes; otherwise look again when the wait is over.
    return retryAfter > 0 ? { requeueAfter: retryAfter } : undefined;
  }
  await removeUserFinalizer(deps, object, finalizers, logger);
}

/** The Argo CD Application is deleted: the user finalizer goes (a CR already gone is fine), with an Event. */
async function removeUserFinalizer(
  deps: Pick<GitOpsDeploymentSteps, 'kc' | 'events'>,
  object: GitOpsDeploymentObject,
  finalizers: readonly string[],
  logger: Logger,
) {
  const remaining = finalizers.filter((f) => f !== Finalizer.GitOpsDeploymentResources);
  try {
    await mergePatch(
      deps.kc,
      GitOpsDeploymentCr.ref(object),
      { metadata: { finalizers: remaining, resourceVersion: object.metadata.resourceVersion } },
      { fieldManager: BACKEND_FIELD_MANAGER },
    );
  } catch (err) {
    if (isNotFound(err)) return;
    throw err;
  }
  logger.info('user finalizer removed: the Argo CD Application is deleted');
  await deps.events.event(
    GitOpsDeploymentCr.withTypeMeta(object),
    'Normal',
    DeploymentEventReason.FinalizerRemoved,
    `Removed finalizer ${Finalizer.GitOpsDeploymentResources}: the Argo CD Application and its resources are deleted`,
  );
}
