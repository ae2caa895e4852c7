/**
 * GitOpsDeploymentManagedEnvironment reconciler (level-based, key `namespace/name`): runs the ordered
 * checks of docs/api.md, writes the rows (one transaction with the announcing operation) when the connection
 * works, and reports the single condition ConnectionInitializationSucceeded (observedGeneration;
 * lastTransitionTime only when status, reason or message change). A deleted CR loses its rows; the
 * applications that used it are announced so the agent renders an empty destination.
 * With createNewServiceAccount the backend keeps a finalizer on the CR to remove the ServiceAccount,
 * ClusterRole and ClusterRoleBinding it created on the target cluster.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ConditionStatus,
  ManagedEnvironmentConditionType,
  ManagedEnvironmentEventReason,
  ManagedEnvironmentReason,
} from '@gitops/api';
import type { Database, Sealer } from '@gitops/db';
import {
  type EventRecorder,
  findCondition,
  HttpMethod,
  type Informer,
  isConflict,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  mergePatch,
  patchStatus,
  type ReconcileContext,
  type Reconciler,
  setKubeCondition,
  splitObjectKey,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { isJsonObject, jsonEqual } from '../json.ts';
import { BACKEND_FIELD_MANAGER, ManagedEnvironmentCr, type ManagedEnvironmentObject } from '../kinds.ts';
import { currentObjectReader, readTenantNamespace } from '../kube-reads.ts';
import type { LabelSelector } from '../label-selector.ts';
import { operationsOutcome, reannounceFailedOperation, retryDueIn } from '../operation-outcome.ts';
import { PlacementRefusedError } from '../placement.ts';
import {
  type CheckOutcome,
  classifyConnectionError,
  type ManagedEnvironmentSpec,
  parseManagedEnvironmentSpec,
  readTargetCluster,
  type TargetCluster,
  targetKubeConfig,
  verifyCredentials,
} from './connection.check.ts';
import {
  applyEnvironment,
  deleteMappedEnvironments,
  findEnvironmentMappings,
  storedBearerToken,
} from './managed-environment.store.ts';
import { installServiceAccount, removeServiceAccount } from './service-account.ts';

/** Re-tries of a just-created ServiceAccount token that the cluster refused (250 ms, 500 ms, ... 1.5 s). */
const NEW_TOKEN_RETRIES = 6;
const NEW_TOKEN_RETRY_MS = 250;
/** A credentials Secret this young gets the same re-tries. */
const NEW_SECRET_MS = 60_000;

/** Kept on a CR with createNewServiceAccount until the created ServiceAccount is removed again. */
export const SERVICE_ACCOUNT_FINALIZER = 'managed-gitops.redhat.com/managed-environment-service-account';

/** How often a ManagedEnvironment's connection is checked again (credentials expire, clusters go away). */
export const RECHECK_INTERVAL_MS = 3 * 60_000;
/** Sooner while it fails (the user is probably fixing it; the Secret watch catches most fixes anyway). */
export const RECHECK_FAILED_INTERVAL_MS = 30_000;

export interface ManagedEnvironmentReconcilerOptions {
  /** The cluster tenants' namespaces live on (the backend's own; read after start): placement stays on it. */
  tenantClusterIdentity?: () => string;
  db: Kysely<Database>;
  kc: KubeConfig;
  sealer: Sealer;
  informer: Informer<ManagedEnvironmentObject>;
  events: EventRecorder;
  /** After the agent's operation Failed, it is announced again this long after (GITOPS_OPERATION_RETRY_INTERVAL). */
  operationRetryMs?: number;
  selector?: LabelSelector;
  /** Called after the rows of an environment changed (re-enqueue the GitOpsDeployments of that namespace). */
  onEnvironmentChanged?: (namespace: string) => void;
  now?: () => Date;
}

