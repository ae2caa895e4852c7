/**
 * The connection steps of the ManagedEnvironment reconcile (docs/api.md's steps 2 and 3): the credentials
 * Secret, the token to use (ours when createNewServiceAccount, with the finalizer that removes it again) and
 * its verification by a real request, re-tried briefly for credentials created a moment ago; and the CR's
 * writes every step shares (its finalizers, its Events). Top-level functions over the reconcile's deps
 * (`ManagedEnvironmentSteps`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ManagedEnvironmentReason } from '@gitops/api';
import { getPathIfExists, isNotFound, type KubeConfig, type KubeObject, mergePatch } from '@gitops/shared';
import { isJsonObject } from '../json.ts';
import { BACKEND_FIELD_MANAGER, ManagedEnvironmentCr, type ManagedEnvironmentObject } from '../kinds.ts';
import {
  type CheckOutcome,
  classifyConnectionError,
  type ManagedEnvironmentSpec,
  type TargetCluster,
  targetKubeConfig,
  verifyCredentials,
} from './connection.check.ts';
import type { ManagedEnvironmentSteps } from './managed-environment.reconciler.ts';
import { storedBearerToken } from './managed-environment.store.ts';
import { installServiceAccount } from './service-account.ts';

/** Re-tries of a just-created ServiceAccount token that the cluster refused (250 ms, 500 ms, ... 1.5 s). */
const NEW_TOKEN_RETRIES = 6;
const NEW_TOKEN_RETRY_MS = 250;
/** A credentials Secret this young gets the same re-tries. */
const NEW_SECRET_MS = 60_000;

/** Kept on a CR with createNewServiceAccount until the created ServiceAccount is removed again. */
export const SERVICE_ACCOUNT_FINALIZER = 'managed-gitops.redhat.com/managed-environment-service-account';

export async function getSecret(
  deps: Pick<ManagedEnvironmentSteps, 'kc'>,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<KubeObject | undefined> {
  if (name === '') return undefined;
  const secret = await getPathIfExists(
    deps.kc,
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
    signal,
  );
  return isJsonObject(secret) ? (secret as unknown as KubeObject) : undefined;
}

/** Whether a credentials Secret was created less than NEW_SECRET_MS before `nowMs` (pure). */
export function isNewSecret(secret: KubeObject | undefined, nowMs: number): boolean {
  const createdAt = Date.parse(String(secret?.metadata.creationTimestamp ?? ''));
  return Number.isFinite(createdAt) && nowMs - createdAt < NEW_SECRET_MS;
}

export async function patchFinalizers(
  deps: Pick<ManagedEnvironmentSteps, 'kc'>,
  object: ManagedEnvironmentObject,
  finalizers: string[],
) {
  try {
    await mergePatch(
      deps.kc,
      ManagedEnvironmentCr.ref(object),
      { metadata: { finalizers, resourceVersion: object.metadata.resourceVersion } },
      { fieldManager: BACKEND_FIELD_MANAGER },
    );
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** An Event on the CR. */
export const environmentEvent = (
  deps: Pick<ManagedEnvironmentSteps, 'events'>,
  object: ManagedEnvironmentObject,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
) => deps.events.event(ManagedEnvironmentCr.withTypeMeta(object), type, reason, message);

/** Steps 2 and 3: the token to use (ours when createNewServiceAccount), verified by a real request. */
export async function connect(
  deps: ManagedEnvironmentSteps,
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
  const stored = await storedBearerToken(deps.db, deps.sealer, uid);
  if (stored && stored.apiUrl === spec.apiURL) {
    const verified = await verifyCredentials(targetKubeConfig(target, stored.token, insecure), spec, signal);
    if (verified.ok) return { ok: true, value: stored.token };
  }
  const finalizers = object.metadata.finalizers ?? [];
  if (!finalizers.includes(SERVICE_ACCOUNT_FINALIZER)) {
    await patchFinalizers(deps, object, [...finalizers, SERVICE_ACCOUNT_FINALIZER]);
  }
  let token: string;
  try {
    token = await installServiceAccount(targetKubeConfig(target, target.token, insecure), uid, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    return installFailure(err, spec.apiURL);
  }
  const verified = await verifyNewCredentials(targetKubeConfig(target, token, insecure), spec, signal);
  return verified.ok ? { ok: true, value: token } : verified;
}

/** Why the ServiceAccount could not be installed (pure): a refusal of the credentials is said as such. */
export function installFailure(err: unknown, apiURL: string): CheckOutcome<string> & { ok: false } {
  const classified = classifyConnectionError(
    err,
    apiURL,
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
