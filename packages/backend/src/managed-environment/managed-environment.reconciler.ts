/**
 * GitOpsDeploymentManagedEnvironment reconciler (level-based, key `namespace/name`): runs the ordered
 * checks of docs/api.md, writes the rows (one transaction with the announcing operation) when the connection
 * works, and reports the single condition ConnectionInitializationSucceeded (observedGeneration;
 * lastTransitionTime only when status, reason or message change). A deleted CR loses its rows; the
 * applications that used it are announced so the agent renders an empty destination.
 * With createNewServiceAccount the backend keeps a finalizer on the CR to remove the ServiceAccount,
 * ClusterRole and ClusterRoleBinding it created on the target cluster.
 *
 * Every step is a top-level function over a `deps` object (`ManagedEnvironmentSteps`: the database, client,
 * sealer, recorder, clock and the failures already reported), so a test can drive one alone; the connection's
 * steps are in managed-environment.connect.ts, the delete's in managed-environment.delete.ts.
 */
import {
  ConditionStatus,
  ManagedEnvironmentConditionType,
  ManagedEnvironmentEventReason,
  ManagedEnvironmentReason,
} from '@gitops/api';
import {
  findCondition,
  isConflict,
  type KubeCondition,
  type Logger,
  patchStatus,
  type ReconcileContext,
  type Reconciler,
  setKubeCondition,
} from '@gitops/shared';
import { jsonEqual } from '../json.ts';
import { BACKEND_FIELD_MANAGER, ManagedEnvironmentCr, type ManagedEnvironmentObject } from '../kinds.ts';
import { currentObjectReader, readLiveUid, readTenantNamespace } from '../kube-reads.ts';
import { operationsOutcome, reannounceFailedOperation, retryDueIn } from '../operation-outcome.ts';
import { orPlacementRefused, PlacementRefusedError } from '../placement.ts';
import { type LiveUidRead, provenGoneOfName, readCurrent } from '../reconcile-current.ts';
import type { CredentialsReconcilerOptions } from '../reconciler-options.ts';
import {
  type ManagedEnvironmentSpec,
  parseManagedEnvironmentSpec,
  readTargetCluster,
  type TargetCluster,
} from './connection.check.ts';
import { connect, environmentEvent, getSecret, isNewSecret } from './managed-environment.connect.ts';
import { deleteRows, reconcileDeleting } from './managed-environment.delete.ts';
import { applyEnvironment, findEnvironmentMappings } from './managed-environment.store.ts';

/** How often a ManagedEnvironment's connection is checked again (credentials expire, clusters go away). */
export const RECHECK_INTERVAL_MS = 3 * 60_000;
/** Sooner while it fails (the user is probably fixing it; the Secret watch catches most fixes anyway). */
export const RECHECK_FAILED_INTERVAL_MS = 30_000;

export interface ManagedEnvironmentReconcilerOptions
  extends CredentialsReconcilerOptions<ManagedEnvironmentObject> {
  /** After the agent's operation Failed, it is announced again this long after (GITOPS_OPERATION_RETRY_INTERVAL). */
  operationRetryMs?: number;
  /** Called after the rows of an environment changed (re-enqueue the GitOpsDeployments of that namespace). */
  onEnvironmentChanged?: (namespace: string) => void;
}

/** What the steps use: the database, client, sealer, recorder and clock, and the failures already reported. */
export interface ManagedEnvironmentSteps
  extends Pick<
    ManagedEnvironmentReconcilerOptions,
    'tenantClusterIdentity' | 'db' | 'kc' | 'sealer' | 'events' | 'onEnvironmentChanged'
  > {
  now: () => Date;
  /** After the agent's operation Failed, it is announced again this long after. */
  agentRetryAfterMs: number;
  /** Failed agent operations already reported as an Event (one Event per failure). */
  reportedFailures: Set<string>;
  /** The uid of the ManagedEnvironment `namespace/name` the API server holds now (undefined: none). */
  liveUid: LiveUidRead;
}

