/**
 * What KafkaConnection and ServiceRegistryConnection share: the servicebinding.io binding Secret. Each
 * connection is a Provisioned Service: `status.binding.name` names a Secret the operator creates and owns
 * (`<cr name>-binding` for a KafkaConnection, `<cr name>-binding-registry` for a ServiceRegistryConnection,
 * see {@link bindingSecretName}), holding the well-known entries (`type`, `provider`, the address,
 * `client-id` / `client-secret` copied from the referenced service-account Secret, and the protocol
 * entries) so any servicebinding.io implementation can project it into a workload. A Secret of that name
 * that this connection does not own (no controller ownerReference with its uid) is never written, adopted
 * or owner-referenced: the connection reports `SecretConflict` instead.
 */
import { createHash } from 'node:crypto';
import {
  controllerReference,
  type KafkaConnection,
  type KindDescriptor,
  RhoasConditionType,
  RhoasMessage,
  RhoasReason,
  ServiceAccountSecretKey,
  type ServiceRegistryConnection,
} from '@gitops/api';
import { HttpMethod, isNotFound, type KubeObject, kubeRequest, mergePatch, secretRef } from '@gitops/shared';
import {
  accessToken,
  checked,
  controllerOf,
  isControlledBy,
  type KindProcessor,
  kubeWriteFailure,
  MAX_SECRET_NAME_LENGTH,
  type RhoasContext,
  type RhoasCr,
  readSecret,
  validate,
} from './processing.ts';
import { type Progress, StepFailure } from './progress.ts';

export type ConnectionKindName = 'KafkaConnection' | 'ServiceRegistryConnection';

/**
 * The end of each kind's binding Secret name. Neither is an end of the other, so the two kinds never
 * share a Secret: a KafkaConnection keeps the name it always had; a ServiceRegistryConnection, whose
 * Secret had the same name before (both kinds fought over it), gets its own.
 */
export const BINDING_SUFFIX = {
  KafkaConnection: '-binding',
  ServiceRegistryConnection: '-binding-registry',
} as const satisfies Record<ConnectionKindName, string>;
/** Hex digits of the SHA-256 of the CR name that stand for the part of a long name that is cut (40 bits). */
const NAME_HASH_LENGTH = 10;
/** Warning Event when the service-account Secret cannot give the binding its credentials. */
export const ServiceAccountSecretMissingEvent = 'ServiceAccountSecretMissing';
/** Normal Event: a binding Secret of an earlier version is still there (README, "Binding Secrets"). */
export const LegacyBindingSecretEvent = 'LegacyBindingSecret';

/**
 * The binding Secret of connection `crName` of `kind`: `<crName><suffix>` when that is at most 253
 * characters; else the name cut to fit, trimmed back to a letter or digit (a Secret name may not have a
 * `.` or `-` before the `-`), then `-<first 10 hex digits of the SHA-256 of the whole name>` and the
 * suffix. Every valid CR name gives a valid Secret name, and different names different Secrets.
 */
export function bindingSecretName(kind: ConnectionKindName, crName: string): string {
  const suffix = BINDING_SUFFIX[kind];
  const whole = `${crName}${suffix}`;
  if (whole.length <= MAX_SECRET_NAME_LENGTH) return whole;
  const hash = createHash('sha256').update(crName).digest('hex').slice(0, NAME_HASH_LENGTH);
  const cut = crName
    .slice(0, MAX_SECRET_NAME_LENGTH - suffix.length - 1 - NAME_HASH_LENGTH)
    .replace(/[-.]+$/, '');
  return `${cut}-${hash}${suffix}`;
}

/** The name earlier versions gave the binding Secret of both kinds (only names that fitted were written). */
export function legacyBindingSecretName(crName: string): string | undefined {
  const name = `${crName}-binding`;
  return name.length <= MAX_SECRET_NAME_LENGTH ? name : undefined;
}

/** The binding Secret exists and is not this connection's (README table: `SecretConflict`). */
export const bindingSecretConflict = (name: string, kind: string) =>
  `Secret ${name} exists and is not owned by this ${kind}; no binding Secret was written`;

/** The binding Secret as this connection wants it: the entries and whichever credentials there are. */
interface BindingContent {
  name: string;
  type: string;
  /** base64, as the API server keeps `data`. */
  data: Record<string, string>;
}

/**
 * Creates the binding Secret, or updates it when this connection owns it; a Secret of that name that it
 * does not own is left exactly as it is and the processing ends with `SecretConflict`. A create refuses an
 * existing Secret (409) and an update is conditional on the resourceVersion that was read, so a Secret
 * someone creates or replaces meanwhile is never written either: the processing is retried and looks again.
 */
