/**
 * Kubernetes objects: the part of them every helper relies on (`KubeObject`, `ObjectRef`), their queue keys,
 * their paths and kinds (`objectPath`, `kindParser`), and reading and writing one (`getObject`, `getPathIfExists`,
 * `createUnlessExists`, `createObject`, `serverSideApply`, `mergePatch`, `patchStatus`, `deleteIfExists`, `clusterIdentity`). The requests go
 * through the client in kube-client.ts; Events through kube-events.ts.
 */
import { HttpMethod, PatchStrategy } from '@kubernetes/client-node';
import {
  ErrorCode,
  isAlreadyExists,
  isNotFound,
  KubeApiError,
  RetryableError,
  TerminalError,
} from './errors.ts';
import { isJsonObject } from './json.ts';
import { collectionPath, type KubeConfig, kubeRequest, resolveResource } from './kube-client.ts';
import type { Logger } from './logger.ts';

/** The part of a Kubernetes object every helper relies on. Parse the rest at the consumer. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
    managedFields?: unknown[];
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

/** Identifies one object. `namespace` is omitted for cluster-scoped kinds. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

/** True for a plain object with `metadata.name` (the minimum the helpers need). */
export function isKubeObject(value: unknown): value is KubeObject {
  if (typeof value !== 'object' || value === null) return false;
  const metadata = (value as { metadata?: unknown }).metadata;
  return (
    typeof metadata === 'object' &&
    metadata !== null &&
    typeof (metadata as { name?: unknown }).name === 'string'
  );
}

/** The queue key of an object: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(object: Pick<KubeObject, 'metadata'>): string {
  const { namespace, name } = object.metadata;
  return namespace ? `${namespace}/${name}` : name;
}

/** Splits a queue key made by `objectKey`. */
export function splitObjectKey(key: string): { namespace: string | undefined; name: string } {
  const slash = key.indexOf('/');
  return slash < 0
    ? { namespace: undefined, name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** The path of one object (plus an optional subresource such as `status`). */
export async function objectPath(kc: KubeConfig, ref: ObjectRef, subresource?: string): Promise<string> {
  const { plural, namespaced } = await resolveResource(kc, ref.apiVersion, ref.kind);
  if (namespaced && !ref.namespace) {
    throw new TerminalError(
      ErrorCode.invalidObject,
      `${ref.kind} ${ref.name} is namespaced but has no namespace`,
    );
  }
  const base = collectionPath({
    apiVersion: ref.apiVersion,
    plural,
    namespace: namespaced ? ref.namespace : undefined,
  });
  return `${base}/${encodeURIComponent(ref.name)}${subresource ? `/${subresource}` : ''}`;
}

/** What the two helpers below need of a kind descriptor (`@gitops/api`'s `KindDescriptor`). */
export interface TypeMeta {
  readonly apiVersion: string;
  readonly kind: string;
}

/** The `ObjectRef` of an object of a known kind (list and watch items may lack apiVersion/kind). */
export function refOfKind(type: TypeMeta, object: KubeObject): ObjectRef {
  return {
    apiVersion: type.apiVersion,
    kind: type.kind,
    name: object.metadata.name,
    namespace: object.metadata.namespace,
  };
}

/** The object with apiVersion/kind of its known kind set (Events and owner references need them). */
export function withTypeMeta(type: TypeMeta, object: KubeObject): KubeObject {
  return { ...object, apiVersion: type.apiVersion, kind: type.kind };
}

/**
 * An informer's `parse` hook for the objects of one kind, typed `T` (a kind's generated type): gives each
 * the apiVersion and kind a list's items lack, and refuses one without a name or whose spec or status is
 * not an object (the informer leaves it out of its cache and logs it). The API server has checked the rest
 * against the CRD schema the type is generated from.
 */
export function kindParser<T extends KubeObject>(type: TypeMeta): (raw: unknown) => T {
  return (raw) => {
    if (!isKubeObject(raw)) throw new Error('object has no metadata.name');
    for (const field of ['spec', 'status'] as const) {
      const value = raw[field];
      if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value)))
        throw new Error(`${field} is not an object`);
    }
    return { ...raw, apiVersion: type.apiVersion, kind: type.kind } as T;
  };
}

/** The `ObjectRef` of Secret `name` in `namespace`. */
export function secretRef(namespace: string, name: string): ObjectRef {
  return { apiVersion: 'v1', kind: 'Secret', name, namespace };
}

