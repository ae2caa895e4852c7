/**
 * What every kind's processing shares: the context (Kubernetes, the cloud services client, config), the
 * validation of required fields with the original's messages, the token step (`AcccesTokenSecretValid`),
 * and the Secrets the operator owns (written by server-side apply, owner-referenced to their CR so the
 * garbage collector deletes them with it). No token or secret value ever leaves this module in a message.
 */
import {
  controllerReference,
  httpErrorCodeReason,
  type KindDescriptor,
  RhoasConditionType,
  RhoasMessage,
  type RhoasObject,
  RhoasReason,
  TOKEN_SECRET_KEY,
} from '@gitops/api';
import {
  type EventRecorder,
  getObject,
  isTransientStatus,
  type KubeConfig,
  type KubeObject,
  type Logger,
  scrubString,
  serverSideApply,
} from '@gitops/shared';
import { type CloudServicesClient, CloudServicesError } from './cloud-services-client.ts';
import type { RhoasOperatorConfig } from './config.ts';
import { type Progress, StepFailure } from './progress.ts';

export interface RhoasContext {
  readonly config: RhoasOperatorConfig;
  readonly kc: KubeConfig;
  readonly client: CloudServicesClient;
  readonly events: EventRecorder;
  readonly logger: Logger;
  readonly now: () => Date;
}

/** A CR of one of the four kinds as the API server returns it (its generated type; it has a name). */
export type RhoasCr<T extends RhoasObject = RhoasObject> = T & KubeObject;

/**
 * Processing gets its kind's generated type (`@gitops/api`, from the CRD). The API server enforces the
 * schema's types; which fields are present is not enforced (the original's messages name a missing one),
 * so required fields go through {@link validate} and are then read with {@link checked}.
 */
export interface ProcessInput<T extends RhoasObject = RhoasObject> {
  object: RhoasCr<T>;
  progress: Progress;
  /** The status being built (starts as a copy of the current one, without conditions). */
  status: Record<string, unknown>;
  signal: AbortSignal;
}

/** One kind: its descriptor (its conditions: `RhoasConditionsOf` the kind), whether it gets the labels step, its processing. */
export interface KindProcessor<T extends RhoasObject = RhoasObject> {
  readonly kind: KindDescriptor<T['kind']>;
  readonly addsLabels: boolean;
  process(ctx: RhoasContext, input: ProcessInput<T>): Promise<void>;
}

/** Longest id accepted (ids go into a URL path). */
const MAX_ID_LENGTH = 256;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Longest name of a Secret (a DNS-1123 subdomain). */
export const MAX_SECRET_NAME_LENGTH = 253;

/** Is `value` a valid Secret name (a DNS-1123 subdomain of at most 253 characters)? */
export function isSecretName(value: string): boolean {
  return value.length <= MAX_SECRET_NAME_LENGTH && dns1123Subdomain.test(value);
}

export type FieldKind = 'object' | 'secretName' | 'id' | 'text';

function fieldValue(object: RhoasCr, path: string): unknown {
  let value: unknown = object;
  for (const part of path.split('.')) {
    value =
      typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[part] : undefined;
  }
  return value;
}

/**
 * Checks the required fields in order; the first missing one ends processing with the original's
 * `Missing argument <f> in CR, <f> should not be null` (only Finished changes, as in the original). A value
 * of the wrong shape (not a Secret name, an id too long) gets `Invalid argument <f> in CR: ...`.
 */
export function validate(
  progress: Progress,
  object: RhoasCr,
  fields: [path: string, kind: FieldKind][],
): void {
  for (const [path, kind] of fields) {
    const value = fieldValue(object, path);
    const missing =
      value === undefined ||
      value === null ||
      (kind === 'object'
        ? typeof value !== 'object' || Array.isArray(value)
        : typeof value !== 'string' || value === '');
    if (missing)
      progress.fail(
        RhoasConditionType.Finished,
        RhoasReason.InvalidUserInput,
        RhoasMessage.missingArgument(path),
      );
    if (kind === 'secretName' && !isSecretName(value as string))
      progress.fail(
        RhoasConditionType.Finished,
        RhoasReason.InvalidUserInput,
        RhoasMessage.invalidArgument(
          path,
          'must be the name of a Secret (a DNS-1123 subdomain of at most 253 characters)',
        ),
      );
    if (kind === 'id' && (value as string).length > MAX_ID_LENGTH)
      progress.fail(
        RhoasConditionType.Finished,
        RhoasReason.InvalidUserInput,
        RhoasMessage.invalidArgument(path, `must be at most ${MAX_ID_LENGTH} characters`),
      );
  }
}

