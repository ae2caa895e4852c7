/**
 * GitOpsDeploymentSyncRun reconciler (level-based, key `namespace/name`, object from the informer cache).
 * A live SyncRun whose manual parent exists gets exactly one sync: sync_operation + api_cr_mapping +
 * SyncOperation operation in one transaction; later reconciles (updates, resyncs) only report the sync's
 * outcome, and `spec.terminate` terminates the sync. Its status says where the sync is (`phase`, `revision`,
 * `startedAt`, `finishedAt`, `message`, from the row the agent keeps; its changes wake the SyncRun by
 * NOTIFY) and what the Application shows for it (`health`, `syncStatus`, from the agent's application_state;
 * the feature wakes the SyncRun on its changes while `follow` says the Application is this sync's). A SyncRun that is gone (delete event, or orphan sweep) terminates its still-running sync
 * (desired_state Terminated + operation) or, when finished, only loses its rows. No finalizer is used:
 * the delete event and the orphan sweep (at start and every RESYNC_INTERVAL) find deleted SyncRuns.
 */
import { GitOpsDeploymentType, SyncRunConditionType, SyncRunEventReason, SyncRunMessage } from '@gitops/api';
import {
  type Database,
  getApplication,
  getApplicationState,
  getLatestOperationOfOwner,
  listSyncOperationsOfApplication,
  type SyncOperationRow,
} from '@gitops/db';
import {
  type EventRecorder,
  findCondition,
  type Informer,
  type KubeConfig,
  type Logger,
  type ReconcileContext,
  type Reconciler,
  setCondition,
  splitObjectKey,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { reportUnknownError, writeErrorConditions } from '../error-occurred.ts';
import { findDeploymentMappings } from '../gitops-deployment/application.store.ts';
import {
  desiredApplicationSpec,
  type ParsedGitOpsDeploymentSpec,
  parseGitOpsDeploymentSpec,
} from '../gitops-deployment/desired-application.ts';
import { jsonEqual } from '../json.ts';
import { type GitOpsDeploymentObject, SyncRunCr, type SyncRunObject } from '../kinds.ts';
import { currentObjectReader, readNamespaceUid } from '../kube-reads.ts';
import type { LabelSelector } from '../label-selector.ts';
import { parseApplicationState } from '../status/deployment-status.ts';
import {
  FINISHED_SYNC_RUN_PHASES,
  parseSyncRunSpec,
  SyncRunErrorMessage,
  type SyncRunErrorState,
  SyncRunPhase,
  type SyncRunSpec,
  type SyncRunSpecParseResult,
  SyncRunSyncMessage,
  type SyncRunSyncStatus,
  syncRunApplicationStatus,
  syncRunCondition,
  syncRunErrorState,
  syncRunSyncStatus,
  syncStartedInArgoCd,
  syncStatusChanges,
} from './sync-run.status.ts';
import { releaseGoneSyncRuns, requestSync, syncOperationOf, terminateSync } from './sync-run.store.ts';

/** How long to wait for the parent GitOpsDeployment's application row (its reconcile is running). */
const PARENT_ROW_RETRY_MS = 1_000;
/** How long a new SyncRun waits for its parent's latest spec to reach the database before syncing anyway. */
const PARENT_SPEC_WAIT_MS = 30_000;
/** How soon to retry when an earlier SyncRun of the same deployment has not been requested yet. */
const EARLIER_SYNC_RUN_RETRY_MS = 250;

export interface SyncRunReconcilerOptions {
  db: Kysely<Database>;
  kc: KubeConfig;
  informer: Informer<SyncRunObject>;
  /** The GitOpsDeployment informer (parents are looked up there). */
  deployments: Informer<GitOpsDeploymentObject>;
  events: EventRecorder;
  selector?: LabelSelector;
  now?: () => Date;
  /**
   * Called with the application whose state the SyncRun `key` shows (its changes should wake the SyncRun), or
   * `undefined` once it shows none or no longer follows one.
   */
  follow?: (key: string, applicationId: string | undefined) => void;
}

export function createSyncRunReconciler(options: SyncRunReconcilerOptions): Reconciler {
  const { db, kc, informer, deployments, events } = options;
  const now = options.now ?? (() => new Date());
  /**
   * Creation order of SyncRuns: creationTimestamp (whole seconds), ties broken by the order the watch
   * delivered them (etcd's order). Rows are created in this order, so the agent runs them in it.
   */
  const seen = new Map<string, number>();
  let nextSeen = 0;
  informer.onAdd((o) => {
    if (o.metadata.uid && !seen.has(o.metadata.uid)) seen.set(o.metadata.uid, nextSeen++);
  });
  informer.onDelete((o) => {
    if (o.metadata.uid) seen.delete(o.metadata.uid);
  });
  const creationOrder = (o: SyncRunObject): [string, number] => [
    o.metadata.creationTimestamp ?? '',
    seen.get(o.metadata.uid ?? '') ?? Number.MAX_SAFE_INTEGER,
  ];
  /** The SyncRun's status says its sync ended (Succeeded, Failed, Terminated): nothing changes any more. */
  const hasEnded = (object: SyncRunObject) => {
    const phase = object.status?.phase;
    return phase !== undefined && FINISHED_SYNC_RUN_PHASES.has(phase);
  };
  const isBefore = (a: SyncRunObject, b: SyncRunObject) => {
    const [ta, sa] = creationOrder(a);
    const [tb, sb] = creationOrder(b);
    return ta < tb || (ta === tb && sa < sb);
  };

  /**
   * True when an earlier SyncRun of the same deployment has no sync row yet (it must be requested first); one
   * whose sync ended is not waited for (its rows are gone only when the database lost them: never requested again).
   */
  async function earlierSyncRunPending(object: SyncRunObject, parentName: string): Promise<boolean> {
    for (const other of informer.list()) {
      if (
        other.metadata.namespace !== object.metadata.namespace ||
        other.metadata.uid === object.metadata.uid ||
        other.metadata.deletionTimestamp ||
        other.spec.gitopsDeploymentName !== parentName ||
        other.spec.terminate === true ||
        hasEnded(other) ||
        !isBefore(other, object)
      ) {
        continue;
      }
      if (!(await syncOperationOf(db, other.metadata.uid ?? ''))) return true;
    }
    return false;
  }

  const currentObject = currentObjectReader(kc, informer, SyncRunCr, options.selector);

  const namespaceUid = (namespace: string, signal: AbortSignal) => readNamespaceUid(kc, namespace, signal);
  const follow = options.follow ?? (() => {});

  /** `status.health` / `status.syncStatus` for the SyncRun `key` whose sync is `row`. */
  async function applicationStatusOf(key: string, row: SyncOperationRow, object: SyncRunObject) {
    let rows: SyncOperationRow[] | undefined;
    let application: ReturnType<typeof parseApplicationState> | undefined;
    if (row.application_id !== null && syncStartedInArgoCd(row)) {
      // Before reading: a change committed after this point wakes the SyncRun again.
      follow(key, row.application_id);
      rows = await listSyncOperationsOfApplication(db, row.application_id);
      const state = await getApplicationState(db, row.application_id);
      application = state ? parseApplicationState(state.state) : undefined;
    }
    const shown = syncRunApplicationStatus(row, rows, application, object.status);
    if (!shown.follow) follow(key, undefined);
    return { health: shown.health, syncStatus: shown.syncStatus };
  }

  /** The Event of a new phase (none for Pending). */
  const phaseEvents: Partial<Record<SyncRunPhase, { type: 'Normal' | 'Warning'; reason: string }>> = {
    Running: { type: 'Normal', reason: SyncRunEventReason.SyncStarted },
    Succeeded: { type: 'Normal', reason: SyncRunEventReason.SyncSucceeded },
    Failed: { type: 'Warning', reason: SyncRunEventReason.SyncFailed },
    Terminated: { type: 'Warning', reason: SyncRunEventReason.SyncTerminated },
  };

  /**
   * Sets the single ErrorOccurred condition and, when given, the sync's status fields (one patch, written
   * only when something changes); Events on transitions.
   */
  async function writeCondition(
    object: SyncRunObject,
    state: SyncRunErrorState,
    logger: Logger,
    sync?: SyncRunSyncStatus,
  ) {
    const conditions = object.status?.conditions ?? [];
    const existing = findCondition(conditions, SyncRunConditionType.ErrorOccurred);
    const changes = sync ? syncStatusChanges(object.status, sync) : {};
    const next = setCondition(
      conditions.filter((c) => c.type === SyncRunConditionType.ErrorOccurred),
      syncRunCondition(state),
      now(),
    );
    await writeErrorConditions(
      { kc, events },
      SyncRunCr,
      object,
      {
        conditions,
        next,
        existing,
        state,
        reasons: SyncRunEventReason,
        alsoStatus: changes,
      },
      logger,
    );
    const event = changes.phase ? phaseEvents[changes.phase] : undefined;
    if (sync && event) {
      if (FINISHED_SYNC_RUN_PHASES.has(sync.phase)) logger.info({ phase: sync.phase }, 'sync ended');
      await events.event(
        SyncRunCr.withTypeMeta(object),
        event.type,
        event.reason,
        `The sync is ${sync.phase}${sync.revision ? ` at revision ${sync.revision}` : ''}${sync.message ? `: ${sync.message}` : ''}`,
      );
    }
  }

  async function reconcileGone(namespace: string, name: string, logger: Logger, exceptUid?: string) {
    if (exceptUid === undefined) follow(`${namespace}/${name}`, undefined);
    const released = await releaseGoneSyncRuns(db, namespace, name, exceptUid);
    for (const r of released) {
      logger.info(
        { syncOperation: r.syncOperationId, operation: r.operationId, action: r.action },
        r.action === 'terminating'
          ? 'sync terminated: the GitOpsDeploymentSyncRun is gone while its sync runs'
          : r.action === 'deleted'
            ? 'sync rows deleted: the GitOpsDeploymentSyncRun is gone'
            : 'waiting for the agent to terminate the sync',
      );
    }
  }

  /** A SyncRun whose sync was requested already: updates never create a second one; only its outcome shows. */
  async function reportRequested(
    object: SyncRunObject,
    existing: SyncOperationRow,
    terminate: boolean,
    logger: Logger,
  ): Promise<void> {
    const { namespace = '', name, uid = '' } = object.metadata;
    if (terminate) {
      const operation = await terminateSync(db, { namespace, name, uid });
      if (operation) logger.info({ syncOperation: existing.id, operation: operation.id }, 'sync terminating');
    }
    const lastOperation = await getLatestOperationOfOwner(db, uid, 'SyncOperation');
    await writeCondition(object, syncRunErrorState(existing, lastOperation), logger, {
      ...syncRunSyncStatus(existing, lastOperation),
      ...(await applicationStatusOf(`${namespace}/${name}`, existing, object)),
    });
  }

  /**
   * Why a SyncRun that has requested nothing yet cannot request its sync (a malformed spec, terminated before
   * the request, a parent missing or automated), or its valid spec and manual parent.
   */
  function refusalOrParent(
    object: SyncRunObject,
    parsed: SyncRunSpecParseResult,
  ):
    | { refused: string; terminated?: true }
    | { spec: SyncRunSpec; parent: GitOpsDeploymentObject; parentSpec: ParsedGitOpsDeploymentSpec } {
    const { namespace = '', name } = object.metadata;
    if (!parsed.ok) return { refused: SyncRunErrorMessage.invalidSpec(parsed.problem) };
    // Terminated before anything was requested: nothing happens in Argo CD, ever.
    if (parsed.spec.terminate)
      return {
        refused: SyncRunErrorMessage.syncFailed(
          SyncRunPhase.Terminated,
          SyncRunSyncMessage.terminatedBeforeRequest,
        ),
        terminated: true,
      };
    const parentName = parsed.spec.gitopsDeploymentName;
    const parent = deployments.get(namespace, parentName);
    const parentSpec =
      parent && !parent.metadata.deletionTimestamp ? parseGitOpsDeploymentSpec(parent.spec) : undefined;
    // Re-enqueued when a GitOpsDeployment of this name appears (see the controller).
    if (!parent || !parentSpec?.ok) return { refused: SyncRunMessage.parentNotFound(parentName) };
    if (parentSpec.spec.type === GitOpsDeploymentType.Automated)
      return { refused: SyncRunMessage.parentIsAutomated(name) };
    return { spec: parsed.spec, parent, parentSpec: parentSpec.spec };
  }

  /**
   * The parent's application row once it holds the parent's latest spec, with its mapping; undefined while
   * the parent's reconcile has not written it yet (a user who changes the deployment and then creates a
   * SyncRun wants the new spec synced; after PARENT_SPEC_WAIT_MS the row is taken as it is).
   */
  async function parentApplication(
    object: SyncRunObject,
    parent: GitOpsDeploymentObject,
    parentSpec: ParsedGitOpsDeploymentSpec,
    logger: Logger,
  ) {
    const namespace = object.metadata.namespace ?? '';
    const mapping = (await findDeploymentMappings(db, namespace, parent.metadata.name)).find(
      (m) => m.cr_uid === parent.metadata.uid,
    );
    const application = mapping?.application_id
      ? await getApplication(db, mapping.application_id)
      : undefined;
    if (!application) {
      logger.debug('the parent GitOpsDeployment has no application row yet');
      return undefined;
    }
    const environmentName = parentSpec.destination?.environment;
    const desired = desiredApplicationSpec(
      parentSpec,
      environmentName ? parentSpec.destination?.namespace || namespace : namespace,
    );
    const age = Date.now() - Date.parse(object.metadata.creationTimestamp ?? '');
    if (!jsonEqual(application.spec, desired) && !(age > PARENT_SPEC_WAIT_MS)) {
      logger.debug("the parent GitOpsDeployment's latest spec is not in its application row yet");
      return undefined;
    }
    return { application, mapping };
  }

  async function reconcileLive(object: SyncRunObject, context: ReconcileContext) {
    const { logger, signal } = context;
    const { namespace = '', name, uid = '' } = object.metadata;
    // Earlier incarnations with the same name (delete-recreate) are handled like deleted ones.
    await reconcileGone(namespace, name, logger, uid);

    const parsed = parseSyncRunSpec(object.spec);
    const existing = await syncOperationOf(db, uid);
    if (existing) return await reportRequested(object, existing, parsed.ok && parsed.spec.terminate, logger);
    follow(`${namespace}/${name}`, undefined);
    // Its sync was requested and ended, and its rows are gone while it lives on: the database lost them (a
    // restore from a backup, a failover that lost the last commits). Its status is the true outcome; asking
    // for the sync again would report another one, and could deploy an older revision than a later sync did.
    if (hasEnded(object)) {
      logger.info(
        { phase: object.status?.phase },
        'sync not requested again: it ended before, and its rows are gone (a restored database)',
      );
      return;
    }

    const checked = refusalOrParent(object, parsed);
    if ('refused' in checked) {
      await writeCondition(
        object,
        { status: 'error', message: checked.refused },
        logger,
        syncRunSyncStatus(undefined, undefined, checked.terminated),
      );
      return;
    }
    const { spec, parent, parentSpec } = checked;
    const found = await parentApplication(object, parent, parentSpec, logger);
    if (!found) return { requeueAfter: PARENT_ROW_RETRY_MS };
    if (await earlierSyncRunPending(object, spec.gitopsDeploymentName)) {
      logger.debug('an earlier SyncRun of the deployment is requested first');
      return { requeueAfter: EARLIER_SYNC_RUN_RETRY_MS };
    }
    const tenantNamespaceUid = found.mapping?.cr_namespace_uid ?? (await namespaceUid(namespace, signal));
    const result = await requestSync(db, {
      syncRun: { namespace, name, uid },
      namespaceUid: tenantNamespaceUid,
      application: found.application,
      deploymentName: spec.gitopsDeploymentName,
      revision: spec.revisionID,
    });
    if (result.created) {
      logger.info(
        { syncOperation: result.syncOperation.id, operation: result.operation.id },
        'sync requested',
      );
      await events.event(
        SyncRunCr.withTypeMeta(object),
        'Normal',
        SyncRunEventReason.SyncRequested,
        `Requested a sync of GitOpsDeployment ${spec.gitopsDeploymentName}${spec.revisionID ? ` to revision ${spec.revisionID}` : ''} (operation ${result.operation.id})`,
      );
    }
    await writeCondition(
      object,
      { status: 'ok' },
      logger,
      syncRunSyncStatus(result.syncOperation, undefined),
    );
    return undefined;
  }

  return async (key, context) => {
    const { namespace, name } = splitObjectKey(key);
    if (namespace === undefined) return;
    const object = await currentObject(namespace, name, context.signal);
    // Another shard's object is left alone (the shard rule, kinds.ts).
    if (object === null) return;
    try {
      if (!object || object.metadata.deletionTimestamp) await reconcileGone(namespace, name, context.logger);
      else return await reconcileLive(object, context);
    } catch (err) {
      await reportUnknownError(object, err, context, writeCondition);
      throw err;
    }
    return undefined;
  };
}