async function writeOwnedBinding(
  ctx: RhoasContext,
  object: RhoasCr,
  kind: KindDescriptor,
  existing: (KubeObject & { data?: Record<string, string> }) | undefined,
  content: BindingContent,
  signal: AbortSignal,
): Promise<void> {
  const namespace = object.metadata.namespace ?? '';
  const collection = `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
  if (!existing) {
    await kubeRequest(ctx.kc, {
      method: HttpMethod.POST,
      path: collection,
      query: { fieldManager: ctx.config.fieldManager },
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: content.name,
          namespace,
          ownerReferences: [controllerReference(kind, object, { blockOwnerDeletion: false })],
        },
        type: content.type,
        data: content.data,
      },
      signal,
    });
    return;
  }
  // Credentials the service-account Secret no longer has are taken out (null deletes a key in a merge
  // patch); keys someone else added to the Secret stay.
  const removed = Object.fromEntries(
    [ServiceAccountSecretKey.clientId, ServiceAccountSecretKey.clientSecret]
      .filter((key) => !(key in content.data) && existing.data?.[key] !== undefined)
      .map((key) => [key, null]),
  );
  try {
    await mergePatch(
      ctx.kc,
      secretRef(namespace, content.name),
      {
        metadata: { resourceVersion: existing.metadata.resourceVersion },
        data: { ...content.data, ...removed },
      },
      { fieldManager: ctx.config.fieldManager, signal },
    );
  } catch (err) {
    // Deleted since it was read: retried, and the next processing creates it.
    if (isNotFound(err))
      throw new StepFailure(
        RhoasConditionType.Finished,
        RhoasReason.BindingSecretFailed,
        `binding Secret ${content.name} could not be written: it was deleted meanwhile`,
        true,
      );
    throw err;
  }
}

/**
 * Why an existing Secret of the binding's name must not be written, if it must not: it belongs to an
 * earlier connection of this kind and name (deleted, then created again: that owner is gone, so the garbage
 * collector deletes the Secret; retried until it has), it is on its way out (a finalizer holds it; once it
 * is gone, the retry creates ours), or it is not this connection's (SecretConflict, waits for the user).
 */
function whyNotWritable(
  existing: KubeObject,
  object: RhoasCr,
  kind: KindDescriptor<ConnectionKindName>,
  name: string,
): StepFailure | undefined {
  const ours = isControlledBy(existing, object);
  const controller = controllerOf(existing);
  if (
    !ours &&
    controller?.kind === kind.kind &&
    controller.apiVersion === kind.apiVersion &&
    controller.name === object.metadata.name
  )
    return new StepFailure(
      RhoasConditionType.Finished,
      RhoasReason.SecretConflict,
      `Secret ${name} exists and is owned by an earlier ${kind.kind} of this name; retried until the garbage collector has deleted it`,
      true,
    );
  if (existing.metadata.deletionTimestamp)
    return new StepFailure(
      RhoasConditionType.Finished,
      RhoasReason.BindingSecretFailed,
      `binding Secret ${name} could not be written: it is being deleted (retried until it is gone)`,
      true,
    );
  if (!ours)
    return new StepFailure(
      RhoasConditionType.Finished,
      RhoasReason.SecretConflict,
      bindingSecretConflict(name, kind.kind),
    );
  return undefined;
}

/** Writes the binding Secret; returns its name. A failure ends processing with Finished False. */
export async function writeBindingSecret(
  ctx: RhoasContext,
  progress: Progress,
  object: RhoasCr,
  kind: KindDescriptor<ConnectionKindName>,
  entries: Record<string, string>,
  serviceAccountSecretName: string,
  signal: AbortSignal,
): Promise<string> {
  const namespace = object.metadata.namespace ?? '';
  const name = bindingSecretName(kind.kind, object.metadata.name);
  const existing = await readSecret(ctx, namespace, name, signal);
  const blocked = existing && whyNotWritable(existing, object, kind, name);
  if (blocked) progress.fail(blocked.condition, blocked.reason, blocked.message, blocked.transient);
  // Copied as the API server holds them (base64): credentials are opaque bytes, never decoded (binary
  // data would not survive a round trip through a string).
  const credentials: Record<string, string> = {};
  const sa = await readSecret(ctx, namespace, serviceAccountSecretName, signal);
  for (const key of [ServiceAccountSecretKey.clientId, ServiceAccountSecretKey.clientSecret]) {
    const value = sa?.data?.[key];
    if (typeof value === 'string') credentials[key] = value;
  }
  if (Object.keys(credentials).length < 2)
    await ctx.events.event(
      object,
      'Warning',
      ServiceAccountSecretMissingEvent,
      `Secret ${serviceAccountSecretName} has no client-id and client-secret: binding Secret ${name} is written without credentials`,
    );
  const data = {
    ...Object.fromEntries(
      Object.entries(entries).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]),
    ),
    ...credentials,
  };
  try {
    await writeOwnedBinding(
      ctx,
      object,
      kind,
      existing,
      { name, type: `servicebinding.io/${entries.type ?? 'rhoas'}`, data },
      signal,
    );
  } catch (err) {
    if (err instanceof StepFailure) progress.fail(err.condition, err.reason, err.message, err.transient);
    const failure = kubeWriteFailure(
      RhoasConditionType.Finished,
      RhoasReason.BindingSecretFailed,
      `binding Secret ${name}`,
      err,
    );
    progress.fail(failure.condition, failure.reason, failure.message, failure.transient);
  }
  return name;
}

/**
 * A ServiceRegistryConnection's binding Secret had the KafkaConnection's name before. The operator may not
 * delete Secrets (its RBAC has no delete), so one such Secret it still owns stays until the connection is
 * deleted (garbage collection): a Warning Event says so on every processing.
 */
async function reportLegacyBinding(
  ctx: RhoasContext,
  object: RhoasCr,
  kind: KindDescriptor<ConnectionKindName>,
  current: string,
  signal: AbortSignal,
): Promise<void> {
  const legacy = legacyBindingSecretName(object.metadata.name);
  if (legacy === undefined || legacy === current) return;
  const secret = await readSecret(ctx, object.metadata.namespace ?? '', legacy, signal);
  if (secret && isControlledBy(secret, object))
    await ctx.events.event(
      object,
      'Warning',
      LegacyBindingSecretEvent,
      `Secret ${legacy} was written by an earlier version and is no longer updated: the binding is now Secret ${current}. ${legacy} is deleted with this ${kind.kind}; delete it sooner once nothing reads it`,
    );
}

/** What one connection kind adds to the shared flow: which id it reads, what it fetches and what it reports. */
export interface ConnectionKind<T> {
  kind: KindDescriptor<ConnectionKindName>;
  /** The spec field holding the instance id (`kafkaId`, `serviceRegistryId`). */
  idField: string;
  /** The condition that turns True once the instance was found. */
  found: string;
  fetch(ctx: RhoasContext, token: string, id: string, signal: AbortSignal): Promise<T>;
  /** The status fields, `status.metadata` and the binding Secret's entries for the found instance. */
  describe(
    ctx: RhoasContext,
    id: string,
    instance: T,
  ): { status: Record<string, unknown>; metadata: Record<string, string>; binding: Record<string, string> };
}

/**
 * The flow both connection kinds share: validate the spec, exchange the token, find the instance, write the
 * binding Secret, then report what was found (`status.message`, `updated`, `serviceAccountSecretName`,
 * `metadata`, `binding` and the kind's own fields).
 */
export function connectionProcessor<T>(
  connection: ConnectionKind<T>,
): KindProcessor<KafkaConnection | ServiceRegistryConnection> {
  return {
    kind: connection.kind,
    addsLabels: true,
    async process(ctx, { object, progress, status, signal }) {
      validate(progress, object, [
        ['spec', 'object'],
        ['spec.accessTokenSecretName', 'secretName'],
        ['spec.credentials', 'object'],
        ['spec.credentials.serviceAccountSecretName', 'secretName'],
        [`spec.${connection.idField}`, 'id'],
      ]);
      const spec = {
        accessTokenSecretName: checked(object.spec?.accessTokenSecretName, 'spec.accessTokenSecretName'),
        serviceAccountSecretName: checked(
          object.spec?.credentials?.serviceAccountSecretName,
          'spec.credentials.serviceAccountSecretName',
        ),
      };
      const id = checked(object.spec?.[connection.idField], `spec.${connection.idField}`);
      const namespace = object.metadata.namespace ?? '';
      const token = await accessToken(ctx, progress, namespace, spec.accessTokenSecretName, signal);
      const instance = await progress.step(connection.found, () => connection.fetch(ctx, token, id, signal));
      const described = connection.describe(ctx, id, instance);
      const binding = await writeBindingSecret(
        ctx,
        progress,
        object,
        connection.kind,
        described.binding,
        spec.serviceAccountSecretName,
        signal,
      );
      if (connection.kind.kind === 'ServiceRegistryConnection')
        await reportLegacyBinding(ctx, object, connection.kind, binding, signal);
      status.message = RhoasMessage.created;
      status.updated = ctx.now().toISOString();
      Object.assign(status, described.status);
      status.serviceAccountSecretName = spec.serviceAccountSecretName;
      status.metadata = described.metadata;
      status.binding = { name: binding };
    },
  };
}