interface ConditionInput {
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export function createManagedEnvironmentReconciler(options: ManagedEnvironmentReconcilerOptions): Reconciler {
  const { db, kc, sealer, informer, events } = options;
  const now = options.now ?? (() => new Date());
  /** Failed agent operations already reported as an Event (one Event per failure). */
  const reportedFailures = new Set<string>();
  const AGENT_RETRY_AFTER_MS = options.operationRetryMs ?? 60_000;

  const currentObject = currentObjectReader(kc, informer, ManagedEnvironmentCr, options.selector);

  async function getSecret(
    namespace: string,
    name: string,
    signal: AbortSignal,
  ): Promise<KubeObject | undefined> {
    if (name === '') return undefined;
    try {
      const secret = await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
        signal,
      });
      return isJsonObject(secret) ? (secret as unknown as KubeObject) : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Writes the condition when it differs; Events on transitions. Never contains a token. */
  async function writeCondition(object: ManagedEnvironmentObject, input: ConditionInput, logger: Logger) {
    const conditions = object.status?.conditions ?? [];
    const type = ManagedEnvironmentConditionType.ConnectionInitializationSucceeded;
    const existing = findCondition(conditions, type);
    const same =
      existing !== undefined &&
      existing.status === input.status &&
      (existing.reason ?? '') === input.reason &&
      (existing.message ?? '') === input.message;
    const next = setKubeCondition(
      conditions,
      { type, ...input, observedGeneration: object.metadata.generation },
      now(),
    );
    if (jsonEqual(next, conditions)) return;
    await patchStatus(
      kc,
      ManagedEnvironmentCr.ref(object),
      { metadata: { resourceVersion: object.metadata.resourceVersion }, status: { conditions: next } },
      { fieldManager: BACKEND_FIELD_MANAGER },
    );
    if (same) return;
    if (input.status === ConditionStatus.True) {
      await events.event(
        ManagedEnvironmentCr.withTypeMeta(object),
        'Normal',
        ManagedEnvironmentEventReason.ConnectionSucceeded,
        'Connection to the cluster succeeded',
      );
    } else {
      logger.info({ reason: input.reason, message: input.message }, 'ManagedEnvironment connection failed');
      await events.event(
        ManagedEnvironmentCr.withTypeMeta(object),
        'Warning',
        ManagedEnvironmentEventReason.ConnectionFailed,
        `${input.reason}: ${input.message}`,
      );
    }
  }

  async function patchFinalizers(object: ManagedEnvironmentObject, finalizers: string[]) {
    try {
      await mergePatch(
        kc,
        ManagedEnvironmentCr.ref(object),
        { metadata: { finalizers, resourceVersion: object.metadata.resourceVersion } },
        { fieldManager: BACKEND_FIELD_MANAGER },
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async function deleteRows(namespace: string, name: string, logger: Logger, exceptUid?: string) {
    const deleted = await db.transaction().execute(async (trx) => {
      await ManagedEnvironmentCr.lock(trx, namespace, name);
      const mappings = (await findEnvironmentMappings(trx, namespace, name)).filter(
        (m) => m.cr_uid !== exceptUid,
      );
      return await deleteMappedEnvironments(trx, mappings);
    });
    for (const d of deleted) {
      logger.info(
        { environment: d.environmentId, applications: d.affectedApplicationIds.length },
        'managed environment deleted from the database',
      );
    }
    if (deleted.length > 0) options.onEnvironmentChanged?.(namespace);
    return deleted;
  }

  /** The ServiceAccount we created is removed with the user's credentials (or, failing that, its own token). */
  async function reconcileDeleting(object: ManagedEnvironmentObject, context: ReconcileContext) {
    const { namespace = '', name, uid = '' } = object.metadata;
    const finalizers = object.metadata.finalizers ?? [];
    if (finalizers.includes(SERVICE_ACCOUNT_FINALIZER)) {
      const parsed = parseManagedEnvironmentSpec(object.spec);
      let removed = false;
      let problem = 'the credentials are not available';
      if (parsed.ok) {
        const target = readTargetCluster(
          await getSecret(namespace, parsed.value.credentialsSecret, context.signal),
          parsed.value,
        );
        const stored = await storedBearerToken(db, sealer, uid);
        const attempts: { target: TargetCluster; token: string }[] = [];
        if (target.ok) attempts.push({ target: target.value, token: target.value.token });
        if (stored) {
          attempts.push({
            target: target.ok
              ? target.value
              : { server: stored.apiUrl, caData: undefined, token: stored.token },
            token: stored.token,
          });
        }
        for (const attempt of attempts) {
          try {
            await removeServiceAccount(
              targetKubeConfig(attempt.target, attempt.token, parsed.value.allowInsecureSkipTLSVerify),
              uid,
              context.signal,
            );
            removed = true;
            break;
          } catch (err) {
            if (context.signal.aborted) throw err;
            problem = classifyConnectionError(err, parsed.value.apiURL).message;
          }
        }
      }
      if (removed) {
        await events.event(
          ManagedEnvironmentCr.withTypeMeta(object),
          'Normal',
          ManagedEnvironmentEventReason.ServiceAccountRemoved,
          'Removed the ServiceAccount, ClusterRole and ClusterRoleBinding created on the cluster',
        );
      } else {
        // Never block the delete forever: say what is left behind.
        context.logger.warn({ problem }, 'could not remove the created ServiceAccount');
        await events.event(
          ManagedEnvironmentCr.withTypeMeta(object),
          'Warning',
          ManagedEnvironmentEventReason.ServiceAccountRemovalFailed,
          `Could not remove the ServiceAccount argocd-manager-${uid} (and its ClusterRole/Binding) from the cluster: ${problem}`,
        );
      }
    }
    await deleteRows(namespace, name, context.logger);
    if (finalizers.includes(SERVICE_ACCOUNT_FINALIZER)) {
      await patchFinalizers(
        object,
        finalizers.filter((f) => f !== SERVICE_ACCOUNT_FINALIZER),
      );
    }
  }

  /** Steps 2 and 3: the token to use (ours when createNewServiceAccount), verified by a real request. */
  async function connect(
    object: ManagedEnvironmentObject,
    spec: ManagedEnvironmentSpec,
    target: TargetCluster,
    signal: AbortSignal,
    secretIsNew = false,
  ): Promise<CheckOutcome<string>> {
    const insecure = spec.allowInsecureSkipTLSVerify;
    if (!spec.createNewServiceAccount) {
      const kc = targetKubeConfig(target, target.token, insecure);
      // A credentials Secret written a moment ago (e.g. by the namespace provisioner, right after its
      // RoleBinding) gets the same grace as a token of our own.
      const verified = secretIsNew
        ? await verifyNewCredentials(kc, spec, signal)
        : await verifyCredentials(kc, spec, signal);
      return verified.ok ? { ok: true, value: target.token } : verified;
    }
    const uid = object.metadata.uid ?? '';
    // Reuse the token we already hold while it works: a new token on every check would rewrite Argo CD.
    const stored = await storedBearerToken(db, sealer, uid);
    if (stored && stored.apiUrl === spec.apiURL) {
      const verified = await verifyCredentials(
        targetKubeConfig(target, stored.token, insecure),
        spec,
        signal,
      );
      if (verified.ok) return { ok: true, value: stored.token };
    }
    const finalizers = object.metadata.finalizers ?? [];
    if (!finalizers.includes(SERVICE_ACCOUNT_FINALIZER)) {
      await patchFinalizers(object, [...finalizers, SERVICE_ACCOUNT_FINALIZER]);
    }
    let token: string;
    try {
      token = await installServiceAccount(targetKubeConfig(target, target.token, insecure), uid, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      const classified = classifyConnectionError(
        err,
        spec.apiURL,
        ManagedEnvironmentReason.UnableToInstallServiceAccount,
      );
      return {
        ok: false,
        reason:
          classified.reason === ManagedEnvironmentReason.UnableToValidateClusterCredentials
            ? ManagedEnvironmentReason.UnableToInstallServiceAccount
            : classified.reason,
        message: `unable to install the ServiceAccount on the cluster: ${classified.message}`,
      };
    }
    const verified = await verifyNewCredentials(targetKubeConfig(target, token, insecure), spec, signal);
    return verified.ok ? { ok: true, value: token } : verified;
  }

  /**
   * verifyCredentials for credentials created a moment ago: a token and RoleBinding may be refused until the
   * API server's authenticator and RBAC caches have them (usually well under a second), so a refusal is
   * re-tried a few times, quickly, before it becomes a False condition.
   */
  async function verifyNewCredentials(kc: KubeConfig, spec: ManagedEnvironmentSpec, signal: AbortSignal) {
    let verified = await verifyCredentials(kc, spec, signal);
    for (let attempt = 1; !verified.ok && verified.refused && attempt <= NEW_TOKEN_RETRIES; attempt++) {
      await sleep(NEW_TOKEN_RETRY_MS * attempt, undefined, { signal });
      verified = await verifyCredentials(kc, spec, signal);
    }
    return verified;
  }

  async function reconcileLive(object: ManagedEnvironmentObject, context: ReconcileContext) {
    const { logger, signal } = context;
    const { namespace = '', name, uid = '' } = object.metadata;

    const failed = async (reason: string, message: string) => {
      // This incarnation's rows are kept (Argo CD keeps the last working credentials, a transient network
      // failure does not tear deployments down); GitOpsDeployments check the condition. Rows of earlier
      // incarnations with the same name go.
      await deleteRows(namespace, name, logger, uid);
      // GitOpsDeployments learn about the condition from the controller's cache events.
      await writeCondition(object, { status: ConditionStatus.False, reason, message }, logger);
      return { requeueAfter: RECHECK_FAILED_INTERVAL_MS };
    };

    const parsed = parseManagedEnvironmentSpec(object.spec);
    if (!parsed.ok) return await failed(parsed.reason, parsed.message);
    const spec = parsed.value;
    const secret = await getSecret(namespace, spec.credentialsSecret, signal);
    const target = readTargetCluster(secret, spec);
    if (!target.ok) return await failed(target.reason, target.message);
    const createdAt = Date.parse(String(secret?.metadata.creationTimestamp ?? ''));
    const secretIsNew = Number.isFinite(createdAt) && Date.now() - createdAt < NEW_SECRET_MS;
    const token = await connect(object, spec, target.value, signal, secretIsNew);
    if (!token.ok) return await failed(token.reason, token.message);

    const tenant = await readTenantNamespace(kc, namespace, signal);
    const applied = await db
      .transaction()
      .execute(async (trx) => {
        await ManagedEnvironmentCr.lock(trx, namespace, name);
        const stale = (await findEnvironmentMappings(trx, namespace, name)).filter((m) => m.cr_uid !== uid);
        await deleteMappedEnvironments(trx, stale);
        return await applyEnvironment(trx, sealer, {
          environment: { namespace, name, uid },
          namespaceUid: tenant.uid,
          requestedEngineInstance: tenant.engineInstance,
          tenantClusterIdentity: options.tenantClusterIdentity?.(),
          credentials: {
            apiUrl: spec.apiURL,
            bearerToken: token.value,
            allowInsecureSkipTlsVerify: spec.allowInsecureSkipTLSVerify,
            namespaces: spec.namespaces,
            clusterResources: spec.clusterResources,
            // Argo CD must trust what the connection check trusted (nothing to pass when it is skipped).
            caData: spec.allowInsecureSkipTLSVerify ? undefined : target.value.caData || undefined,
          },
        });
      })
      .catch((err: unknown) => {
        if (err instanceof PlacementRefusedError) return err;
        throw err;
      });
    if (applied instanceof PlacementRefusedError) {
      logger.warn({ refusal: applied.refusal }, 'the tenant has no engine instance');
      return await failed(ManagedEnvironmentReason.NoEngineInstance, applied.message);
    }
    const result = applied;
    if (result.change !== 'none') {
      logger.info(
        { environment: result.environmentId, operation: result.operationId, change: result.change },
        `managed environment ${result.change}`,
      );
      await events.event(
        ManagedEnvironmentCr.withTypeMeta(object),
        'Normal',
        ManagedEnvironmentEventReason.EnvironmentUpdated,
        `${result.change === 'created' ? 'Created' : 'Updated'} managed environment ${result.environmentId} in the database (operation ${result.operationId})`,
      );
      options.onEnvironmentChanged?.(namespace);
    }
    await writeCondition(
      object,
      { status: ConditionStatus.True, reason: ManagedEnvironmentReason.Succeeded, message: '' },
      logger,
    );
    const retryAfter = await reportAgentFailure(object, uid, result.environmentId, logger);
    return { requeueAfter: Math.min(RECHECK_INTERVAL_MS, retryAfter ?? RECHECK_INTERVAL_MS) };
  }

  /**
   * The connection works, but the agent may have failed to give it to Argo CD (e.g. it cannot unseal the
   * token with its keys). The condition is about the connection (one, docs/api.md), so the failure
   * is a Warning Event on the CR, once per failed operation; and the environment is announced again
   * `operationRetryMs` after the failure, so it reaches Argo CD once the cause is fixed.
   * Returns how long to wait before looking again when a retry is due later.
   */
  async function reportAgentFailure(
    object: ManagedEnvironmentObject,
    uid: string,
    environmentId: string,
    logger: Logger,
  ): Promise<number | undefined> {
    const outcome = await operationsOutcome(
      db,
      { kind: ManagedEnvironmentCr.kind, uid },
      'ManagedEnvironment',
      environmentId,
    );
    const failed = outcome.lastFinished;
    if (outcome.pending || failed?.state !== 'Failed') return undefined;
    if (!reportedFailures.has(failed.id)) {
      reportedFailures.add(failed.id);
      if (reportedFailures.size > 10_000) reportedFailures.clear();
      logger.warn(
        { operation: failed.id, environment: environmentId },
        'the agent failed to apply the environment',
      );
      await events.event(
        ManagedEnvironmentCr.withTypeMeta(object),
        'Warning',
        ManagedEnvironmentEventReason.AgentOperationFailed,
        `The cluster-agent could not give this environment to Argo CD: ${failed.message || 'the operation failed'}. It is retried.`,
      );
    }
    const dueIn = retryDueIn(failed, AGENT_RETRY_AFTER_MS, now());
    if (dueIn > 0) return dueIn;
    const { operation } = await db.transaction().execute(async (trx) => {
      await ManagedEnvironmentCr.lock(trx, object.metadata.namespace ?? '', object.metadata.name);
      return await reannounceFailedOperation(trx, failed);
    });
    logger.info(
      { operation: operation.id, failedOperation: failed.id },
      'environment announced to the agent again',
    );
    return undefined;
  }

  return async (key, context) => {
    const { namespace, name } = splitObjectKey(key);
    if (namespace === undefined) return;
    const object = await currentObject(namespace, name, context.signal);
    // Another shard's environment is left alone (the shard rule, kinds.ts).
    if (object === null) return;
    try {
      if (!object) {
        await deleteRows(namespace, name, context.logger);
        return;
      }
      if (object.metadata.deletionTimestamp) {
        await reconcileDeleting(object, context);
        return;
      }
      return await reconcileLive(object, context);
    } catch (err) {
      if (object && !isConflict(err) && !context.signal.aborted) {
        await writeCondition(
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
  };
}
