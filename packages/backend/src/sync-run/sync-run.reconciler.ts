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
 * The steps are top-level functions over a `deps` object (`SyncRunSteps`), so a test calls one with plain
 * objects: this file the request path, `sync-run.conditions.ts` the status it writes.
 */
import { GitOpsDeploymentType, SyncRunEventReason, SyncRunMessage } from '@gitops/api';
import { type ApiCrMappingRow, apiCrMappingsOfKind, getApplication } from '@gitops/db';
import type { Informer, Logger, ReconcileContext, ReconcileResult, Reconciler } from '@gitops/shared';
import { findDeploymentMappings } from '../gitops-deployment/application.store.ts';
import {
  desiredApplicationSpec,
  type ParsedGitOpsDeploymentSpec,
  parseGitOpsDeploymentSpec,
} from '../gitops-deployment/desired-application.ts';
import { jsonEqual } from '../json.ts';
import { GitOpsDeploymentCr, type GitOpsDeploymentObject, SyncRunCr, type SyncRunObject } from '../kinds.ts';
import { currentObjectReader, readLiveUid, readNamespaceUid } from '../kube-reads.ts';
import {
  type CurrentObjectRead,
  type LiveUidRead,
  provenGoneOfName,
  reconcileCurrentObject,
} from '../reconcile-current.ts';
import type { CrReconcilerOptions } from '../reconciler-options.ts';
import { reportRequested, writeCondition } from './sync-run.conditions.ts';
import {
  FINISHED_SYNC_RUN_PHASES,
  parseSyncRunSpec,
  SyncRunErrorMessage,
  SyncRunPhase,
  type SyncRunSpec,
  type SyncRunSpecParseResult,
  SyncRunSyncMessage,
  syncRunSyncStatus,
} from './sync-run.status.ts';
import {
  type GoneSyncRunAction,
  releaseGoneSyncRuns,
  requestSync,
  syncOperationOf,
} from './sync-run.store.ts';

/** How long to wait for the parent GitOpsDeployment's application row (its reconcile is running). */
const PARENT_ROW_RETRY_MS = 1_000;
/** How long a new SyncRun waits for its parent's latest spec to reach the database before syncing anyway. */
const PARENT_SPEC_WAIT_MS = 30_000;
/** How soon to retry when an earlier SyncRun of the same deployment has not been requested yet. */
const EARLIER_SYNC_RUN_RETRY_MS = 250;

export interface SyncRunReconcilerOptions extends CrReconcilerOptions<SyncRunObject> {
  /** The GitOpsDeployment informer (parents are looked up there). */
  deployments: Informer<GitOpsDeploymentObject>;
  /**
   * Called with the application whose state the SyncRun `key` shows (its changes should wake the SyncRun), or
   * `undefined` once it shows none or no longer follows one.
   */
  follow?: (key: string, applicationId: string | undefined) => void;
}

/** What the steps use: the client, recorder and clock, the caches they read and the creation order seen. */
export interface SyncRunSteps extends Pick<SyncRunReconcilerOptions, 'db' | 'kc' | 'events'> {
  now: () => Date;
  syncRuns: Pick<Informer<SyncRunObject>, 'list'>;
  deployments: Pick<Informer<GitOpsDeploymentObject>, 'get'>;
  /** The order the watch delivered SyncRuns in, by uid (see {@link trackCreationOrder}). */
  seen: ReadonlyMap<string, number>;
  follow: (key: string, applicationId: string | undefined) => void;
  currentObject: CurrentObjectRead<SyncRunObject>;
  namespaceUid: (namespace: string, signal: AbortSignal) => Promise<string>;
  /** The uid of the GitOpsDeployment `namespace/name` the API server holds now (undefined: none). */
  liveDeploymentUid: LiveUidRead;
  /** The uid of the SyncRun `namespace/name` the API server holds now (undefined: none). */
  liveUid: LiveUidRead;
}

export function createSyncRunReconciler(options: SyncRunReconcilerOptions): Reconciler {
  const { db, kc, informer, deployments, events } = options;
  const deps: SyncRunSteps = {
    db,
    kc,
    events,
    now: options.now ?? (() => new Date()),
    syncRuns: informer,
    deployments,
    seen: trackCreationOrder(informer),
    follow: options.follow ?? (() => {}),
    currentObject: currentObjectReader(kc, informer, SyncRunCr, options.selector),
    namespaceUid: (namespace, signal) => readNamespaceUid(kc, namespace, signal),
    liveDeploymentUid: (namespace, name, signal) =>
      readLiveUid(kc, GitOpsDeploymentCr, { namespace, name }, signal),
    liveUid: (namespace, name, signal) => readLiveUid(kc, SyncRunCr, { namespace, name }, signal),
  };
  // Another shard's object is left alone (the shard rule, kinds.ts).
  return (key, context) => reconcileCurrentObject(deps, key, context, reconcileSyncRun, writeCondition);
}

/**
 * Creation order of SyncRuns: creationTimestamp (whole seconds), ties broken by the order the watch
 * delivered them (etcd's order). Rows are created in this order, so the agent runs them in it. Returns the
 * map of uid → delivery order the informer's add and delete events keep.
 */
