/**
 * GitOpsDeploymentRepositoryCredential reconciler (level-based; key `namespace/name`, object from the
 * informer cache, confirmed with a live GET when absent).
 *
 * Live CR: resolve `spec.secret` in the CR's own namespace (never another one), check its type and keys,
 * validate repository + credentials with `git ls-remote` (memoised per object: re-run when the URL or a
 * credential changes, every `revalidateIntervalMs`, and after failures with a per-object backoff), then in one
 * transaction write the row (sealed credentials), mapping and operation. A Secret that is missing or unusable
 * removes the row (announced), so Secret deletions reach Argo CD. Conditions: always the three, in order.
 * Deleted CR: its rows are deleted and announced.
 *
 * Every step is a top-level function over a `deps` object (`RepositoryCredentialSteps`: the database, client,
 * sealer, recorder, clock, the validation and its memo), so a test can drive one alone; the Secret's reading
 * is in repository-credential.secret.ts.
 */
import { RepositoryCredentialEventReason } from '@gitops/api';
import type { ApiCrMappingRow, OperationRow, RepositoryType } from '@gitops/db';
import {
  isConflict,
  type KubeCondition,
  type Logger,
  patchStatus,
  type ReconcileResult,
  type Reconciler,
} from '@gitops/shared';
import { jsonEqual } from '../json.ts';
import { BACKEND_FIELD_MANAGER, RepositoryCredentialCr, type RepositoryCredentialObject } from '../kinds.ts';
import { currentObjectReader, readLiveUid, readTenantNamespace } from '../kube-reads.ts';
import { operationsOutcome } from '../operation-outcome.ts';
import { orPlacementRefused, PLACEMENT_RECHECK_MS, PlacementRefusedError } from '../placement.ts';
import { type LiveUidRead, provenGoneOfName, readCurrent } from '../reconcile-current.ts';
import type { CredentialsReconcilerOptions } from '../reconciler-options.ts';
import { checkChartRepository } from './chart-repository-check.ts';
import { type GitCredentials, type LsRemoteOutcome, lsRemote } from './git-ls-remote.ts';
import { nextConditions, type RepositoryCredentialOutcome } from './repository-credential.conditions.ts';
import {
  credentialsOfSecret,
  fingerprintOf,
  parseRepositoryCredentialSpec,
  type RepositoryCredentialSpec,
  readSecret,
} from './repository-credential.secret.ts';
import {
  applyRepositoryCredentials,
  deleteMappedRepositoryCredentials,
  findRepositoryCredentialMappings,
} from './repository-credential.store.ts';
import { createValidationMemo, type ValidationMemo } from './validation-memo.ts';

/** Re-validation of a valid repository credential (the Git server may change its mind). */
export const DEFAULT_REVALIDATE_INTERVAL_MS = 10 * 60_000;
/** First retry after a failed validation; doubles per consecutive failure, capped at the revalidate interval. */
export const DEFAULT_FAILURE_BACKOFF_MS = 15_000;

export interface RepositoryCredentialReconcilerOptions
  extends CredentialsReconcilerOptions<RepositoryCredentialObject> {
  revalidateIntervalMs?: number;
  failureBackoffMs?: number;
  /** Replaceable for unit tests. */
  validate?: (
    url: string,
    credentials: GitCredentials,
    signal: AbortSignal,
    type: RepositoryType,
  ) => Promise<LsRemoteOutcome>;
  /** GITOPS_SSH_KNOWN_HOSTS_FILE: the SSH host keys the check trusts ('' = accept on first use). */
  sshKnownHostsFile?: string;
}

/** What the steps use: the database, client, sealer, recorder and clock, the validation and its memo. */
export interface RepositoryCredentialSteps
  extends Pick<
    RepositoryCredentialReconcilerOptions,
    'tenantClusterIdentity' | 'db' | 'kc' | 'events' | 'sealer'
  > {
  now: () => Date;
  validate: NonNullable<RepositoryCredentialReconcilerOptions['validate']>;
  memo: ValidationMemo;
  /** The uid of the RepositoryCredential `namespace/name` the API server holds now (undefined: none). */
  liveUid: LiveUidRead;
}

