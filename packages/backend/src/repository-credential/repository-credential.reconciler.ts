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
 */
import { createHash } from 'node:crypto';
import type { GitOpsDeploymentRepositoryCredentialSpec } from '@gitops/api';
import { RepositoryCredentialEventReason, SecretKey, SecretType } from '@gitops/api';
import type { Database, OperationRow, RepositoryType, Sealer } from '@gitops/db';
import {
  type EventRecorder,
  HttpMethod,
  type Informer,
  isConflict,
  isNotFound,
  type KubeConfig,
  kubeRequest,
  type Logger,
  patchStatus,
  type ReconcileResult,
  type Reconciler,
  splitObjectKey,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { isJsonObject, jsonEqual } from '../json.ts';
import { BACKEND_FIELD_MANAGER, RepositoryCredentialCr, type RepositoryCredentialObject } from '../kinds.ts';
import { currentObjectReader, readTenantNamespace } from '../kube-reads.ts';
import type { LabelSelector } from '../label-selector.ts';
import { operationsOutcome } from '../operation-outcome.ts';
import { PLACEMENT_RECHECK_MS, PlacementRefusedError } from '../placement.ts';
import { checkChartRepository } from './chart-repository-check.ts';
import { type GitCredentials, type LsRemoteOutcome, lsRemote } from './git-ls-remote.ts';
import { nextConditions, type RepositoryCredentialOutcome } from './repository-credential.conditions.ts';
import {
  applyRepositoryCredentials,
  deleteMappedRepositoryCredentials,
  findRepositoryCredentialMappings,
} from './repository-credential.store.ts';
import { createValidationMemo } from './validation-memo.ts';

/** Re-validation of a valid repository credential (the Git server may change its mind). */
export const DEFAULT_REVALIDATE_INTERVAL_MS = 10 * 60_000;
/** First retry after a failed validation; doubles per consecutive failure, capped at the revalidate interval. */
export const DEFAULT_FAILURE_BACKOFF_MS = 15_000;

export interface RepositoryCredentialReconcilerOptions {
  /** The cluster tenants' namespaces live on (the backend's own; read after start): placement stays on it. */
  tenantClusterIdentity?: () => string;
  db: Kysely<Database>;
  kc: KubeConfig;
  informer: Informer<RepositoryCredentialObject>;
  events: EventRecorder;
  sealer: Sealer;
  selector?: LabelSelector;
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
  now?: () => Date;
}

/** What a RepositoryCredential asks for: spec.repository (or its alias spec.url), spec.secret, spec.type. */
export interface RepositoryCredentialSpec {
  repository: string;
  secret: string;
  /** git unless spec.type says helm or oci. */
  type: RepositoryType;
}

/** spec.repository, or its alias spec.url; the type, git by default. */
export function parseRepositoryCredentialSpec(
  spec: GitOpsDeploymentRepositoryCredentialSpec,
): RepositoryCredentialSpec {
  const type: RepositoryType = spec.type === 'helm' || spec.type === 'oci' ? spec.type : 'git';
  return { repository: spec.repository || spec.url || '', secret: spec.secret, type };
}

type SecretRead =
  | { ok: true; credentials: GitCredentials }
  | { ok: false; outcome: RepositoryCredentialOutcome };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A Secret value as text; `null` when its bytes are not UTF-8 (binary data is never a Git credential). */
function decode(value: unknown): string | undefined | null {
  if (typeof value !== 'string') return undefined;
  try {
    return utf8.decode(Buffer.from(value, 'base64'));
  } catch {
    return null;
  }
}

/** Control characters (an sshPrivateKey may have line breaks and tabs): Git, its environment and askpass refuse them. */
function hasControlCharacters(value: string, allowLineBreaks: boolean): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (allowLineBreaks && (code === 0x09 || code === 0x0a || code === 0x0d)) continue;
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** Why a credential value cannot be used, naming the key and never the value. */
function unusableValue(key: string, value: string | undefined | null, multiline = false): string | undefined {
  if (value === null) return `${key} is not UTF-8 text (binary data)`;
  if (value !== undefined && hasControlCharacters(value, multiline)) {
    return `${key} contains control characters`;
  }
  return undefined;
}

/**
 * A user Secret's credentials (pure; exported for tests). A Helm repository or an OCI registry takes a
 * username and password only (Argo CD has no SSH for them).
 */
export function credentialsOfSecret(
  secretName: string,
  secret: unknown,
  repositoryType: RepositoryType = 'git',
): SecretRead {
  const object = isJsonObject(secret) ? secret : {};
  // The API server writes `Opaque` for a Secret created without a type (as the public API document shows it).
  const type = typeof object.type === 'string' && object.type !== '' ? object.type : SecretType.Opaque;
  if (type !== SecretType.RepositoryCredential && type !== SecretType.Opaque) {
    return { ok: false, outcome: { kind: 'secretInvalidType', secret: secretName, type } };
  }
  const data = isJsonObject(object.data) ? object.data : {};
  const username = decode(data[SecretKey.Username]);
  const password = decode(data[SecretKey.Password]);
  const sshPrivateKey = decode(data[SecretKey.SshPrivateKey]);
  const problem =
    unusableValue(SecretKey.SshPrivateKey, sshPrivateKey, true) ??
    unusableValue(SecretKey.Username, username) ??
    unusableValue(SecretKey.Password, password);
  if (problem) {
    return { ok: false, outcome: { kind: 'secretInvalidContent', secret: secretName, problem } };
  }
  if (typeof sshPrivateKey === 'string' && sshPrivateKey.trim() !== '') {
    if (repositoryType !== 'git') {
      return {
        ok: false,
        outcome: {
          kind: 'secretInvalidContent',
          secret: secretName,
          problem: `a repository of type ${repositoryType} takes username and password, not sshPrivateKey`,
        },
      };
    }
    return { ok: true, credentials: { sshPrivateKey } };
  }
  if (typeof username === 'string' || typeof password === 'string') {
    if (!username || !password) {
      return {
        ok: false,
        outcome: {
          kind: 'secretInvalidContent',
          secret: secretName,
          problem: 'both username and password must be set',
        },
      };
    }
    return { ok: true, credentials: { username, password } };
  }
  return {
    ok: false,
    outcome: {
      kind: 'secretInvalidContent',
      secret: secretName,
      problem: 'it must contain username and password, or sshPrivateKey',
    },
  };
}

function fingerprintOf(uid: string, url: string, type: RepositoryType, credentials: GitCredentials): string {
  // In memory only; a hash, so the memo never holds a credential.
  return createHash('sha256')
    .update(
      JSON.stringify([uid, url, type, credentials.username, credentials.password, credentials.sshPrivateKey]),
    )
    .digest('hex');
}

export function createRepositoryCredentialReconciler(
  options: RepositoryCredentialReconcilerOptions,
): Reconciler {
  const { db, kc, informer, events, sealer } = options;
  const now = options.now ?? (() => new Date());
  const revalidateMs = options.revalidateIntervalMs ?? DEFAULT_REVALIDATE_INTERVAL_MS;
  const failureBackoffMs = options.failureBackoffMs ?? DEFAULT_FAILURE_BACKOFF_MS;
  const validate =
    options.validate ??
    ((url: string, credentials: GitCredentials, signal: AbortSignal, type: RepositoryType) =>
      type === 'git'
        ? lsRemote(url, credentials, { signal, sshKnownHostsFile: options.sshKnownHostsFile })
        : checkChartRepository(type, url, credentials, { signal }));
  const memo = createValidationMemo({ revalidateMs, failureBackoffMs });

  const currentObject = currentObjectReader(kc, informer, RepositoryCredentialCr, options.selector);

  async function readSecret(namespace: string, name: string, signal: AbortSignal): Promise<unknown> {
    try {
      return await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
        signal,
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Validation through the memo: returns the outcome and when to look again. */
  async function validated(
    key: string,
    fingerprint: string,
    spec: RepositoryCredentialSpec,
    credentials: GitCredentials,
    signal: AbortSignal,
    logger: Logger,
  ): Promise<{ outcome: LsRemoteOutcome; requeueAfter: number }> {
    const result = await memo.check(key, fingerprint, () =>
      validate(spec.repository, credentials, signal, spec.type),
    );
    if (result.ran)
      logger.info({ result: result.outcome.result, type: spec.type }, 'repository and credentials checked');
    return result;
  }

  async function writeConditions(
    object: RepositoryCredentialObject,
    outcome: RepositoryCredentialOutcome,
    logger: Logger,
    operationFailure?: string,
  ) {
    const existing = object.status?.conditions ?? [];
    const generation =
      typeof object.metadata.generation === 'number' ? object.metadata.generation : undefined;
    const next = nextConditions(existing, outcome, now(), generation, operationFailure);
    if (jsonEqual(next, existing)) return;
    await patchStatus(
      kc,
      RepositoryCredentialCr.ref(object),
      { metadata: { resourceVersion: object.metadata.resourceVersion }, status: { conditions: next } },
      { fieldManager: BACKEND_FIELD_MANAGER },
    );
    const oldError = existing.find((c) => c.type === 'ErrorOccurred');
    const newError = next[0]!;
    if (
      newError.status === 'True' &&
      (oldError?.status !== 'True' || oldError.message !== newError.message)
    ) {
      logger.info({ reason: newError.reason }, 'RepositoryCredential ErrorOccurred');
      await events.event(
        RepositoryCredentialCr.withTypeMeta(object),
        'Warning',
        RepositoryCredentialEventReason.ErrorOccurred,
        newError.message,
      );
    } else if (newError.status === 'False' && oldError?.status === 'True') {
      await events.event(
        RepositoryCredentialCr.withTypeMeta(object),
        'Normal',
        RepositoryCredentialEventReason.ErrorOccurredResolved,
        'The repository credential is valid',
      );
    }
  }

  async function announceDeletes(
    object: RepositoryCredentialObject | undefined,
    operations: readonly OperationRow[],
  ) {
    if (!object) return;
    for (const operation of operations) {
      await events.event(
        RepositoryCredentialCr.withTypeMeta(object),
        'Normal',
        RepositoryCredentialEventReason.RepositoryCredentialDeleted,
        `Deleted repository credentials ${operation.resource_id} from the database (operation ${operation.id})`,
      );
    }
  }

  /** Deletes every row of this name, or only those of other incarnations with `exceptUid`. */
  async function deleteRows(namespace: string, name: string, exceptUid?: string): Promise<OperationRow[]> {
    return await db.transaction().execute(async (trx) => {
      await RepositoryCredentialCr.lock(trx, namespace, name);
      return await deleteMappedRepositoryCredentials(
        trx,
        await findRepositoryCredentialMappings(trx, namespace, name, { exceptUid }),
      );
    });
  }

  /**
   * The sealed row with its operation, under the CR name's lock; the namespace's label matters only when the
   * tenant is placed, i.e. for a new row. A refused placement is the answer, not an error.
   */
  async function applyLocked(
    object: RepositoryCredentialObject,
    spec: RepositoryCredentialSpec,
    credentials: Parameters<typeof applyRepositoryCredentials>[2]['credentials'],
    signal: AbortSignal,
  ) {
    const { namespace = '', name, uid = '' } = object.metadata;
    const mappings = await findRepositoryCredentialMappings(db, namespace, name);
    const ownNamespaceUid = mappings.find((m) => m.cr_uid === uid)?.cr_namespace_uid;
    const tenant = ownNamespaceUid
      ? { uid: ownNamespaceUid, engineInstance: undefined }
      : await readTenantNamespace(kc, namespace, signal);
    return db
      .transaction()
      .execute(async (trx) => {
        await RepositoryCredentialCr.lock(trx, namespace, name);
        return await applyRepositoryCredentials(trx, sealer, {
          cr: { namespace, name, uid },
          namespaceUid: tenant.uid,
          requestedEngineInstance: tenant.engineInstance,
          tenantClusterIdentity: options.tenantClusterIdentity?.(),
          repositoryUrl: spec.repository,
          repositoryType: spec.type,
          secretName: spec.secret,
          credentials,
        });
      })
      .catch((err: unknown) => {
        if (err instanceof PlacementRefusedError) return err;
        throw err;
      });
  }

  /** Created or updated credentials: said in the log and in a Normal Event on the CR. */
  async function announceChange(
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
    await events.event(
      RepositoryCredentialCr.withTypeMeta(object),
      'Normal',
      created
        ? RepositoryCredentialEventReason.RepositoryCredentialCreated
        : RepositoryCredentialEventReason.RepositoryCredentialUpdated,
      `${created ? 'Created' : 'Updated'} repository credentials ${result.row.id} in the database (operation ${result.operation.id})`,
    );
  }

  async function reconcileLive(
    key: string,
    object: RepositoryCredentialObject,
    signal: AbortSignal,
    logger: Logger,
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name, uid = '' } = object.metadata;
    const spec = parseRepositoryCredentialSpec(object.spec);
    await announceDeletes(object, await deleteRows(namespace, name, uid));

    const unusable = async (outcome: RepositoryCredentialOutcome) => {
      memo.forget(key);
      await announceDeletes(object, await deleteRows(namespace, name));
      await writeConditions(object, outcome, logger);
    };
    if (spec.secret === '') return void (await unusable({ kind: 'secretNotSpecified' }));
    // References resolve in the CR's own namespace only.
    const secret = await readSecret(namespace, spec.secret, signal);
    if (secret === undefined) return void (await unusable({ kind: 'secretNotFound', secret: spec.secret }));
    const read = credentialsOfSecret(spec.secret, secret, spec.type);
    if (!read.ok) return void (await unusable(read.outcome));

    const fingerprint = fingerprintOf(uid, spec.repository, spec.type, read.credentials);
    const { outcome: check, requeueAfter } = await validated(
      key,
      fingerprint,
      spec,
      read.credentials,
      signal,
      logger,
    );

    const result = await applyLocked(object, spec, read.credentials, signal);
    if (result instanceof PlacementRefusedError) {
      logger.warn({ refusal: result.refusal }, 'the tenant has no engine instance');
      await writeConditions(object, { kind: 'error', message: result.message }, logger);
      // The instance may be registered or uncordoned, or the label fixed, without any event of ours.
      return { requeueAfter: PLACEMENT_RECHECK_MS };
    }
    await announceChange(object, result, logger);

    const outcome: RepositoryCredentialOutcome =
      check.result === 'valid'
        ? { kind: 'valid', repository: spec.repository }
        : check.result === 'invalidCredentials'
          ? { kind: 'invalidCredentials', repository: spec.repository, secret: spec.secret }
          : { kind: 'invalidRepositoryUrl', repository: spec.repository, detail: check.detail };
    // A Failed operation (e.g. the agent cannot decrypt) is reported until a later one completes.
    const { pending, lastFinished } = await operationsOutcome(
      db,
      { kind: RepositoryCredentialCr.kind, uid },
      'RepositoryCredentials',
      result.row.id,
    );
    const failure = !pending && lastFinished?.state === 'Failed' ? lastFinished.message : undefined;
    await writeConditions(object, outcome, logger, failure);
    return { requeueAfter };
  }

  return async (key, context) => {
    const { namespace, name } = splitObjectKey(key);
    if (namespace === undefined) return;
    const object = await currentObject(namespace, name, context.signal);
    // Another shard's object is left alone (the shard rule, kinds.ts).
    if (object === null) return;
    try {
      if (!object || object.metadata.deletionTimestamp) {
        memo.forget(key);
        const deleted = await deleteRows(namespace, name);
        for (const operation of deleted) {
          context.logger.info(
            { repositoryCredentials: operation.resource_id, operation: operation.id },
            'repository credentials deleted: the RepositoryCredential is gone',
          );
        }
        return;
      }
      return await reconcileLive(key, object, context.signal, context.logger);
    } catch (err) {
      if (object && !isConflict(err) && !context.signal.aborted) {
        await writeConditions(
          object,
          { kind: 'error', message: 'an unknown error occurred' },
          context.logger,
        ).catch((statusErr: unknown) =>
          context.logger.warn({ err: statusErr }, 'could not report the error in the conditions'),
        );
      }
      throw err;
    }
  };
}
