/**
 * GitOpsDeployment reconciler (level-based): the key is `namespace/name`; the object comes from the
 * informer cache. A live deployment gets its application row (+ tenant, Workspace environment, mapping
 * and announcing operation) in one transaction; a deleted one loses its rows, announced the same way.
 * The user finalizer is removed once the delete operation is Completed: completion is an event
 * (NOTIFY → re-enqueue), never a wait. ErrorOccurred is owned here; Events tell the story.
 */
import {
  ConditionStatus,
  DeploymentEventReason,
  Finalizer,
  GitOpsDeploymentConditionType,
  GitOpsDeploymentMessage,
  GitOpsDeploymentReason,
  PlacementMessage,
} from '@gitops/api';
import {
  type ClusterCredentialsInput,
  type Database,
  getApplication,
  getEngineInstance,
  isAgentListening,
  type OperationRow,
} from '@gitops/db';
import {
  type EventRecorder,
  findCondition,
  type Informer,
  isNotFound,
  type KubeConfig,
  type Logger,
  mergePatch,
  type ReconcileContext,
  type ReconcileResult,
  type Reconciler,
  setCondition,
  splitObjectKey,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { type ErrorState, reportUnknownError, writeErrorConditions } from '../error-occurred.ts';
import type { JsonObject } from '../json.ts';
import { BACKEND_FIELD_MANAGER, GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import { currentObjectReader, readTenantNamespace, type TenantNamespace } from '../kube-reads.ts';
import type { LabelSelector } from '../label-selector.ts';
import type { EnvironmentResolver } from '../managed-environment/environment.resolver.ts';
import { reannounceFailedOperation, retryDueIn } from '../operation-outcome.ts';
import { PLACEMENT_RECHECK_MS, PlacementRefusedError } from '../placement.ts';
import { type WorkspaceAccess, WorkspaceAccessNeededError } from '../workspace-access/workspace-access.ts';
import {
  type ApplyResult,
  applicationOperationsOutcome,
  applyDesiredApplication,
  createNewApplication,
  type DeletedApplication,
  deleteMappedApplications,
  findDeploymentMappings,
  type MappedDeletes,
  RELEASE_WAIT_MS,
  unchangedApplication,
} from './application.store.ts';
import type { DeploymentApplications } from './deployment-applications.ts';
import {
  desiredApplicationSpec,
  destinationProblem,
  parseGitOpsDeploymentSpec,
} from './desired-application.ts';

/** ErrorOccurred messages of this reconciler beyond the ones fixed by docs/api.md. */
export const DeploymentErrorMessage = {
  invalidSpec: (problem: string) => `the GitOpsDeployment is invalid: ${problem}`,
  applicationOperationFailed: (message: string) =>
    `the Argo CD Application could not be updated: ${message || 'the operation failed'}`,
  applicationDeleteFailed: (message: string) =>
    `the Argo CD Application could not be deleted, so the deployed resources may remain (the finalizer ${Finalizer.GitOpsDeploymentResources} is kept): ${message || 'the operation failed'}`,
} as const;

export interface GitOpsDeploymentReconcilerOptions {
  db: Kysely<Database>;
  kc: KubeConfig;
  /** The identity of the cluster tenants' namespaces live on (the backend's own; read after start). */
  tenantClusterIdentity: () => string;
  informer: Informer<GitOpsDeploymentObject>;
  events: EventRecorder;
  /** Only deployments matching it are served (the informer uses the same selector). */
  selector?: LabelSelector;
  /** Resolves `spec.destination.environment` (a ManagedEnvironment in the same namespace); unset: never usable. */
  resolveEnvironment?: EnvironmentResolver;
  /**
   * How long after a failed Application delete (the agent exhausted its attempts) the delete is announced
   * again while the user finalizer waits for it (GITOPS_OPERATION_RETRY_INTERVAL). Default 1 minute.
   */
  operationRetryMs?: number;
  /** Credentials for a tenant's namespace when its instance runs on another cluster; unset: never provisioned. */
  workspaceAccess?: WorkspaceAccess;
  /** See GITOPS_ENGINE_INSTANCE_AWAY_AFTER; unset: never reported. */
  engineInstanceAwayAfterMs?: number;
  /** Kept up to date with the uids whose ErrorOccurred=True this reconciler wrote (the feature reads it). */
  errorReported?: Set<string>;
  /** Told the application row of each deployment it writes or finds (the status path reads it). */
  applications?: Pick<DeploymentApplications, 'remember'>;
  now?: () => Date;
}

/** Creates the reconcile function of the GitOpsDeployment work queue. */
export function createGitOpsDeploymentReconciler(options: GitOpsDeploymentReconcilerOptions): Reconciler {
  const { db, kc, informer, events } = options;
  const now = options.now ?? (() => new Date());
  const DELETE_RETRY_MS = options.operationRetryMs ?? 60_000;

  const currentObject = currentObjectReader(kc, informer, GitOpsDeploymentCr, options.selector);

  async function recordDeletes(
    object: GitOpsDeploymentObject | undefined,
    deleted: readonly DeletedApplication[],
  ) {
    if (!object) return;
    for (const d of deleted) {
      await events.event(
        GitOpsDeploymentCr.withTypeMeta(object),
        'Normal',
        DeploymentEventReason.ApplicationDeleted,
        `Deleted application ${d.applicationName} from the database (operation ${d.operationId})`,
      );
    }
  }

  /** Sets ErrorOccurred (only writes when it changes); Events on transitions. */
  async function writeErrorOccurred(object: GitOpsDeploymentObject, state: ErrorState, logger: Logger) {
    const uid = object.metadata.uid;
    // Before the write: a Completed operation must not be skipped while this error may be on its way.
    if (uid && state.status === 'error') options.errorReported?.add(uid);
    const conditions = object.status?.conditions ?? [];
    const existing = findCondition(conditions, GitOpsDeploymentConditionType.ErrorOccurred);
    let next: typeof conditions;
    if (state.status === 'error') {
      next = setCondition(
        conditions,
        {
          type: GitOpsDeploymentConditionType.ErrorOccurred,
          status: ConditionStatus.True,
          reason: GitOpsDeploymentReason.ErrorOccurred,
          message: state.message,
        },
        now(),
      );
    } else {
      // "Resolved" only makes sense for an error that was reported.
      if (!existing) return;
      next = setCondition(
        conditions,
        {
          type: GitOpsDeploymentConditionType.ErrorOccurred,
          status: ConditionStatus.False,
          reason: GitOpsDeploymentReason.ErrorOccurredResolved,
          message: '',
        },
        now(),
      );
    }
    await writeErrorConditions(
      { kc, events },
      GitOpsDeploymentCr,
      object,
      {
        conditions,
        next,
        existing,
        state,
        reasons: DeploymentEventReason,
      },
      logger,
    );
    if (uid && state.status === 'ok') options.errorReported?.delete(uid);
  }

  function failedOperationState(
    operation: OperationRow | undefined,
    message: (m: string) => string,
  ): ErrorState {
    return operation?.state === 'Failed'
      ? { status: 'error', message: message(operation.message) }
      : { status: 'ok' };
  }

  /**
   * Deletes every application of the GitOpsDeployment `namespace/name` (under its lock), each announced, and
   * logs each with `why` the GitOpsDeployment lets it go.
   */
  async function deleteApplicationsOf(namespace: string, name: string, logger: Logger, why: string) {
    const result = await db.transaction().execute(async (trx) => {
      await GitOpsDeploymentCr.lock(trx, namespace, name);
      return await deleteMappedApplications(trx, await findDeploymentMappings(trx, namespace, name));
    });
    for (const d of result.deleted) {
      logger.info(
        { application: d.applicationId, operation: d.operationId },
        `application deleted: the GitOpsDeployment ${why}`,
      );
    }
    return result;
  }

  /** The CR is gone (a live read found none): every application of this name goes, each announced. */
  async function reconcileGone(
    namespace: string,
    name: string,
    logger: Logger,
  ): Promise<ReconcileResult | undefined> {
    const { waitingForRelease } = await deleteApplicationsOf(namespace, name, logger, 'is gone');
    return waitingForRelease > 0 ? { requeueAfter: RELEASE_WAIT_MS } : undefined;
  }

  /**
   * The agent gave up deleting the Argo CD Application (its operation Failed) while the user finalizer waits
   * for it: announce the delete again once `operationRetryMs` have passed since the failure, so a transient
   * cause (Argo CD down, a stuck prune that an admin fixed) does not leave the GitOpsDeployment stuck.
   * Returns the delay after which to look again, or 0 when a new operation was announced.
   */
  async function retryFailedDelete(failed: OperationRow, logger: Logger): Promise<number> {
    const dueIn = retryDueIn(failed, DELETE_RETRY_MS, now());
    if (dueIn > 0) return dueIn;
    const reannounced = await db.transaction().execute(async (trx) => {
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

  async function reconcileDeleting(
    object: GitOpsDeploymentObject,
    logger: Logger,
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name, uid = '' } = object.metadata;
    const { deleted, waitingForRelease } = await deleteApplicationsOf(
      namespace,
      name,
      logger,
      'is being deleted',
    );
    await recordDeletes(object, deleted);
    // A move's release is on its way: the delete (and so the finalizer) waits for it.
    if (waitingForRelease > 0) return { requeueAfter: RELEASE_WAIT_MS };

    const finalizers = object.metadata.finalizers ?? [];
    if (!finalizers.includes(Finalizer.GitOpsDeploymentResources)) return;
    const outcome = await applicationOperationsOutcome(db, uid);
    // Completion arrives as gitops_operation_state_changed, which re-enqueues this key: no waiting here.
    if (outcome.pending) return;
    const errorState = failedOperationState(
      outcome.lastFinished,
      DeploymentErrorMessage.applicationDeleteFailed,
    );
    if (errorState.status === 'error' && outcome.lastFinished) {
      await writeErrorOccurred(object, errorState, logger);
      const retryAfter = await retryFailedDelete(outcome.lastFinished, logger);
      // A new operation re-enqueues this key when it finishes; otherwise look again when the wait is over.
      return retryAfter > 0 ? { requeueAfter: retryAfter } : undefined;
    }
    const remaining = finalizers.filter((f) => f !== Finalizer.GitOpsDeploymentResources);
    try {
      await mergePatch(
        kc,
        GitOpsDeploymentCr.ref(object),
        { metadata: { finalizers: remaining, resourceVersion: object.metadata.resourceVersion } },
        { fieldManager: BACKEND_FIELD_MANAGER },
      );
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    logger.info('user finalizer removed: the Argo CD Application is deleted');
    await events.event(
      GitOpsDeploymentCr.withTypeMeta(object),
      'Normal',
      DeploymentEventReason.FinalizerRemoved,
      `Removed finalizer ${Finalizer.GitOpsDeploymentResources}: the Argo CD Application and its resources are deleted`,
    );
  }

  /**
   * Rows of earlier incarnations of the deployment (a delete and re-create under the same name): they go in any
   * case; those waiting for a move's release before they can go make the reconcile look again later.
   */
  function staleRowsOf(object: GitOpsDeploymentObject) {
    const { namespace = '', name, uid = '' } = object.metadata;
    let waiting = 0;
    return {
      async deleteNow() {
        const { deleted, waitingForRelease } = await db.transaction().execute(async (trx) => {
          await GitOpsDeploymentCr.lock(trx, namespace, name);
          return await deleteMappedApplications(
            trx,
            await findDeploymentMappings(trx, namespace, name, { exceptUid: uid }),
          );
        });
        waiting += waitingForRelease;
        await recordDeletes(object, deleted);
      },
      /** Rows the transaction already deleted with the application's change. */
      async deleted(stale: MappedDeletes) {
        waiting += stale.waitingForRelease;
        await recordDeletes(object, stale.deleted);
      },
      later: (): ReconcileResult | undefined => (waiting > 0 ? { requeueAfter: RELEASE_WAIT_MS } : undefined),
    };
  }

  /** The desired application of a live deployment: its spec and environment, or why there is none. */
  async function desiredOf(
    object: GitOpsDeploymentObject,
    logger: Logger,
  ): Promise<
    { ok: true; spec: JsonObject; managedEnvironmentId: string | undefined } | { ok: false; message: string }
  > {
    const namespace = object.metadata.namespace ?? '';
    const parsed = parseGitOpsDeploymentSpec(object.spec);
    if (!parsed.ok) {
      logger.warn({ problem: parsed.problem }, 'malformed GitOpsDeployment');
      return { ok: false, message: DeploymentErrorMessage.invalidSpec(parsed.problem) };
    }
    const environmentName = parsed.spec.destination?.environment;
    let managedEnvironmentId: string | undefined;
    if (environmentName) {
      // Missing or not connected: the application row is kept as it is (the agent renders an empty
      // destination once the environment row is gone); the user sees the documented error.
      const resolved = (await options.resolveEnvironment?.(namespace, environmentName)) ?? { ok: false };
      if (!resolved.ok) return { ok: false, message: GitOpsDeploymentMessage.ManagedEnvironmentUnusable };
      managedEnvironmentId = resolved.managedEnvironmentId;
    }
    const destinationNamespace = environmentName
      ? parsed.spec.destination?.namespace || namespace
      : namespace;
    const problem = destinationProblem(parsed.spec, destinationNamespace);
    if (problem) {
      logger.warn({ problem }, 'GitOpsDeployment reaching outside its destination');
      return { ok: false, message: DeploymentErrorMessage.invalidSpec(problem) };
    }
    const spec = desiredApplicationSpec(parsed.spec, destinationNamespace);
    return { ok: true, spec, managedEnvironmentId };
  }

  /**
   * The locked transaction: the name's lock, its mappings, the rows of earlier incarnations deleted, the
   * application created or updated with its operation. A refused placement or a tenant that needs workspace
   * credentials first is the answer, not an error.
   */
  function applyLocked(input: {
    deployment: { namespace: string; name: string; uid: string };
    tenant: TenantNamespace;
    spec: JsonObject;
    managedEnvironmentId: string | undefined;
    workspaceCredentials?: ClusterCredentialsInput;
  }) {
    const { deployment, tenant, workspaceCredentials } = input;
    const { namespace, name, uid } = deployment;
    return db
      .transaction()
      .execute(async (trx) => {
        await GitOpsDeploymentCr.lock(trx, namespace, name);
        const mappings = await findDeploymentMappings(trx, namespace, name);
        const stale = await deleteMappedApplications(
          trx,
          mappings.filter((m) => m.cr_uid !== uid),
        );
        const result = await applyDesiredApplication(
          trx,
          {
            deployment,
            namespaceUid: tenant.uid,
            requestedEngineInstance: tenant.engineInstance,
            spec: input.spec,
            managedEnvironmentId: input.managedEnvironmentId,
            tenantClusterIdentity: options.tenantClusterIdentity(),
            ...(workspaceCredentials ? { workspaceCredentials } : {}),
          },
          mappings.find((m) => m.cr_uid === uid),
        );
        return { stale, result };
      })
      .catch((err: unknown) => {
        if (err instanceof PlacementRefusedError || err instanceof WorkspaceAccessNeededError) return err;
        throw err;
      });
  }

  /**
   * The locked transaction; when the tenant's instance runs on another cluster, credentials for its namespace
   * first (API calls, so outside the transaction), then the same transaction again with them.
   */
  async function applyWithWorkspaceAccess(
    input: Parameters<typeof applyLocked>[0],
    { logger, signal }: ReconcileContext,
  ) {
    const applied = await applyLocked(input);
    if (!(applied instanceof WorkspaceAccessNeededError)) return applied;
    if (!options.workspaceAccess) throw applied;
    logger.info({ engineInstance: applied.instance }, 'provisioning workspace access for another cluster');
    const workspaceCredentials = await options.workspaceAccess.provision(input.deployment.namespace, signal);
    const again = await applyLocked({ ...input, workspaceCredentials });
    if (again instanceof WorkspaceAccessNeededError) throw again;
    return again;
  }

  /**
   * A created or updated application: said in the log. Not an Event: the status says it when Argo CD has
   * acted on it, and as an Event it was one API write per change that nobody acts on (issue 34).
   */
  function announceChange(result: ApplyResult, logger: Logger) {
    if (result.change === 'none') return;
    logger.info(
      { application: result.application.id, operation: result.operation.id, change: result.change },
      `application ${result.change}`,
    );
  }

  async function reconcileLive(
    object: GitOpsDeploymentObject,
    context: ReconcileContext,
  ): Promise<ReconcileResult | undefined> {
    const { logger, signal } = context;
    const { namespace = '', name, uid = '' } = object.metadata;
    const deployment = { namespace, name, uid };
    const stale = staleRowsOf(object);
    const desired = await desiredOf(object, logger);
    if (!desired.ok) {
      await stale.deleteNow();
      await writeErrorOccurred(object, { status: 'error', message: desired.message }, logger);
      return stale.later();
    }
    const { spec, managedEnvironmentId } = desired;

    // An object without any status yet is almost always new (nothing has reported on it), so the look for an
    // unchanged row outside a transaction is skipped: the transaction reads the mappings and decides alone.
    const existingMappings =
      object.status === undefined ? [] : await findDeploymentMappings(db, namespace, name);
    const ownMapping = existingMappings.find((m) => m.cr_uid === uid);
    // Most reconciles change nothing (an operation finished, a resync): two reads instead of a transaction.
    const unchanged =
      ownMapping && existingMappings.length === 1
        ? await unchangedApplication(db, ownMapping, { spec, managedEnvironmentId })
        : undefined;
    if (unchanged) {
      options.applications?.remember(uid, unchanged.id, `${namespace}/${name}`);
      await reportOperationOutcome(object, uid, unchanged.id, logger);
      return;
    }
    const isNew = !ownMapping && object.status === undefined;
    // A new object: its application in one statement when nothing needs the transaction (usually). That path
    // needs only the namespace's uid and takes only a placed tenant, so the API server's cache answers.
    const createdAtOnce = isNew
      ? await createNewApplication(db, {
          deployment,
          namespaceUid: (await readTenantNamespace(kc, namespace, signal, { fromCache: true })).uid,
          spec,
          managedEnvironmentId,
          tenantClusterIdentity: options.tenantClusterIdentity(),
        })
      : undefined;
    const applied = createdAtOnce
      ? { stale: { deleted: [], waitingForRelease: 0 }, result: createdAtOnce }
      : await applyWithWorkspaceAccess(
          {
            deployment,
            // The namespace's label matters only when the tenant is placed, i.e. for a new application: read
            // from etcd.
            tenant: ownMapping
              ? { uid: ownMapping.cr_namespace_uid, engineInstance: undefined }
              : await readTenantNamespace(kc, namespace, signal),
            spec,
            managedEnvironmentId,
          },
          context,
        );
    if (applied instanceof PlacementRefusedError) {
      logger.warn({ refusal: applied.refusal }, 'the tenant has no engine instance');
      await writeErrorOccurred(object, { status: 'error', message: applied.message }, logger);
      // The instance may be registered or uncordoned, or the label fixed, without any event of ours.
      return { requeueAfter: PLACEMENT_RECHECK_MS };
    }
    const { result } = applied;
    options.applications?.remember(uid, result.application.id, `${namespace}/${name}`);
    await stale.deleted(applied.stale);
    announceChange(result, logger);
    // A change just queued an operation: one is pending, so there is nothing to read to know it.
    if (result.change === 'none') await reportOperationOutcome(object, uid, result.application.id, logger);
    else await writeErrorOccurred(object, { status: 'ok' }, logger);
    return stale.later();
  }

  /** ErrorOccurred from the outcome of the application's operations (a failure shows until the next one). */
  async function reportOperationOutcome(
    object: GitOpsDeploymentObject,
    uid: string,
    applicationId: string,
    logger: Logger,
  ) {
    const outcome = await applicationOperationsOutcome(db, uid, applicationId);
    const errorState = outcome.pending
      ? await awayState(outcome.oldestWaiting)
      : failedOperationState(outcome.lastFinished, DeploymentErrorMessage.applicationOperationFailed);
    await writeErrorOccurred(object, errorState, logger);
  }

  /**
   * A change that has waited longer than `engineInstanceAwayAfterMs` for an instance no agent listens for now
   * is reported (the periodic look in the feature queues such deployments); otherwise waiting is fine.
   */
  async function awayState(waiting: OperationRow | undefined): Promise<ErrorState> {
    const awayAfter = options.engineInstanceAwayAfterMs;
    if (!waiting || awayAfter === undefined) return { status: 'ok' };
    const waited = Date.now() - waiting.created_at.getTime();
    if (waited < awayAfter || (await isAgentListening(db, waiting.engine_instance_id)))
      return { status: 'ok' };
    const instance = await getEngineInstance(db, waiting.engine_instance_id);
    return {
      status: 'error',
      message: PlacementMessage.instanceAway(
        instance?.name ?? waiting.engine_instance_id,
        Math.floor(waited / 60_000),
      ),
    };
  }

  return async (key, context) => {
    const { namespace, name } = splitObjectKey(key);
    if (namespace === undefined) return;
    const object = await currentObject(namespace, name, context.signal);
    // Another shard's deployment is left alone: its rows are that shard's (kinds.ts).
    if (object === null) return;
    try {
      if (!object) return await reconcileGone(namespace, name, context.logger);
      else if (object.metadata.deletionTimestamp) return await reconcileDeleting(object, context.logger);
      else return await reconcileLive(object, context);
    } catch (err) {
      await reportUnknownError(object, err, context, writeErrorOccurred);
      throw err;
    }
  };
}