/** Validation through the memo: returns the outcome and when to look again. */
async function validated(
  deps: Pick<RepositoryCredentialSteps, 'memo' | 'validate'>,
  key: string,
  fingerprint: string,
  spec: RepositoryCredentialSpec,
  credentials: GitCredentials,
  signal: AbortSignal,
  logger: Logger,
): Promise<{ outcome: LsRemoteOutcome; requeueAfter: number }> {
  const result = await deps.memo.check(key, fingerprint, () =>
    deps.validate(spec.repository, credentials, signal, spec.type),
  );
  if (result.ran)
    logger.info({ result: result.outcome.result, type: spec.type }, 'repository and credentials checked');
  return result;
}

/**
 * The Event a change of the conditions is worth (pure): ErrorOccurred when the error is new or says
 * something else, ErrorOccurredResolved when it is gone, none otherwise.
 */
export function conditionsEvent(
  existing: readonly KubeCondition[],
  next: readonly KubeCondition[],
): 'error' | 'resolved' | undefined {
  const oldError = existing.find((c) => c.type === 'ErrorOccurred');
  const newError = next[0]!;
  if (newError.status === 'True' && (oldError?.status !== 'True' || oldError.message !== newError.message)) {
    return 'error';
  }
  if (newError.status === 'False' && oldError?.status === 'True') return 'resolved';
  return undefined;
}

async function writeConditions(
  deps: Pick<RepositoryCredentialSteps, 'kc' | 'events' | 'now'>,
  object: RepositoryCredentialObject,
  outcome: RepositoryCredentialOutcome,
  logger: Logger,
  operationFailure?: string,
) {
  const existing = object.status?.conditions ?? [];
  const generation = typeof object.metadata.generation === 'number' ? object.metadata.generation : undefined;
  const next = nextConditions(existing, outcome, deps.now(), generation, operationFailure);
  if (jsonEqual(next, existing)) return;
  await patchStatus(
    deps.kc,
    RepositoryCredentialCr.ref(object),
    { metadata: { resourceVersion: object.metadata.resourceVersion }, status: { conditions: next } },
    { fieldManager: BACKEND_FIELD_MANAGER },
  );
  const newError = next[0]!;
  const event = conditionsEvent(existing, next);
  if (event === 'error') {
    logger.info({ reason: newError.reason }, 'RepositoryCredential ErrorOccurred');
    await deps.events.event(
      RepositoryCredentialCr.withTypeMeta(object),
      'Warning',
      RepositoryCredentialEventReason.ErrorOccurred,
      newError.message,
    );
  } else if (event === 'resolved') {
    await deps.events.event(
      RepositoryCredentialCr.withTypeMeta(object),
      'Normal',
      RepositoryCredentialEventReason.ErrorOccurredResolved,
      'The repository credential is valid',
    );
  }
}

async function announceDeletes(
  deps: Pick<RepositoryCredentialSteps, 'events'>,
  object: RepositoryCredentialObject | undefined,
  operations: readonly OperationRow[],
) {
  if (!object) return;
  for (const operation of operations) {
    await deps.events.event(
      RepositoryCredentialCr.withTypeMeta(object),
      'Normal',
      RepositoryCredentialEventReason.RepositoryCredentialDeleted,
      `Deleted repository credentials ${operation.resource_id} from the database (operation ${operation.id})`,
    );
  }
}

/**
 * Deletes the rows of this name whose mappings are `proven` gone (or, for the CR's own rows, unusable): a
 * deletionTimestamp or a live read made after the mappings were read is the proof (`provenGone`), never a cache.
 */
async function deleteRows(
  deps: Pick<RepositoryCredentialSteps, 'db'>,
  namespace: string,
  name: string,
  proven: (mapping: ApiCrMappingRow) => boolean,
): Promise<OperationRow[]> {
  return await deps.db.transaction().execute(async (trx) => {
    await RepositoryCredentialCr.lock(trx, namespace, name);
    const mappings = await findRepositoryCredentialMappings(trx, namespace, name);
    return await deleteMappedRepositoryCredentials(trx, mappings.filter(proven));
  });
}

/**
 * The sealed row with its operation, under the CR name's lock; the namespace's label matters only when the
 * tenant is placed, i.e. for a new row. A refused placement is the answer, not an error.
 */
