/**
 * Writes of the claim, target and provisioner controllers, and the binding writes of other controllers (a
 * PromotionRun's `createBinding` and `pointBindingAt`, the status of bindings): JSON merge patches
 * guarded by the object's resourceVersion (a stale cache fails with 409 and the key is reconciled again),
 * finalizers, phases, and the single `ErrorOccurred` condition of claims and targets (False / `Success` /
 * "" on a clean pass, True / `ErrorOccurred` / message on a failure, as the original wrote it).
 */
import {
  APPSTUDIO_FIELD_MANAGER,
  AppStudioKinds,
  AppStudioLabel,
  DeploymentTargetConditionReason,
  DeploymentTargetConditionType,
  type KindDescriptor,
} from '@gitops/api';
import {
  collectionPath,
  conditionsOfStatus,
  HttpMethod,
  isNotFound,
  jsonEqual,
  type KubeConfig,
  type KubeObject,
  kindParser,
  kubeRequest,
  patchStatus,
  refOfKind,
  setKubeCondition,
  mergePatch as sharedMergePatch,
} from '@gitops/shared';
import { type BindingCr, statusOf, text } from './objects.ts';

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
 * JSON merge patch of `object` (or its subresource) as this service's field manager, unguarded: the object
 * as stored, parsed as the caller's type (kindParser).
 */
async function patchObject<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  body: Record<string, unknown>,
  subresource?: 'status',
): Promise<T> {
  const stored = await sharedMergePatch(kc, refOfKind(kind, object), body, {
    fieldManager: APPSTUDIO_FIELD_MANAGER,
    ...(subresource ? { subresource } : {}),
  });
  return kindParser<T>(kind)(stored);
}

/**
 * JSON merge patch of `object`, only if it is still at the resourceVersion we read. A status patch (phase,
 * conditions: fields only this controller writes) is not guarded, so a finalizer added meanwhile by another
 * controller does not make it fail.
 */
export async function mergePatch<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  patch: Record<string, unknown>,
  subresource?: 'status',
): Promise<T> {
  const metadata = (patch.metadata as Record<string, unknown> | undefined) ?? {};
  return patchObject(
    kc,
    kind,
    object,
    subresource === 'status'
      ? patch
      : { ...patch, metadata: { ...metadata, resourceVersion: object.metadata.resourceVersion } },
    subresource,
  );
}

/**
 * Points a SnapshotEnvironmentBinding at `snapshot` (its `spec.snapshot`, the one field a PromotionRun
 * changes, last writer wins): the binding as stored, or undefined when it already points there.
 */
export async function pointBindingAt(
  kc: KubeConfig,
  binding: BindingCr,
  snapshot: string,
): Promise<BindingCr | undefined> {
  if (binding.spec.snapshot === snapshot) return undefined;
  return patchObject(kc, AppStudioKinds.SnapshotEnvironmentBinding, binding, { spec: { snapshot } });
}

/**
 * Creates an object of `kind` in `namespace` (its apiVersion, kind and namespace filled in) and answers it as
 * stored, parsed as that kind.
 */
export async function createObject<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  namespace: string,
  object: { metadata: Omit<KubeObject['metadata'], 'name' | 'namespace'> & { name?: string } } & Record<
    string,
    unknown
  >,
): Promise<T> {
  const created = await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: collectionPath({ ...kind.resource, namespace }),
    body: {
      apiVersion: kind.apiVersion,
      kind: kind.kind,
      ...object,
      metadata: { ...object.metadata, namespace },
    },
  });
  return kindParser<T>(kind)(created);
}

/**
 * Creates the SnapshotEnvironmentBinding of (application, environment) pointed at `snapshot` with these
 * components, labelled for lookups and for this shard (a PromotionRun generates it when missing).
 */
export async function createBinding(
  kc: KubeConfig,
  binding: {
    namespace: string;
    name: string;
    application: string;
    environment: string;
    snapshot: string;
    components: readonly string[];
    shardLabels: Readonly<Record<string, string>>;
  },
): Promise<BindingCr> {
  const { namespace, name, application, environment } = binding;
  return await createObject<BindingCr>(kc, AppStudioKinds.SnapshotEnvironmentBinding, namespace, {
    metadata: {
      name,
      labels: {
        [AppStudioLabel.BindingApplication]: application,
        [AppStudioLabel.BindingEnvironment]: environment,
        ...binding.shardLabels,
      },
    },
    spec: {
      application,
      environment,
      snapshot: binding.snapshot,
      components: binding.components.map((component) => ({ name: component })),
    },
  });
}

export async function addFinalizer<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  finalizer: string,
): Promise<T> {
  const finalizers = object.metadata.finalizers ?? [];
  if (finalizers.includes(finalizer)) return object;
  return mergePatch(kc, kind, object, { metadata: { finalizers: [...finalizers, finalizer] } });
}

/** Removes `finalizer`; a gone object is fine. */
export async function removeFinalizer<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  finalizer: string,
): Promise<T | undefined> {
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

export async function setPhase<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  phase: string,
): Promise<T> {
  if (text(statusOf(object).phase) === phase) return object;
  return mergePatch(kc, kind, object, { status: { phase } }, 'status');
}

/** Writes the ErrorOccurred condition (error message, or the clean-pass form) when it changes. */
export async function setErrorOccurred<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  error: string | undefined,
  now: Date,
): Promise<T> {
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
  if (jsonEqual(current, next)) return object;
  return mergePatch(kc, kind, object, { status: { conditions: next } }, 'status');
}

/**
 * Writes the `status` fields of `patch` that differ from the object's, guarded by its resourceVersion (a
 * stale cache fails with 409 and the key is reconciled again); nothing when none differs. Returns the object
 * as stored, or `object` when nothing was written.
 */
export async function writeChangedStatus<T extends KubeObject>(
  kc: KubeConfig,
  kind: KindDescriptor,
  object: T,
  patch: Record<string, unknown>,
): Promise<T> {
  const status = statusOf(object);
  if (Object.entries(patch).every(([k, v]) => jsonEqual(status[k] ?? null, v))) return object;
  const stored = await patchStatus(
    kc,
    { ...kind, namespace: object.metadata.namespace, name: object.metadata.name },
    { metadata: { resourceVersion: object.metadata.resourceVersion }, status: patch },
    { fieldManager: APPSTUDIO_FIELD_MANAGER },
  );
  return kindParser<T>(kind)(stored);
}