/**
 * A field {@link validate} has checked, read from the typed object: a non-empty string from here on (a
 * value validate let through of another type is a bug here, not bad input).
 */
export function checked(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '') throw new Error(`${path} was validated but is not a string`);
  return value;
}

export const secretRef = (namespace: string, name: string) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  namespace,
  name,
});

/** Reads a Secret (live; `undefined` when it does not exist). */
export function readSecret(ctx: RhoasContext, namespace: string, name: string, signal: AbortSignal) {
  return getObject(ctx.kc, secretRef(namespace, name), { signal }) as Promise<
    (KubeObject & { data?: Record<string, string> }) | undefined
  >;
}

/**
 * The token step: reads the offline token from `data.value` of Secret `name` and exchanges it at the SSO
 * for an access token (condition AcccesTokenSecretValid). The tokens live only in memory.
 */
export async function accessToken(
  ctx: RhoasContext,
  progress: Progress,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<string> {
  const type = RhoasConditionType.AccessTokenSecretValid;
  const secret = await readSecret(ctx, namespace, name, signal);
  if (!secret) progress.fail(type, RhoasReason.SecretNotFound, RhoasMessage.missingTokenSecret(name));
  const raw = secret.data?.[TOKEN_SECRET_KEY];
  const offline = typeof raw === 'string' ? Buffer.from(raw, 'base64').toString('utf8').trim() : '';
  if (!offline)
    progress.fail(type, RhoasReason.InvalidTokenSecret, RhoasMessage.tokenSecretWithoutValue(name));
  try {
    const token = await ctx.client.exchangeToken(offline, signal);
    progress.pass(type);
    return token;
  } catch (err) {
    if (!(err instanceof CloudServicesError)) throw err;
    if (err.failure === 'http' && err.status !== undefined)
      progress.fail(
        type,
        httpErrorCodeReason(err.status),
        RhoasMessage.exchangeFailed(err.body),
        err.transient,
      );
    if (err.failure === 'malformed') progress.fail(type, RhoasReason.MalformedResponse, err.message);
    return progress.fail(type, RhoasReason.ConnectionError, err.message, err.transient);
  }
}

interface OwnerReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  uid?: string;
  controller?: boolean;
}

/** The controller ownerReference of `object`, if any. */
export function controllerOf(object: KubeObject): OwnerReference | undefined {
  const refs = (object.metadata as { ownerReferences?: OwnerReference[] }).ownerReferences;
  return (refs ?? []).find((r) => r.controller === true);
}

/** Does `owner` (by uid) control `object`? */
export function isControlledBy(object: KubeObject, owner: KubeObject): boolean {
  const controller = controllerOf(object);
  return (
    controller !== undefined && owner.metadata.uid !== undefined && controller.uid === owner.metadata.uid
  );
}

/** Writes Secret `name` owned by (and garbage-collected with) `owner`, by server-side apply. */
export async function applyOwnedSecret(
  ctx: RhoasContext,
  owner: RhoasCr,
  kind: KindDescriptor,
  secret: {
    name: string;
    type?: string;
    stringData: Record<string, string>;
    /** Values already base64-encoded (bytes copied from another Secret), written as they are. */
    data?: Record<string, string>;
    labels?: Record<string, string>;
  },
  signal: AbortSignal,
): Promise<void> {
  const data = {
    ...Object.fromEntries(
      Object.entries(secret.stringData).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]),
    ),
    ...secret.data,
  };
  await serverSideApply(
    ctx.kc,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: secret.name,
        namespace: owner.metadata.namespace,
        ...(secret.labels ? { labels: secret.labels } : {}),
        ownerReferences: [controllerReference(kind, owner, { blockOwnerDeletion: false })],
      },
      ...(secret.type ? { type: secret.type } : {}),
      data,
    } as KubeObject,
    { fieldManager: ctx.config.fieldManager, force: true, signal },
  );
}

/** A Kubernetes write failed: the message names the object and the status, never the data sent. */
export function kubeWriteFailure(condition: string, reason: string, what: string, err: unknown): StepFailure {
  const status = (err as { statusCode?: unknown }).statusCode;
  const detail = scrubString(err instanceof Error ? err.message : String(err));
  // A conflict (another writer, or a Secret deleted and recreated) is retried too.
  const transient = typeof status !== 'number' || isTransientStatus(status) || status === 409;
  return new StepFailure(
    condition,
    reason,
    `${what} could not be written: ${detail}`.slice(0, 1024),
    transient,
  );
}

/** An API timestamp as a UTC ISO instant (`''` stays `''`, an unparsable value is kept as it came). */
export function isoInstant(value: string): string {
  if (!value) return '';
  const time = Date.parse(value);
  return Number.isNaN(time) ? value : new Date(time).toISOString();
}