async function applyLocked(
  deps: RepositoryCredentialSteps,
  object: RepositoryCredentialObject,
  spec: RepositoryCredentialSpec,
  credentials: Parameters<typeof applyRepositoryCredentials>[2]['credentials'],
  signal: AbortSignal,
) {
  const { namespace = '', name, uid = '' } = object.metadata;
  const mappings = await findRepositoryCredentialMappings(deps.db, namespace, name);
  const ownNamespaceUid = mappings.find((m) => m.cr_uid === uid)?.cr_namespace_uid;
  const tenant = ownNamespaceUid
    ? { uid: ownNamespaceUid, engineInstance: undefined }
    : await readTenantNamespace(deps.kc, namespace, signal);
  return await orPlacementRefused(
    deps.db.transaction().execute(async (trx) => {
      await RepositoryCredentialCr.lock(trx, namespace, name);
      return await applyRepositoryCredentials(trx, deps.sealer, {
        cr: { namespace, name, uid },
        namespaceUid: tenant.uid,
        requestedEngineInstance: tenant.engineInstance,
        tenantClusterIdentity: deps.tenantClusterIdentity?.(),
        repositoryUrl: spec.repository,
        repositoryType: spec.type,
        secretName: spec.secret,
        credentials,
      });
    }),
  );
}

/** Created or updated credentials: said in the log and in a Normal Event on the CR. */
async function announceChange(
  deps: Pick<RepositoryCredentialSteps, 'events'>,
  object: RepositoryCredentialObject,
  result: Exclude<Awaited<ReturnType<typeof applyLocked>>, PlacementRefusedError>,
  logger: Logger,
) {
  if (result.change === 'none') return;
  logger.info(
    { repositoryCredentials: result.row.id, operation: result.operation.id, change: result.change },
    `repository credentials ${result.change}`,
  );
  const created = result.change === 'created';
  await deps.events.event(
    RepositoryCredentialCr.withTypeMeta(object),
    'Normal',
    created
      ? RepositoryCredentialEventReason.RepositoryCredentialCreated
      : RepositoryCredentialEventReason.RepositoryCredentialUpdated,
    `${created ? 'Created' : 'Updated'} repository credentials ${result.row.id} in the database (operation ${result.operation.id})`,
  );
}

/** What a validation says of the repository and its credentials, as the conditions' outcome (pure). */
export function outcomeOfCheck(
  check: LsRemoteOutcome,
  spec: RepositoryCredentialSpec,
): RepositoryCredentialOutcome {
  return check.result === 'valid'
    ? { kind: 'valid', repository: spec.repository }
    : check.result === 'invalidCredentials'
      ? { kind: 'invalidCredentials', repository: spec.repository, secret: spec.secret }
      : { kind: 'invalidRepositoryUrl', repository: spec.repository, detail: check.detail };
}

/** A Secret that is missing or unusable: the memo forgets the CR, its rows go (announced), the conditions say why. */
async function unusable(
  deps: RepositoryCredentialSteps,
  key: string,
  object: RepositoryCredentialObject,
  outcome: RepositoryCredentialOutcome,
  logger: Logger,
) {
  const { namespace = '', name, uid } = object.metadata;
  deps.memo.forget(key);
  await announceDeletes(deps, object, await deleteRows(deps, namespace, name, (m) => m.cr_uid === uid));
  await writeConditions(deps, object, outcome, logger);
}

/** A live CR: its Secret, the validation, the row, and the conditions (with a Failed operation's message). */
export async function reconcileLive(
  deps: RepositoryCredentialSteps,
  key: string,
  object: RepositoryCredentialObject,
  signal: AbortSignal,
  logger: Logger,
): Promise<ReconcileResult | undefined> {
  const { namespace = '', name, uid = '' } = object.metadata;
  const spec = parseRepositoryCredentialSpec(object.spec);
  // Rows of earlier incarnations go once a live read proves them gone; when it finds another uid than this one,
  // this replica's cache is behind: the event that brings it up to date reconciles.
  const others = await provenGoneOfName(
    deps,
    findRepositoryCredentialMappings,
    { namespace, name },
    signal,
    uid,
  );
  if (others.mappings.length > 0 && others.liveUid !== uid) {
    logger.info('RepositoryCredential not reconciled: this replica has not seen its change yet');
    return undefined;
  }
  if (others.gone.size > 0)
    await announceDeletes(
      deps,
      object,
      await deleteRows(deps, namespace, name, (m) => others.gone.has(m.id)),
    );

  if (spec.secret === '')
    return void (await unusable(deps, key, object, { kind: 'secretNotSpecified' }, logger));
  // References resolve in the CR's own namespace only.
  const secret = await readSecret(deps, namespace, spec.secret, signal);
  if (secret === undefined)
    return void (await unusable(deps, key, object, { kind: 'secretNotFound', secret: spec.secret }, logger));
  const read = credentialsOfSecret(spec.secret, secret, spec.type);
  if (!read.ok) return void (await unusable(deps, key, object, read.outcome, logger));

  const fingerprint = fingerprintOf(uid, spec.repository, spec.type, read.credentials);
  const { outcome: check, requeueAfter } = await validated(
    deps,
    key,
    fingerprint,
    spec,
    read.credentials,
    signal,
    logger,
  );

  const result = await applyLocked(deps, object, spec, read.credentials, signal);
  if (result instanceof PlacementRefusedError) {
    logger.warn({ refusal: result.refusal }, 'the tenant has no engine instance');
    await writeConditions(deps, object, { kind: 'error', message: result.message }, logger);
    // The instance may be registered or uncordoned, or the label fixed, without any event of ours.
    return { requeueAfter: PLACEMENT_RECHECK_MS };
  }
  await announceChange(deps, object, result, logger);

  const outcome = outcomeOfCheck(check, spec);
  // A Failed operation (e.g. the agent cannot decrypt) is reported until a later one completes.
  const { pending, lastFinished } = await operationsOutcome(
    deps.db,
    RepositoryCredentialCr,
    uid,
    result.row.id,
  );
  const failure = !pending && lastFinished?.state === 'Failed' ? lastFinished.message : undefined;
  await writeConditions(deps, object, outcome, logger, failure);
  return { requeueAfter };
}

