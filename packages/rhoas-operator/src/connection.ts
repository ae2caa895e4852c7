/**
 * What KafkaConnection and ServiceRegistryConnection share: the servicebinding.io binding Secret. Each
 * connection is a Provisioned Service: `status.binding.name` names a Secret the operator writes and owns
 * (`<cr name>-binding`), holding the well-known entries (`type`, `provider`, the address, `client-id` /
 * `client-secret` copied from the referenced service-account Secret, and the protocol entries) so any
 * servicebinding.io implementation can project it into a workload.
 */
import { type KindDescriptor, RhoasConditionType, RhoasReason, ServiceAccountSecretKey } from '@gitops/api';
import {
  applyOwnedSecret,
  kubeWriteFailure,
  type RhoasContext,
  type RhoasObject,
  readSecret,
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
  const credentials: Record<string, string> = {};
  const sa = await readSecret(ctx, namespace, serviceAccountSecretName, signal);
  for (const key of [ServiceAccountSecretKey.clientId, ServiceAccountSecretKey.clientSecret]) {
    const value = sa?.data?.[key];
    if (typeof value === 'string') credentials[key] = Buffer.from(value, 'base64').toString('utf8');
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
        stringData: { ...entries, ...credentials },
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
