/**
 * Writes of the claim, target and provisioner controllers (and of bindings' status): JSON merge patches
 * guarded by the object's resourceVersion (a stale cache fails with 409 and the key is reconciled again),
 * finalizers, phases, and the single `ErrorOccurred` condition of claims and targets (False / `Success` /
 * "" on a clean pass, True / `ErrorOccurred` / message on a failure, as the original wrote it).
 */
import {
  APPSTUDIO_FIELD_MANAGER,
  DeploymentTargetConditionReason,
  DeploymentTargetConditionType,
  type KindDescriptor,
} from '@gitops/api';
import {
  collectionPath,
  conditionsOfStatus,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  patchStatus,
  setKubeCondition,
} from '@gitops/shared';
import { statusOf, text } from './objects.ts';

export function pathOf(
  kind: KindDescriptor,
  object: Pick<KubeObject, 'metadata'>,
  subresource?: string,
): string {
  const base = collectionPath({
    ...kind.resource,
    namespace: kind.namespaced ? object.metadata.namespace : undefined,
  });
  return `${base}/${encodeURIComponent(object.metadata.name)}${subresource ? `/${subresource}` : ''}`;
}

/**
 * JSON merge patch of `object`, only if it is still at the resourceVersion we read. A status patch (phase,
 * conditions: fields only this controller writes) is not guarded, so a finalizer added meanwhile by another
 * controller does not make it fail.
 */
export async function mergePatch(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: KubeObject,
  patch: Record<string, unknown>,
  subresource?: 'status',
): Promise<KubeObject> {
  const metadata = (patch.metadata as Record<string, unknown> | undefined) ?? {};
  return (await kubeRequest(kc, {
    method: HttpMethod.PATCH,
    path: pathOf(kind, object, subresource),
    query: { fieldManager: APPSTUDIO_FIELD_MANAGER },
    body:
      subresource === 'status'
        ? patch
        : { ...patch, metadata: { ...metadata, resourceVersion: object.metadata.resourceVersion } },
    contentType: 'application/merge-patch+json',
  })) as KubeObject;
}

export async function addFinalizer(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: KubeObject,
  finalizer: string,
): Promise<KubeObject> {
  const finalizers = object.metadata.finalizers ?? [];
  if (finalizers.includes(finalizer)) return object;
  return mergePatch(kc, kind, object, { metadata: { finalizers: [...finalizers, finalizer] } });
}

/** Removes `finalizer`; a gone object is fine. */
export async function removeFinalizer(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: KubeObject,
  finalizer: string,
): Promise<KubeObject | undefined> {
  const finalizers = object.metadata.finalizers ?? [];
  if (!finalizers.includes(finalizer)) return object;
  try {
    return await mergePatch(kc, kind, object, {
      metadata: { finalizers: finalizers.filter((f) => f !== finalizer) },
    });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

export async function setPhase(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: KubeObject,
  phase: string,
): Promise<KubeObject> {
  if (text(statusOf(object).phase) === phase) return object;
  return mergePatch(kc, kind, object, { status: { phase } }, 'status');
}

/** Writes the ErrorOccurred condition (error message, or the clean-pass form) when it changes. */
export async function setErrorOccurred(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: KubeObject,
  error: string | undefined,
  now: Date,
): Promise<KubeObject> {
  const current = conditionsOfStatus(statusOf(object));
  const next = setKubeCondition(
    current,
    error === undefined
      ? {
          type: DeploymentTargetConditionType.ErrorOccurred,
          status: 'False',
          reason: DeploymentTargetConditionReason.Success,
          message: '',
        }
      : {
          type: DeploymentTargetConditionType.ErrorOccurred,
          status: 'True',
          reason: DeploymentTargetConditionReason.ErrorOccurred,
          message: error,
        },
    now,
  );
  if (JSON.stringify(current) === JSON.stringify(next)) return object;
  return mergePatch(kc, kind, object, { status: { conditions: next } }, 'status');
}

/**
 * Writes the `status` fields of `patch` that differ from the object's, guarded by its resourceVersion (a
 * stale cache fails with 409 and the key is reconciled again); nothing when none differs. Returns the object
 * as stored, or `object` when nothing was written.
 */
export async function writeChangedStatus(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: KubeObject,
  patch: Record<string, unknown>,
): Promise<KubeObject> {
  const status = statusOf(object);
  if (Object.entries(patch).every(([k, v]) => JSON.stringify(status[k] ?? null) === JSON.stringify(v)))
    return object;
  return patchStatus(
    kc,
    { ...kind, namespace: object.metadata.namespace, name: object.metadata.name },
    { metadata: { resourceVersion: object.metadata.resourceVersion }, status: patch },
    { fieldManager: APPSTUDIO_FIELD_MANAGER },
  );
}