/** One reconcile of `object` (undefined: gone) named `namespace/name` (`key`). */
export async function reconcileRepositoryCredential(
  deps: RepositoryCredentialSteps,
  key: string,
  namespace: string,
  name: string,
  object: RepositoryCredentialObject | undefined,
  { logger, signal }: { logger: Logger; signal: AbortSignal },
): Promise<ReconcileResult | undefined> {
  try {
    if (!object || object.metadata.deletionTimestamp) {
      deps.memo.forget(key);
      // Being deleted: its own rows (the deletionTimestamp is no proof about another uid of the name). Gone: those
      // a live read proves gone.
      const own = object?.metadata.uid;
      const gone = own
        ? undefined
        : (await provenGoneOfName(deps, findRepositoryCredentialMappings, { namespace, name }, signal)).gone;
      const deleted = await deleteRows(deps, namespace, name, (m) =>
        gone ? gone.has(m.id) : m.cr_uid === own,
      );
      for (const operation of deleted) {
        logger.info(
          { repositoryCredentials: operation.resource_id, operation: operation.id },
          'repository credentials deleted: the RepositoryCredential is gone',
        );
      }
      return;
    }
    return await reconcileLive(deps, key, object, signal, logger);
  } catch (err) {
    if (object && !isConflict(err) && !signal.aborted) {
      await writeConditions(
        deps,
        object,
        { kind: 'error', message: 'an unknown error occurred' },
        logger,
      ).catch((statusErr: unknown) =>
        logger.warn({ err: statusErr }, 'could not report the error in the conditions'),
      );
    }
    throw err;
  }
}

export function createRepositoryCredentialReconciler(
  options: RepositoryCredentialReconcilerOptions,
): Reconciler {
  const deps: RepositoryCredentialSteps = {
    tenantClusterIdentity: options.tenantClusterIdentity,
    db: options.db,
    kc: options.kc,
    events: options.events,
    sealer: options.sealer,
    now: options.now ?? (() => new Date()),
    liveUid: (namespace, name, signal) =>
      readLiveUid(options.kc, RepositoryCredentialCr, { namespace, name }, signal),
    validate:
      options.validate ??
      ((url: string, credentials: GitCredentials, signal: AbortSignal, type: RepositoryType) =>
        type === 'git'
          ? lsRemote(url, credentials, { signal, sshKnownHostsFile: options.sshKnownHostsFile })
          : checkChartRepository(type, url, credentials, { signal })),
    memo: createValidationMemo({
      revalidateMs: options.revalidateIntervalMs ?? DEFAULT_REVALIDATE_INTERVAL_MS,
      failureBackoffMs: options.failureBackoffMs ?? DEFAULT_FAILURE_BACKOFF_MS,
    }),
  };
  const currentObject = currentObjectReader(
    options.kc,
    options.informer,
    RepositoryCredentialCr,
    options.selector,
  );
  return async (key, context) => {
    const current = await readCurrent(currentObject, key, context.signal);
    if (!current) return;
    return await reconcileRepositoryCredential(
      deps,
      key,
      current.namespace,
      current.name,
      current.object,
      context,
    );
  };
}
