/** Reads of the API server every backend reconciler needs; one copy instead of one per feature. */

import { Label } from '@gitops/api';
import {
  HttpMethod,
  type Informer,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
} from '@gitops/shared';
import { isJsonObject } from './json.ts';
import type { LabelSelector } from './label-selector.ts';

/** What a reconcile needs of a tenant's namespace. */
export interface TenantNamespace {
  /** The namespace uid (the tenant's identity). */
  uid: string;
  /** The engine instance its label asks for (`managed-gitops.redhat.com/engine-instance`), if any. */
  engineInstance: string | undefined;
}

/**
 * What a cache of namespaces keeps of each (its `transform`): name, uid, whether it is being deleted, and the
 * label `readTenantNamespace` reads. A few hundred bytes per namespace.
 */
export function namespaceIdentity(namespace: KubeObject): KubeObject {
  const { name, uid, resourceVersion, deletionTimestamp, labels } = namespace.metadata;
  const engineInstance = labels?.[Label.EngineInstance];
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      uid,
      resourceVersion,
      ...(deletionTimestamp ? { deletionTimestamp } : {}),
      ...(engineInstance === undefined ? {} : { labels: { [Label.EngineInstance]: engineInstance } }),
    },
  };
}

/**
 * A tenant's namespace. With `fromCache`, a cache's answer is taken: the process's own (`cache`, an informer of
 * namespaces kept as `namespaceIdentity`; no request at all), else the API server's watch cache
 * (`resourceVersion=0`: no etcd read); the read is repeated from etcd only when the caches have no such
 * namespace or one being deleted. A cached answer can be older than etcd, but a namespace's uid never changes,
 * and one deleted and created again under the same name was terminating for seconds first (so a stale cache
 * shows that). Never for deciding that a namespace is gone. @throws when the namespace has no uid or cannot be
 * read.
 */
export async function readTenantNamespace(
  kc: KubeConfig,
  namespace: string,
  signal: AbortSignal | undefined,
  options: { fromCache?: boolean; cache?: Pick<Informer<KubeObject>, 'get'> | undefined } = {},
): Promise<TenantNamespace> {
  const read = (fromCache: boolean) =>
    kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}`,
      ...(fromCache ? { query: { resourceVersion: '0' } } : {}),
      signal,
    });
  const metadataOf = (object: unknown) =>
    isJsonObject(object) && isJsonObject(object.metadata) ? object.metadata : {};
  let metadata: Record<string, unknown> | undefined;
  if (options.fromCache) {
    const cached =
      options.cache?.get(undefined, namespace) ??
      (await read(true).catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      }));
    const candidate = cached === undefined ? undefined : metadataOf(cached);
    if (candidate && !candidate.deletionTimestamp) metadata = candidate;
  }
  metadata ??= metadataOf(await read(false));
  const uid = metadata.uid;
  if (typeof uid !== 'string' || uid === '') throw new Error(`namespace ${namespace} has no uid`);
  const label = isJsonObject(metadata.labels) ? metadata.labels[Label.EngineInstance] : undefined;
  return { uid, engineInstance: typeof label === 'string' && label !== '' ? label : undefined };
}

/** The uid of a namespace (a tenant's identity). @throws when the namespace has none or cannot be read. */
export async function readNamespaceUid(
  kc: KubeConfig,
  namespace: string,
  signal?: AbortSignal,
): Promise<string> {
  return (await readTenantNamespace(kc, namespace, signal)).uid;
}

/** The uid of a namespace, or undefined when there is no such namespace. @throws when it cannot be read. */
export async function readNamespaceUidIfExists(
  kc: KubeConfig,
  namespace: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  try {
    return await readNamespaceUid(kc, namespace, signal);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** What a live read needs of a kind: where its objects are, and its parser (`CrKindDescriptor`). */
export interface ReadableKind<T extends KubeObject> {
  readonly resource: { readonly apiVersion: string; readonly plural: string };
  parse(raw: unknown): T;
}

/**
 * A custom resource from the cache; when absent there, confirmed with a live read (a replica's cache may
 * lag, and rows must never be deleted for an object that still exists), parsed as the informer parses it.
 * `undefined` = it does not exist; `null` = it exists but belongs to another backend shard (not ours to
 * reconcile). @throws when the answer is not an object of the kind (no proof that it is gone).
 */
export async function readCurrentObject<T extends KubeObject>(
  kc: KubeConfig,
  informer: Pick<Informer<T>, 'get'>,
  kind: ReadableKind<T>,
  ref: { namespace: string; name: string },
  options: { selector?: LabelSelector; signal: AbortSignal },
): Promise<T | undefined | null> {
  const cached = informer.get(ref.namespace, ref.name);
  if (cached) return cached;
  const { resource } = kind;
  try {
    const live = await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/apis/${resource.apiVersion}/namespaces/${encodeURIComponent(ref.namespace)}/${resource.plural}/${encodeURIComponent(ref.name)}`,
      signal: options.signal,
    });
    // An answer that is not an object is no proof that it is gone (rows would be deleted for it).
    if (!isJsonObject(live) || !isJsonObject(live.metadata) || typeof live.metadata.name !== 'string')
      throw new Error(
        `the API server answered ${ref.namespace}/${ref.name} with something that is not an object`,
      );
    const object = kind.parse(live);
    if (options.selector && !options.selector.matches(object.metadata.labels)) return null;
    return object;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * The uid of the object `namespace/name` of `kind` now, read live (never from a cache): `undefined` when there is
 * none. The proof that rows of another uid of that name, read before this call, are a gone object's: a uid never
 * comes back. @throws when the answer is not an object of the kind.
 */
export async function readLiveUid<T extends KubeObject>(
  kc: KubeConfig,
  kind: ReadableKind<T>,
  ref: { namespace: string; name: string },
  signal: AbortSignal,
): Promise<string | undefined> {
  const live = await readCurrentObject(kc, { get: () => undefined }, kind, ref, { signal });
  return live?.metadata.uid;
}

/**
 * `readCurrentObject` bound to one kind's cache and this backend's shard: what every CR reconciler calls with
 * the key it was given. Another shard's object is `null`: left alone, never taken for gone (the shard rule,
 * `kinds.ts`).
 */
export function currentObjectReader<T extends KubeObject>(
  kc: KubeConfig,
  informer: Pick<Informer<T>, 'get'>,
  kind: ReadableKind<T>,
  selector: LabelSelector | undefined,
): (namespace: string, name: string, signal: AbortSignal) => Promise<T | undefined | null> {
  return async (namespace, name, signal) =>
    await readCurrentObject(kc, informer, kind, { namespace, name }, { selector, signal });
}
