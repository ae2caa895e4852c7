/**
 * What KafkaConnection and ServiceRegistryConnection share: the servicebinding.io binding Secret. Each
 * connection is a Provisioned Service: `status.binding.name` names a Secret the operator writes and owns
 * (`<cr name>-binding`), holding the well-known entries (`type`, `provider`, the address, `client-id` /
 * `client-secret` copied from the referenced service-account Secret, and the protocol entries) so any
 * servicebinding.io implementation can project it into a workload.
 */
import {
  type KindDescriptor,
  RhoasConditionType,
  RhoasMessage,
  RhoasReason,
  ServiceAccountSecretKey,
} from '@gitops/api';
import {
  accessToken,
  applyOwnedSecret,
  type KindProcessor,
  kubeWriteFailure,
  type RhoasContext,
  type RhoasObject,
  readSecret,
  validate,
} from './processing.ts';
import type { Progress } from './progress.ts';

export const BINDING_SUFFIX = '-binding';
/** Warning Event when the service-account Secret cannot give the binding its credentials. */
export const ServiceAccountSecretMissingEvent = 'ServiceAccountSecretMissing';

export function bindingSecretName(crName: string): string {
  return `${crName.slice(0, 253 - BINDING_SUFFIX.length)}${BINDING_SUFFIX}`;
}

/** Writes the binding Secret; returns its name. A failure ends processing with Finished False. */
export async function writeBindingSecret(
  ctx: RhoasContext,
  progress: Progress,
  object: RhoasObject,
  kind: KindDescriptor,
  entries: Record<string, string>,
  serviceAccountSecretName: string,
  signal: AbortSignal,
): Promise<string> {
  const namespace = object.metadata.namespace ?? '';
  const name = bindingSecretName(object.metadata.name);
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
  try {
    await applyOwnedSecret(
      ctx,
      object,
      kind,
      {
        name,
        type: `servicebinding.io/${entries.type ?? 'rhoas'}`,
        stringData: entries,
        data: credentials,
      },
      signal,
    );
  } catch (err) {
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

/** What one connection kind adds to the shared flow: which id it reads, what it fetches and what it reports. */
export interface ConnectionKind<T> {
  kind: KindDescriptor;
  conditions: readonly string[];
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
export function connectionProcessor<T>(connection: ConnectionKind<T>): KindProcessor {
  return {
    kind: connection.kind,
    conditions: connection.conditions,
    addsLabels: true,
    async process(ctx, { object, progress, status, signal }) {
      validate(progress, object, [
        ['spec', 'object'],
        ['spec.accessTokenSecretName', 'secretName'],
        ['spec.credentials', 'object'],
        ['spec.credentials.serviceAccountSecretName', 'secretName'],
        [`spec.${connection.idField}`, 'id'],
      ]);
      const spec = object.spec as {
        accessTokenSecretName: string;
        credentials: { serviceAccountSecretName: string };
      } & Record<string, unknown>;
      const id = spec[connection.idField] as string;
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
        spec.credentials.serviceAccountSecretName,
        signal,
      );
      status.message = RhoasMessage.created;
      status.updated = ctx.now().toISOString();
      Object.assign(status, described.status);
      status.serviceAccountSecretName = spec.credentials.serviceAccountSecretName;
      status.metadata = described.metadata;
      status.binding = { name: binding };
    },
  };
}