interface ConditionInput {
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/**
 * The conditions with `input` as ConnectionInitializationSucceeded (pure): undefined when nothing changes;
 * `same` when status, reason and message stay (a new observedGeneration only: no Event).
 */
export function conditionChange(
  conditions: KubeCondition[],
  input: ConditionInput,
  generation: number | undefined,
  now: Date,
): { next: KubeCondition[]; same: boolean } | undefined {
  const type = ManagedEnvironmentConditionType.ConnectionInitializationSucceeded;
  const existing = findCondition(conditions, type);
  const same =
    existing !== undefined &&
    existing.status === input.status &&
    (existing.reason ?? '') === input.reason &&
    (existing.message ?? '') === input.message;
  const next = setKubeCondition(conditions, { type, ...input, observedGeneration: generation }, now);
  if (jsonEqual(next, conditions)) return undefined;
  return { next, same };
}

/** Writes the condition when it differs; Events on transitions. Never contains a token. */
async function writeCondition(
  deps: Pick<ManagedEnvironmentSteps, 'kc' | 'events' | 'now'>,
  object: ManagedEnvironmentObject,
  input: ConditionInput,
  logger: Logger,
) {
  const change = conditionChange(
    object.status?.conditions ?? [],
    input,
    object.metadata.generation,
    deps.now(),
  );
  if (!change) return;
  await patchStatus(
    deps.kc,
    ManagedEnvironmentCr.ref(object),
    { metadata: { resourceVersion: object.metadata.resourceVersion }, status: { conditions: change.next } },
    { fieldManager: BACKEND_FIELD_MANAGER },
  );
  if (change.same) return;
  if (input.status === ConditionStatus.True) {
    await environmentEvent(
      deps,
      object,
      'Normal',
      ManagedEnvironmentEventReason.ConnectionSucceeded,
      'Connection to the cluster succeeded',
    );
  } else {
    logger.info({ reason: input.reason, message: input.message }, 'ManagedEnvironment connection failed');
    await environmentEvent(
      deps,
      object,
      'Warning',
      ManagedEnvironmentEventReason.ConnectionFailed,
      `${input.reason}: ${input.message}`,
    );
  }
}

/** A failed check: the condition False, looked at again in RECHECK_FAILED_INTERVAL_MS. */
async function failed(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  reason: string,
  message: string,
  logger: Logger,
) {
  // This incarnation's rows are kept (Argo CD keeps the last working credentials, a transient network
  // failure does not tear deployments down); GitOpsDeployments check the condition. Rows of earlier
  // incarnations with the same name went first (reconcileLive).
  // GitOpsDeployments learn about the condition from the controller's cache events.
  await writeCondition(deps, object, { status: ConditionStatus.False, reason, message }, logger);
  return { requeueAfter: RECHECK_FAILED_INTERVAL_MS };
}

/**
 * The rows of a working connection, in one transaction with the announcing operation (rows of earlier
 * incarnations went before, on a live read's proof: reconcileLive); a refused placement is the answer, not an
 * error.
 */
async function applyRows(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  spec: ManagedEnvironmentSpec,
  target: TargetCluster,
  bearerToken: string,
  signal: AbortSignal,
) {
  const { namespace = '', name, uid = '' } = object.metadata;
  const tenant = await readTenantNamespace(deps.kc, namespace, signal);
  return await orPlacementRefused(
    deps.db.transaction().execute(async (trx) => {
      await ManagedEnvironmentCr.lock(trx, namespace, name);
      return await applyEnvironment(trx, deps.sealer, {
        environment: { namespace, name, uid },
        namespaceUid: tenant.uid,
        requestedEngineInstance: tenant.engineInstance,
        tenantClusterIdentity: deps.tenantClusterIdentity?.(),
        credentials: {
          apiUrl: spec.apiURL,
          bearerToken,
          allowInsecureSkipTlsVerify: spec.allowInsecureSkipTLSVerify,
          namespaces: spec.namespaces,
          clusterResources: spec.clusterResources,
          // Argo CD must trust what the connection check trusted (nothing to pass when it is skipped).
          caData: spec.allowInsecureSkipTLSVerify ? undefined : target.caData || undefined,
        },
      });
    }),
  );
}

/** Created or updated rows: said in the log and in a Normal Event on the CR; the namespace's users told. */
async function announceChange(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  result: Exclude<Awaited<ReturnType<typeof applyRows>>, PlacementRefusedError>,
  logger: Logger,
) {
  if (result.change === 'none') return;
  logger.info(
    { environment: result.environmentId, operation: result.operationId, change: result.change },
    `managed environment ${result.change}`,
  );
  await environmentEvent(
    deps,
    object,
    'Normal',
    ManagedEnvironmentEventReason.EnvironmentUpdated,
    `${result.change === 'created' ? 'Created' : 'Updated'} managed environment ${result.environmentId} in the database (operation ${result.operationId})`,
  );
  deps.onEnvironmentChanged?.(object.metadata.namespace ?? '');
}

/** A live CR: the ordered checks, the rows when the connection works, the condition, the agent's outcome. */
export async function reconcileLive(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  context: ReconcileContext,
) {
  const { logger, signal } = context;
  const { namespace = '', name, uid = '' } = object.metadata;
  // Rows of earlier incarnations go once a live read proves them gone; when it finds another uid than this one,
  // this replica's cache is behind: the event that brings it up to date reconciles.
  const others = await provenGoneOfName(deps, findEnvironmentMappings, { namespace, name }, signal, uid);
  if (others.mappings.length > 0 && others.liveUid !== uid) {
    logger.info('ManagedEnvironment not reconciled: this replica has not seen its change yet');
    return undefined;
  }
  if (others.gone.size > 0) await deleteRows(deps, namespace, name, (m) => others.gone.has(m.id), logger);
  const parsed = parseManagedEnvironmentSpec(object.spec);
  if (!parsed.ok) return await failed(deps, object, parsed.reason, parsed.message, logger);
  const spec = parsed.value;
  const secret = await getSecret(deps, namespace, spec.credentialsSecret, signal);
  const target = readTargetCluster(secret, spec);
  if (!target.ok) return await failed(deps, object, target.reason, target.message, logger);
  const secretIsNew = isNewSecret(secret, Date.now());
  const token = await connect(deps, object, spec, target.value, signal, secretIsNew);
  if (!token.ok) return await failed(deps, object, token.reason, token.message, logger);

  const applied = await applyRows(deps, object, spec, target.value, token.value, signal);
  if (applied instanceof PlacementRefusedError) {
    logger.warn({ refusal: applied.refusal }, 'the tenant has no engine instance');
    return await failed(deps, object, ManagedEnvironmentReason.NoEngineInstance, applied.message, logger);
  }
  await announceChange(deps, object, applied, logger);
  await writeCondition(
    deps,
    object,
    { status: ConditionStatus.True, reason: ManagedEnvironmentReason.Succeeded, message: '' },
    logger,
  );
  const retryAfter = await reportAgentFailure(deps, object, uid, applied.environmentId, logger);
  return { requeueAfter: Math.min(RECHECK_INTERVAL_MS, retryAfter ?? RECHECK_INTERVAL_MS) };
}

/**
 * The connection works, but the agent may have failed to give it to Argo CD (e.g. it cannot unseal the
 * token with its keys). The condition is about the connection (one, docs/api.md), so the failure
 * is a Warning Event on the CR, once per failed operation; and the environment is announced again
 * `operationRetryMs` after the failure, so it reaches Argo CD once the cause is fixed.
 * Returns how long to wait before looking again when a retry is due later.
 */
export async function reportAgentFailure(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  uid: string,
  environmentId: string,
  logger: Logger,
): Promise<number | undefined> {
  const outcome = await operationsOutcome(deps.db, ManagedEnvironmentCr, uid, environmentId);
  const failed = outcome.lastFinished;
  if (outcome.pending || failed?.state !== 'Failed') return undefined;
  const { reportedFailures } = deps;
  if (!reportedFailures.has(failed.id)) {
    reportedFailures.add(failed.id);
    if (reportedFailures.size > 10_000) reportedFailures.clear();
    logger.warn(
      { operation: failed.id, environment: environmentId },
      'the agent failed to apply the environment',
    );
    await environmentEvent(
      deps,
      object,
      'Warning',
      ManagedEnvironmentEventReason.AgentOperationFailed,
      `The cluster-agent could not give this environment to Argo CD: ${failed.message || 'the operation failed'}. It is retried.`,
    );
  }
  const dueIn = retryDueIn(failed, deps.agentRetryAfterMs, deps.now());
  if (dueIn > 0) return dueIn;
  const { operation } = await deps.db.transaction().execute(async (trx) => {
    await ManagedEnvironmentCr.lock(trx, object.metadata.namespace ?? '', object.metadata.name);
    return await reannounceFailedOperation(trx, failed);
  });
  logger.info(
    { operation: operation.id, failedOperation: failed.id },
    'environment announced to the agent again',
  );
  return undefined;
}

/** One reconcile of `object` (undefined: gone) named `namespace/name`. */
export async function reconcileManagedEnvironment(
  deps: ManagedEnvironmentSteps,
  namespace: string,
  name: string,
  object: ManagedEnvironmentObject | undefined,
  context: ReconcileContext,
) {
  try {
    if (!object) {
      const { gone } = await provenGoneOfName(
        deps,
        findEnvironmentMappings,
        { namespace, name },
        context.signal,
      );
      if (gone.size > 0) await deleteRows(deps, namespace, name, (m) => gone.has(m.id), context.logger);
      return;
    }
    if (object.metadata.deletionTimestamp) {
      await reconcileDeleting(deps, object, context);
      return;
    }
    return await reconcileLive(deps, object, context);
  } catch (err) {
    if (object && !isConflict(err) && !context.signal.aborted) {
      await writeCondition(
        deps,
        object,
        {
          status: ConditionStatus.Unknown,
          reason: ManagedEnvironmentReason.UnknownError,
          message: 'an internal error occurred while reconciling the ManagedEnvironment; it is retried',
        },
        context.logger,
      ).catch(() => undefined);
    }
    throw err;
  }
}

export function createManagedEnvironmentReconciler(options: ManagedEnvironmentReconcilerOptions): Reconciler {
  const deps: ManagedEnvironmentSteps = {
    tenantClusterIdentity: options.tenantClusterIdentity,
    db: options.db,
    kc: options.kc,
    sealer: options.sealer,
    events: options.events,
    onEnvironmentChanged: options.onEnvironmentChanged,
    now: options.now ?? (() => new Date()),
    agentRetryAfterMs: options.operationRetryMs ?? 60_000,
    reportedFailures: new Set<string>(),
    liveUid: (namespace, name, signal) =>
      readLiveUid(options.kc, ManagedEnvironmentCr, { namespace, name }, signal),
  };
  const currentObject = currentObjectReader(
    options.kc,
    options.informer,
    ManagedEnvironmentCr,
    options.selector,
  );
  return async (key, context) => {
    const current = await readCurrent(currentObject, key, context.signal);
    if (!current) return;
    return await reconcileManagedEnvironment(deps, current.namespace, current.name, current.object, context);
  };
}