/** The `ObjectRef` of an object that carries apiVersion and kind. */
export function refOf(object: KubeObject): ObjectRef {
  if (typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') {
    throw new TerminalError(ErrorCode.invalidObject, `object ${objectKey(object)} has no apiVersion/kind`);
  }
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    name: object.metadata.name,
    namespace: object.metadata.namespace,
  };
}

function asKubeObject(value: unknown, what: string): KubeObject {
  if (!isKubeObject(value))
    throw new RetryableError(ErrorCode.kubeRequestFailed, `${what}: unexpected answer`);
  return value;
}

// ---- object helpers -------------------------------------------------------------------------------

/**
 * Reads one object; `undefined` when it does not exist. `parse` (e.g. kindParser) types it as the informers
 * of its kind do.
 */
export async function getObject<T extends KubeObject = KubeObject>(
  kc: KubeConfig,
  ref: ObjectRef,
  options: { signal?: AbortSignal; parse?: (raw: unknown) => T } = {},
): Promise<T | undefined> {
  try {
    const path = await objectPath(kc, ref);
    const answer = await kubeRequest(kc, { method: HttpMethod.GET, path, signal: options.signal });
    return options.parse ? options.parse(answer) : (asKubeObject(answer, path) as T);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * The answer of a GET of the API path `path` (unparsed: the caller checks it), or undefined when nothing is
 * there (404). `getObject` is the same for a reference, its path looked up.
 */
export async function getPathIfExists(kc: KubeConfig, path: string, signal?: AbortSignal): Promise<unknown> {
  try {
    return await kubeRequest(kc, { method: HttpMethod.GET, path, signal });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * POSTs `body` to the collection at `path`; an object of that name already there (409 AlreadyExists: an
 * earlier attempt made it, or someone else did) is left as it is.
 */
export async function createUnlessExists(
  kc: KubeConfig,
  path: string,
  body: unknown,
  signal?: AbortSignal,
): Promise<void> {
  try {
    await kubeRequest(kc, { method: HttpMethod.POST, path, body, signal });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
}

/**
 * Creates `object` (a POST to its collection) as `fieldManager` and returns it as created. An object of that
 * name already there fails with 409 AlreadyExists (`isAlreadyExists`). The create's managedFields entry is an
 * Update of `fieldManager`, not an Apply: a later server-side apply by the same manager does not remove a field
 * only the create set (the caller removes those itself). The API server does less work than for an apply that
 * creates (no YAML decode, no apply merge), which is why the agent creates Applications this way.
 */
export async function createObject(
  kc: KubeConfig,
  object: KubeObject,
  options: { fieldManager: string; signal?: AbortSignal },
): Promise<KubeObject> {
  const path = await objectPath(kc, refOf(object));
  const collection = path.slice(0, path.lastIndexOf('/'));
  const { managedFields: _managedFields, resourceVersion: _resourceVersion, ...metadata } = object.metadata;
  const body = await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: collection,
    query: { fieldManager: options.fieldManager },
    body: { ...object, metadata },
    signal: options.signal,
  });
  return asKubeObject(body, path);
}

/**
 * A token of ServiceAccount `name` in `namespace` from the TokenRequest API, asked for `expirationSeconds`
 * (the API server may cap it). Throws when the answer holds no token.
 */
export async function requestServiceAccountToken(
  kc: KubeConfig,
  { namespace, name }: { namespace: string; name: string },
  expirationSeconds: number,
  signal?: AbortSignal,
): Promise<string> {
  const answer = await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds } },
    ...(signal ? { signal } : {}),
  });
  const token = isJsonObject(answer) && isJsonObject(answer.status) ? answer.status.token : undefined;
  if (typeof token !== 'string' || token === '')
    throw new Error(`the TokenRequest of ${namespace}/${name} returned no token`);
  return token;
}

/**
 * What identifies the cluster behind `kc` across API server URLs: kube-system's uid, or the API server URL
 * when kube-system is not readable (RBAC: 403) or not there. Recorded as `engine_instance.cluster_identity`.
 * Any other failure (the API server away or restarting, a timeout, a 5xx) is thrown, to be retried: the URL
 * in its place would be another cluster's identity, and a registered instance's agent would be refused as
 * running on another cluster (issue 37).
 */