export function trackCreationOrder(informer: Pick<Informer<SyncRunObject>, 'onAdd' | 'onDelete'>) {
  const seen = new Map<string, number>();
  let nextSeen = 0;
  informer.onAdd((o) => {
    if (o.metadata.uid && !seen.has(o.metadata.uid)) seen.set(o.metadata.uid, nextSeen++);
  });
  informer.onDelete((o) => {
    if (o.metadata.uid) seen.delete(o.metadata.uid);
  });
  return seen;
}

const creationOrder = (seen: ReadonlyMap<string, number>, o: SyncRunObject): [string, number] => [
  o.metadata.creationTimestamp ?? '',
  seen.get(o.metadata.uid ?? '') ?? Number.MAX_SAFE_INTEGER,
];

/** `a` was created before `b` (creationTimestamp, then the order the watch delivered them). */
export function isBefore(seen: ReadonlyMap<string, number>, a: SyncRunObject, b: SyncRunObject): boolean {
  const [ta, sa] = creationOrder(seen, a);
  const [tb, sb] = creationOrder(seen, b);
  return ta < tb || (ta === tb && sa < sb);
}

/** The SyncRun's status says its sync ended (Succeeded, Failed, Terminated): nothing changes any more. */
export function hasEnded(object: SyncRunObject): boolean {
  const phase = object.status?.phase;
  return phase !== undefined && FINISHED_SYNC_RUN_PHASES.has(phase);
}

/**
 * True when an earlier SyncRun of the same deployment has no sync row yet (it must be requested first); one
 * whose sync ended is not waited for (its rows are gone only when the database lost them: never requested again).
 */
export async function earlierSyncRunPending(
  deps: Pick<SyncRunSteps, 'db' | 'syncRuns' | 'seen'>,
  object: SyncRunObject,
  parentName: string,
): Promise<boolean> {
  for (const other of deps.syncRuns.list()) {
    if (
      other.metadata.namespace !== object.metadata.namespace ||
      other.metadata.uid === object.metadata.uid ||
      other.metadata.deletionTimestamp ||
      other.spec.gitopsDeploymentName !== parentName ||
      other.spec.terminate === true ||
      hasEnded(other) ||
      !isBefore(deps.seen, other, object)
    ) {
      continue;
    }
    if (!(await syncOperationOf(deps.db, other.metadata.uid ?? ''))) return true;
  }
  return false;
}

/** One reconcile of a SyncRun (its key `namespace/name`): gone (or being deleted), or live. */
export async function reconcileSyncRun(
  deps: SyncRunSteps,
  object: SyncRunObject | undefined,
  namespace: string,
  name: string,
  context: ReconcileContext,
): Promise<ReconcileResult | undefined> {
  if (!object) await reconcileGone(deps, namespace, name, context);
  else if (object.metadata.deletionTimestamp) {
    // Its own syncs only: the deletionTimestamp proves this uid is going, not that another of the name is.
    deps.follow(`${namespace}/${name}`, undefined);
    await releaseSyncs(deps, namespace, name, (m) => m.cr_uid === object.metadata.uid, context.logger);
  } else return await reconcileLive(deps, object, context);
  return undefined;
}

/** What the log says of a gone SyncRun's sync. */
function releasedMessage(action: GoneSyncRunAction): string {
  return action === 'terminating'
    ? 'sync terminated: the GitOpsDeploymentSyncRun is gone while its sync runs'
    : action === 'deleted'
      ? 'sync rows deleted: the GitOpsDeploymentSyncRun is gone'
      : 'waiting for the agent to terminate the sync';
}

/** The syncs of the incarnations of SyncRun `namespace/name` whose mappings are `proven` gone, released and logged. */
async function releaseSyncs(
  deps: Pick<SyncRunSteps, 'db'>,
  namespace: string,
  name: string,
  proven: (mapping: ApiCrMappingRow) => boolean,
  logger: Logger,
) {
  const released = await releaseGoneSyncRuns(deps.db, namespace, name, proven);
  for (const r of released) {
    logger.info(
      { syncOperation: r.syncOperationId, operation: r.operationId, action: r.action },
      releasedMessage(r.action),
    );
  }
}

/** The mappings of the SyncRuns of one name. */
const syncRunMappings = apiCrMappingsOfKind(SyncRunCr.kind);

/**
 * The SyncRun `namespace/name` is gone (a live read found none): the syncs of the incarnations a live read made
 * after their mappings were read proves gone (all but one made since) are released: running ones terminate,
 * finished ones lose their rows.
 */
export async function reconcileGone(
  deps: Pick<SyncRunSteps, 'db' | 'follow' | 'liveUid'>,
  namespace: string,
  name: string,
  { logger, signal }: Pick<ReconcileContext, 'logger' | 'signal'>,
) {
  deps.follow(`${namespace}/${name}`, undefined);
  const { gone } = await provenGoneOfName(deps, syncRunMappings, { namespace, name }, signal);
  if (gone.size > 0) await releaseSyncs(deps, namespace, name, (m) => gone.has(m.id), logger);
}

