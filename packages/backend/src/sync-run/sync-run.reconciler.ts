/**
 * GitOpsDeploymentSyncRun reconciler (level-based, key `namespace/name`, object from the informer cache).
 * A live SyncRun whose manual parent exists gets exactly one sync: sync_operation + api_cr_mapping +
 * SyncOperation operation in one transaction; later reconciles (updates, resyncs) only report the sync's
 * outcome. A SyncRun that is gone (delete event, or orphan sweep) terminates its still-running sync
 * (desired_state Terminated + operation) or, when finished, only loses its rows. No finalizer is used:
 * the delete event and the orphan sweep (at start and every RESYNC_INTERVAL) find deleted SyncRuns.
 */
import {
  GitOpsDeploymentMessage,
  GitOpsDeploymentType,
  SyncRunConditionType,
  SyncRunMessage,
} from '@gitops/api';
import { type Database, getApplication, getLatestOperationOfOwner } from '@gitops/db';
import {
  type EventRecorder,
  findCondition,
  type Informer,
  isConflict,
  type KubeConfig,
  type KubeObject,
  type Logger,
  type ReconcileContext,
  type Reconciler,
  setCondition,
  splitObjectKey,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { writeErrorConditions } from '../error-occurred.ts';
import { findDeploymentMappings } from '../gitops-deployment/application.store.ts';
import { parseGitOpsDeploymentSpec } from '../gitops-deployment/desired-application.ts';
import { conditionsOf, isBeingDeleted } from '../gitops-deployment/gitops-deployment.object.ts';
import { isJsonObject } from '../json.ts';
import { SyncRunCr } from '../kinds.ts';
import { currentObjectReader, readNamespaceUid } from '../kube-reads.ts';
import type { LabelSelector } from '../label-selector.ts';
import {
  parseSyncRunSpec,
  SyncRunErrorMessage,
  type SyncRunErrorState,
  syncRunCondition,
  syncRunErrorState,
} from './sync-run.status.ts';
import { releaseGoneSyncRuns, requestSync, syncOperationOf } from './sync-run.store.ts';

/** Event reasons on SyncRuns (kubectl describe). */
export const SyncRunEventReason = {
  SyncRequested: 'SyncRequested',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

/** How long to wait for the parent GitOpsDeployment's application row (its reconcile is running). */
const PARENT_ROW_RETRY_MS = 1_000;
/** How soon to retry when an earlier SyncRun of the same deployment has not been requested yet. */
const EARLIER_SYNC_RUN_RETRY_MS = 250;

export interface SyncRunReconcilerOptions {
  db: Kysely<Database>;
  kc: KubeConfig;
  informer: Informer<KubeObject>;
  /** The GitOpsDeployment informer (parents are looked up there). */
  deployments: Informer<KubeObject>;
  events: EventRecorder;
  selector?: LabelSelector;
  now?: () => Date;
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
  const creationOrder = (o: KubeObject): [string, number] => [
    typeof o.metadata.creationTimestamp === 'string' ? o.metadata.creationTimestamp : '',
    seen.get(o.metadata.uid ?? '') ?? Number.MAX_SAFE_INTEGER,
  ];
  const isBefore = (a: KubeObject, b: KubeObject) => {
    const [ta, sa] = creationOrder(a);
    const [tb, sb] = creationOrder(b);
    return ta < tb || (ta === tb && sa < sb);
  };

  /** True when an earlier SyncRun of the same deployment has no sync row yet (it must be requested first). */
  async function earlierSyncRunPending(object: KubeObject, parentName: string): Promise<boolean> {
    for (const other of informer.list()) {
      if (
        other.metadata.namespace !== object.metadata.namespace ||
        other.metadata.uid === object.metadata.uid ||
        isBeingDeleted(other) ||
        !isJsonObject(other.spec) ||
        other.spec.gitopsDeploymentName !== parentName ||
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

  /** Sets the single ErrorOccurred condition (writes only when it changes); Events on transitions. */
  async function writeCondition(object: KubeObject, state: SyncRunErrorState, logger: Logger) {
    const conditions = conditionsOf(object);
    const existing = findCondition(conditions, SyncRunConditionType.ErrorOccurred);
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
        reasons: {
          error: SyncRunEventReason.ErrorOccurred,
          resolved: SyncRunEventReason.ErrorOccurredResolved,
        },
      },
      logger,
    );
  }

  async function reconcileGone(namespace: string, name: string, logger: Logger, exceptUid?: string) {
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

  async function reconcileLive(object: KubeObject, context: ReconcileContext) {
    const { logger, signal } = context;
    const { namespace = '', name, uid = '' } = object.metadata;
    // Earlier incarnations with the same name (delete-recreate) are handled like deleted ones.
    await reconcileGone(namespace, name, logger, uid);

    const existing = await syncOperationOf(db, uid);
    if (existing) {
      // Requested already: updates never create a second sync; only the outcome is reported.
      const state = syncRunErrorState(existing, await getLatestOperationOfOwner(db, uid, 'SyncOperation'));
      await writeCondition(object, state, logger);
      return;
    }

    const parsed = parseSyncRunSpec(object.spec);
    if (!parsed.ok) {
      await writeCondition(
        object,
        { status: 'error', message: SyncRunErrorMessage.invalidSpec(parsed.problem) },
        logger,
      );
      return;
    }
    const parentName = parsed.spec.gitopsDeploymentName;
    const parent = deployments.get(namespace, parentName);
    const parentSpec = parent && !isBeingDeleted(parent) ? parseGitOpsDeploymentSpec(parent.spec) : undefined;
    if (!parent || !parentSpec?.ok) {
      // Re-enqueued when a GitOpsDeployment of this name appears (see the controller).
      await writeCondition(
        object,
        { status: 'error', message: SyncRunMessage.parentNotFound(parentName) },
        logger,
      );
      return;
    }
    if (parentSpec.spec.type === GitOpsDeploymentType.Automated) {
      await writeCondition(
        object,
        { status: 'error', message: SyncRunMessage.parentIsAutomated(name) },
        logger,
      );
      return;
    }
    const mapping = (await findDeploymentMappings(db, namespace, parentName)).find(
      (m) => m.cr_uid === parent.metadata.uid,
    );
    const application = mapping?.application_id
      ? await getApplication(db, mapping.application_id)
      : undefined;
    if (!application) {
      logger.debug('the parent GitOpsDeployment has no application row yet');
      return { requeueAfter: PARENT_ROW_RETRY_MS };
    }
    if (await earlierSyncRunPending(object, parentName)) {
      logger.debug('an earlier SyncRun of the deployment is requested first');
      return { requeueAfter: EARLIER_SYNC_RUN_RETRY_MS };
    }
    const tenantNamespaceUid = mapping?.cr_namespace_uid ?? (await namespaceUid(namespace, signal));
    const result = await requestSync(db, {
      syncRun: { namespace, name, uid },
      namespaceUid: tenantNamespaceUid,
      application,
      deploymentName: parentName,
      revision: parsed.spec.revisionID,
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
        `Requested a sync of GitOpsDeployment ${parentName}${parsed.spec.revisionID ? ` to revision ${parsed.spec.revisionID}` : ''} (operation ${result.operation.id})`,
      );
    }
    await writeCondition(object, { status: 'ok' }, logger);
    return undefined;
  }

  return async (key, context) => {
    const { namespace, name } = splitObjectKey(key);
    if (namespace === undefined) return;
    // Another shard's object (null) counts as absent here.
    const object = (await currentObject(namespace, name, context.signal)) ?? undefined;
    try {
      if (!object || isBeingDeleted(object)) await reconcileGone(namespace, name, context.logger);
      else return await reconcileLive(object, context);
    } catch (err) {
      if (object && !isConflict(err) && !context.signal.aborted) {
        context.logger.error({ err }, 'GitOpsDeploymentSyncRun reconcile failed');
        await writeCondition(
          object,
          { status: 'error', message: GitOpsDeploymentMessage.UnknownError },
          context.logger,
        ).catch((statusErr: unknown) =>
          context.logger.warn({ err: statusErr }, 'could not report the error in ErrorOccurred'),
        );
      }
      throw err;
    }
    return undefined;
  };
}