export async function clusterIdentity(kc: KubeConfig, options: { logger?: Logger } = {}): Promise<string> {
  try {
    const kubeSystem = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: 'kube-system' });
    if (kubeSystem?.metadata.uid) return kubeSystem.metadata.uid;
  } catch (err) {
    if (!(err instanceof KubeApiError && err.statusCode === 403)) throw err;
    options.logger?.debug(
      { err },
      'kube-system is not readable; using the API server URL as cluster identity',
    );
  }
  return kc.getCurrentCluster()?.server ?? 'unknown';
}

export interface ServerSideApplyOptions {
  /** Our own field manager (never another tool's), e.g. `gitops-cluster-agent`. */
  fieldManager: string;
  /** Take ownership of fields another manager owns instead of failing with a conflict. */
  force?: boolean;
  dryRun?: boolean;
  /**
   * A precondition: the apply is refused (409 Conflict, nothing written) unless the object is at this
   * `resourceVersion`. The object's own `metadata.resourceVersion` is never sent.
   */
  resourceVersion?: string;
  signal?: AbortSignal;
}

/**
 * Server-side apply (`PATCH` with `application/apply-patch+yaml`; JSON is YAML): the object
 * becomes exactly what `fieldManager` declares for the fields it owns. Returns the live object.
 * `metadata.managedFields` and `metadata.resourceVersion` of the input are not sent (see `resourceVersion`).
 */
export async function serverSideApply(
  kc: KubeConfig,
  object: KubeObject,
  options: ServerSideApplyOptions,
): Promise<KubeObject> {
  const path = await objectPath(kc, refOf(object));
  const { managedFields: _managedFields, resourceVersion: _resourceVersion, ...metadata } = object.metadata;
  const body = await kubeRequest(kc, {
    method: HttpMethod.PATCH,
    path,
    query: {
      fieldManager: options.fieldManager,
      force: options.force ? true : undefined,
      dryRun: options.dryRun ? 'All' : undefined,
    },
    body: {
      ...object,
      metadata: options.resourceVersion
        ? { ...metadata, resourceVersion: options.resourceVersion }
        : metadata,
    },
    contentType: PatchStrategy.ServerSideApply,
    signal: options.signal,
  });
  return asKubeObject(body, path);
}

/**
 * JSON merge patch (RFC 7386) of an object, or of its `status` subresource. Include
 * `metadata.resourceVersion` in the patch for optimistic concurrency (a stale one fails with 409); `null`
 * members delete. `createMergePatch` (json.ts) computes one from two documents.
 */
export async function mergePatch(
  kc: KubeConfig,
  ref: ObjectRef,
  patch: Record<string, unknown>,
  options: { fieldManager?: string; signal?: AbortSignal; subresource?: 'status' } = {},
): Promise<KubeObject> {
  const path = await objectPath(kc, ref, options.subresource);
  const body = await kubeRequest(kc, {
    method: HttpMethod.PATCH,
    path,
    query: { fieldManager: options.fieldManager },
    body: patch,
    contentType: PatchStrategy.MergePatch,
    signal: options.signal,
  });
  return asKubeObject(body, path);
}

/** JSON merge patch of the `/status` subresource (`mergePatch` with `subresource: 'status'`). */
export async function patchStatus(
  kc: KubeConfig,
  ref: ObjectRef,
  patch: Record<string, unknown>,
  options: { fieldManager?: string; signal?: AbortSignal } = {},
): Promise<KubeObject> {
  return mergePatch(kc, ref, patch, { ...options, subresource: 'status' });
}

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  /** Delete only this incarnation of the object (a recreated object with the same name has a new uid). */
  uid?: string;
  /**
   * Delete only this version of the object: one changed since it was looked at is refused with 409 (isConflict),
   * so the caller decides again on what it is now.
   */
  resourceVersion?: string;
  signal?: AbortSignal;
}

/**
 * Deletes an object. Returns true when a delete was accepted (the object may linger while
 * finalizers run), false when it did not exist.
 */
export async function deleteIfExists(
  kc: KubeConfig,
  ref: ObjectRef,
  options: DeleteOptions = {},
): Promise<boolean> {
  try {
    const path = await objectPath(kc, ref);
    await kubeRequest(kc, {
      method: HttpMethod.DELETE,
      path,
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        propagationPolicy: options.propagationPolicy,
        preconditions:
          options.uid || options.resourceVersion
            ? { uid: options.uid, resourceVersion: options.resourceVersion }
            : undefined,
      },
      signal: options.signal,
    });
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}