/**
 * Why a SyncRun that has requested nothing yet cannot request its sync (a malformed spec, terminated before
 * the request, a parent missing or automated), or its valid spec and manual parent.
 */
export function refusalOrParent(
  deps: Pick<SyncRunSteps, 'deployments'>,
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
  const parent = deps.deployments.get(namespace, parentName);
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
  deps: Pick<SyncRunSteps, 'db'>,
  object: SyncRunObject,
  parent: GitOpsDeploymentObject,
  parentSpec: ParsedGitOpsDeploymentSpec,
  logger: Logger,
) {
  const namespace = object.metadata.namespace ?? '';
  const mapping = (await findDeploymentMappings(deps.db, namespace, parent.metadata.name)).find(
    (m) => m.cr_uid === parent.metadata.uid,
  );
  const application = mapping?.application_id
    ? await getApplication(deps.db, mapping.application_id)
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

/** A live SyncRun: its sync requested once (in creation order, from its manual parent's row), then its outcome. */
export async function reconcileLive(
  deps: SyncRunSteps,
  object: SyncRunObject,
  context: ReconcileContext,
): Promise<ReconcileResult | undefined> {
  const { logger, signal } = context;
  const { namespace = '', name, uid = '' } = object.metadata;
  // Earlier incarnations with the same name (delete-recreate) are handled like deleted ones, once a live read
  // proves them gone. When it finds another uid than this one, this replica's cache is behind: the event that
  // brings it up to date reconciles.
  const {
    mappings: others,
    liveUid,
    gone,
  } = await provenGoneOfName(deps, syncRunMappings, { namespace, name }, signal, uid);
  if (others.length > 0 && liveUid !== uid) {
    logger.info('SyncRun not reconciled: this replica has not seen its change yet');
    return;
  }
  if (gone.size > 0) await releaseSyncs(deps, namespace, name, (m) => gone.has(m.id), logger);

  const parsed = parseSyncRunSpec(object.spec);
  const existing = await syncOperationOf(deps.db, uid);
  if (existing) {
    await reportRequested(deps, object, existing, parsed.ok && parsed.spec.terminate, logger);
    return;
  }
  deps.follow(`${namespace}/${name}`, undefined);
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

  const checked = refusalOrParent(deps, object, parsed);
  if ('refused' in checked) {
    await writeCondition(
      deps,
      object,
      { status: 'error', message: checked.refused },
      logger,
      syncRunSyncStatus(undefined, undefined, checked.terminated),
    );
    return;
  }
  const { spec, parent, parentSpec } = checked;
  const found = await parentApplication(deps, object, parent, parentSpec, logger);
  if (!found) return { requeueAfter: PARENT_ROW_RETRY_MS };
  if (await earlierSyncRunPending(deps, object, spec.gitopsDeploymentName)) {
    logger.debug('an earlier SyncRun of the deployment is requested first');
    return { requeueAfter: EARLIER_SYNC_RUN_RETRY_MS };
  }
  // The cache may still hold an earlier incarnation of the parent (a deployment deleted and created again under
  // its name while this replica's watch lagged): its row would take the sync, then end it when it goes. Read
  // once per SyncRun, before its sync is requested.
  if ((await deps.liveDeploymentUid(namespace, parent.metadata.name, signal)) !== parent.metadata.uid) {
    logger.debug('the cached parent GitOpsDeployment is not the one the API server holds now');
    return { requeueAfter: PARENT_ROW_RETRY_MS };
  }
  // Nor the SyncRun itself, when its delete has not reached this replica's cache: one deleted after its sync
  // ended would get another. Its own delete or re-create event reconciles.
  const live = others.length > 0 ? liveUid : await deps.liveUid(namespace, name, signal);
  if (live !== uid) {
    logger.info('sync not requested: the SyncRun is gone or another one of its name now');
    return undefined;
  }
  const tenantNamespaceUid = found.mapping?.cr_namespace_uid ?? (await deps.namespaceUid(namespace, signal));
  const result = await requestSync(deps.db, {
    syncRun: { namespace, name, uid },
    namespaceUid: tenantNamespaceUid,
    application: found.application,
    deploymentName: spec.gitopsDeploymentName,
    revision: spec.revisionID,
  });
  if ('applicationGone' in result) return { requeueAfter: PARENT_ROW_RETRY_MS };
  if (result.created) {
    logger.info({ syncOperation: result.syncOperation.id, operation: result.operation.id }, 'sync requested');
    await deps.events.event(
      SyncRunCr.withTypeMeta(object),
      'Normal',
      SyncRunEventReason.SyncRequested,
      `Requested a sync of GitOpsDeployment ${spec.gitopsDeploymentName}${spec.revisionID ? ` to revision ${spec.revisionID}` : ''} (operation ${result.operation.id})`,
    );
  }
  await writeCondition(
    deps,
    object,
    { status: 'ok' },
    logger,
    syncRunSyncStatus(result.syncOperation, undefined),
  );
  return undefined;
}
