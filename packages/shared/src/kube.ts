/**
 * Kubernetes helpers on top of `@kubernetes/client-node` 2.x.
 *
 * Requests use client-node's KubeConfig (authentication, and the undici dispatcher it builds from the TLS and
 * proxy settings, kept per KubeConfig) and `KubernetesObjectApi`'s discovery cache; they are sent with
 * undici's `request()` on that one dispatcher. Bodies stay plain JSON: client-node's typed serializer would turn
 * timestamps into `Date`s and drop fields it does not know, while watch events arrive as plain
 * JSON. Everything read from the API server is `unknown` until a consumer parses it.
 */
import { hostname } from 'node:os';
import {
  ApiException,
  HttpMethod,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  RequestContext,
} from '@kubernetes/client-node';
import { type Dispatcher, getGlobalDispatcher } from 'undici';
import { ErrorCode, isNotFound, KubeApiError, RetryableError, TerminalError } from './errors.ts';
import { type Logger, scrubString } from './logger.ts';

export { HttpMethod, KubeConfig } from '@kubernetes/client-node';

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

/**
 * Loads a kubeconfig: from `path` when given, else the client-go order (`KUBECONFIG`,
 * `~/.kube/config`, the in-cluster service account). `options.context` selects that context of it instead of
 * its `current-context` (kubectl's `--context`).
 * @throws TerminalError KUBECONFIG_INVALID when it cannot be read, has no such context, or has no current cluster.
 */
export function loadKubeConfig(path?: string, options: { context?: string } = {}): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (path) kc.loadFromFile(path);
    else kc.loadFromDefault();
  } catch (err) {
    throw new TerminalError(ErrorCode.kubeconfigInvalid, `cannot load kubeconfig ${path ?? '(default)'}`, {
      cause: err,
    });
  }
  if (options.context !== undefined) {
    if (!kc.getContextObject(options.context)) {
      const names = kc.getContexts().map((c) => c.name);
      throw new TerminalError(
        ErrorCode.kubeconfigInvalid,
        `kubeconfig ${path ?? '(default)'} has no context "${options.context}" (it has: ${names.join(', ') || 'none'})`,
      );
    }
    kc.setCurrentContext(options.context);
  }
  if (!kc.getCurrentCluster()) {
    throw new TerminalError(
      ErrorCode.kubeconfigInvalid,
      `kubeconfig ${path ?? '(default)'} has no current cluster`,
    );
  }
  return kc;
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

/** `/api/v1` or `/apis/<group>/<version>`. */
export function apiVersionPath(apiVersion: string): string {
  return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

/** The collection path of a resource, e.g. `/api/v1/namespaces/jane/configmaps`. */
export function collectionPath(resource: { apiVersion: string; plural: string; namespace?: string }): string {
  const ns = resource.namespace ? `/namespaces/${encodeURIComponent(resource.namespace)}` : '';
  return `${apiVersionPath(resource.apiVersion)}${ns}/${resource.plural}`;
}

export interface KubeRequest {
  method: HttpMethod;
  /** Absolute API path, e.g. `/api/v1/namespaces/x/configmaps/y`. */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** Serialized as JSON. */
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Default 30 s; watches pass 0 (no client-side timeout). */
  timeoutMs?: number;
}

const defaultRequestTimeoutMs = 30_000;
/** Authentication headers are recomputed at most this often (a rotated token file is re-read by then), and
 * after a 401. */
const AUTH_HEADERS_TTL_MS = 10_000;

interface Transport {
  /** One pooled undici dispatcher (keep-alive, HTTP/2 when the server offers it) for every request. */
  readonly dispatcher: Dispatcher;
  readonly origin: string;
  /** The server URL's own path (a proxy may serve the API under one), without a trailing slash. */
  readonly pathPrefix: string;
  headers?: { value: Record<string, string>; until: number };
}
const transports = new WeakMap<KubeConfig, Promise<Transport>>();

/**
 * The transport of a KubeConfig, built on first use. client-node builds the dispatcher (TLS material,
 * `insecure-skip-tls-verify`, `tls-server-name`, HTTP and SOCKS proxies) in `applySecurityAuthentication`,
 * but a fresh one for every request, each with its own connections, and sends through WHATWG fetch: under
 * load that per-request pool, its destruction and fetch's stream machinery were a tenth of each service's
 * CPU. The first dispatcher is kept and requests go through its `request()` directly.
 */
function transportOf(kc: KubeConfig, server: string): Promise<Transport> {
  let transport = transports.get(kc);
  if (!transport) {
    transport = (async () => {
      const url = new URL(server);
      const context = new RequestContext(server, HttpMethod.GET);
      await kc.applySecurityAuthentication(context);
      const dispatcher = (context.getDispatcher() as Dispatcher | undefined) ?? getGlobalDispatcher();
      return { dispatcher, origin: url.origin, pathPrefix: url.pathname.replace(/\/+$/, '') };
    })();
    transport.catch(() => transports.delete(kc));
    transports.set(kc, transport);
  }
  return transport;
}

/** The KubeConfig's authentication headers (token, exec or OIDC plugin, basic auth, impersonation). */
async function authHeaders(kc: KubeConfig, transport: Transport): Promise<Record<string, string>> {
  const now = Date.now();
  if (transport.headers && transport.headers.until > now) return transport.headers.value;
  const options: { headers?: Record<string, unknown>; auth?: string } = {};
  await kc.applyToHTTPSOptions(options);
  const value: Record<string, string> = {};
  for (const [name, header] of Object.entries(options.headers ?? {}))
    value[name.toLowerCase()] = String(header);
  if (options.auth) value.authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
  transport.headers = { value, until: now + AUTH_HEADERS_TTL_MS };
  return value;
}

interface KubeResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData['body'];
}

async function send(kc: KubeConfig, request: KubeRequest): Promise<KubeResponse> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new TerminalError(ErrorCode.kubeconfigInvalid, 'kubeconfig has no current cluster');
  let transport: Transport;
  let auth: Record<string, string>;
  try {
    transport = await transportOf(kc, cluster.server);
    auth = await authHeaders(kc, transport);
  } catch (err) {
    throw transportError(request, err);
  }
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(request.query ?? {})) {
    if (value !== undefined) query.set(name, String(value));
  }
  const search = query.size > 0 ? `?${query}` : '';
  const headers: Record<string, string> = {
    accept: 'application/json',
    'user-agent': 'gitops-service',
    ...auth,
  };
  if (request.body !== undefined) headers['content-type'] = request.contentType ?? 'application/json';
  const timeoutMs = request.timeoutMs ?? defaultRequestTimeoutMs;
  let response: KubeResponse;
  try {
    response = await transport.dispatcher.request({
      origin: transport.origin,
      path: `${transport.pathPrefix}${request.path}${search}`,
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      signal: request.signal,
      // The answer's headers come at once even for a watch; its body may then be silent for minutes.
      headersTimeout: defaultRequestTimeoutMs,
      bodyTimeout: timeoutMs,
      // HTTP/1.1, not HTTP/2 (undici offers h2 by default and the API server accepts it). Aborting requests on
      // a shared h2 session at shutdown sometimes sent the process into a loop of RST_STREAM writes in Node's
      // http2 (gdb: Http2Stream::RstStream → SendPendingData → CopyDataIntoOutgoing) that grew it to 20 GB
      // until std::bad_alloc: the backend main test's exit on SIGTERM failed in loaded full runs and in CI.
      // Each watch then has a connection of its own, as client-go's HTTP/1.1 transport does.
      allowH2: false,
    } as Dispatcher.RequestOptions);
  } catch (err) {
    if (request.signal?.aborted) throw request.signal.reason ?? err;
    throw transportError(request, err);
  }
  // Refused credentials (e.g. a token that expired since the headers were taken): the next request takes
  // them afresh.
  if (response.statusCode === 401) transport.headers = undefined;
  return response;
}

/** A transport error's text, scrubbed: fetch quotes a header value it refuses (e.g. a token with a line break). */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return scrubString(String(err));
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return scrubString(`${err.message}${cause}`);
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function apiError(request: KubeRequest, statusCode: number, body: unknown): KubeApiError {
  const status =
    typeof body === 'object' && body !== null
      ? (body as { message?: unknown; reason?: unknown; details?: { causes?: unknown } })
      : {};
  const detail = typeof status.message === 'string' ? status.message : typeof body === 'string' ? body : '';
  const causes = Array.isArray(status.details?.causes) ? status.details.causes : [];
  return new KubeApiError({
    statusCode,
    reason: typeof status.reason === 'string' ? status.reason : undefined,
    causes: causes.flatMap((cause: unknown) => {
      const reason = (cause as { reason?: unknown } | null)?.reason;
      return typeof reason === 'string' ? [reason] : [];
    }),
    statusMessage: detail,
    method: request.method,
    path: request.path,
    message: `${request.method} ${request.path}: ${statusCode} ${detail}`.trim(),
  });
}

/**
 * One request to the API server; returns the parsed JSON body.
 * @throws KubeApiError for a non-2xx answer (statusCode set) or a failed connection (statusCode 0).
 */
export async function kubeRequest(kc: KubeConfig, request: KubeRequest): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    const response = await send(kc, request);
    const body = parseJson(await readBody(request, response));
    if (response.statusCode >= 200 && response.statusCode <= 299) return body;
    // 429 means the API server did not process the request (priority and fairness, or a CRD's storage
    // re-initialising): like client-go, wait as told by Retry-After and send it again, a bounded number of times.
    if (response.statusCode === 429 && attempt < maxThrottledAttempts && !request.signal?.aborted) {
      const retryAfter = response.headers['retry-after'];
      const retryAfterSeconds = Number((Array.isArray(retryAfter) ? retryAfter[0] : retryAfter) ?? '1');
      const delayMs = Math.min(Number.isFinite(retryAfterSeconds) ? retryAfterSeconds * 1000 : 1000, 10_000);
      await new Promise((resolveDelay) => setTimeout(resolveDelay, Math.max(delayMs, 100)));
      continue;
    }
    throw apiError(request, response.statusCode, body);
  }
}

/** client-go retries a throttled request up to 10 times; we give up a little sooner. */
const maxThrottledAttempts = 6;

/**
 * A streaming GET (watches): resolves once the API server answered 200, with the body as a Node stream of
 * Buffers. Abort `request.signal` (or destroy the stream) to close it.
 */
export async function kubeStream(kc: KubeConfig, request: Omit<KubeRequest, 'method' | 'body'>) {
  const fullRequest: KubeRequest = { ...request, method: HttpMethod.GET, timeoutMs: request.timeoutMs ?? 0 };
  const response = await send(kc, fullRequest);
  if (response.statusCode !== 200) {
    throw apiError(fullRequest, response.statusCode, parseJson(await readBody(fullRequest, response)));
  }
  return response.body;
}

/** The whole body as text; a connection lost while reading is a KubeApiError like one lost before. */
async function readBody(request: KubeRequest, response: KubeResponse): Promise<string> {
  try {
    return await response.body.text();
  } catch (err) {
    if (request.signal?.aborted) throw request.signal.reason ?? err;
    throw transportError(request, err);
  }
}

/** A request that got no answer (connection refused or lost, timeout, TLS): status code 0. */
function transportError(request: KubeRequest, err: unknown): KubeApiError {
  return new KubeApiError(
    {
      statusCode: 0,
      method: request.method,
      path: request.path,
      message: `${request.method} ${request.path}: ${describe(err)}`,
    },
    { cause: err },
  );
}

// ---- discovery ------------------------------------------------------------------------------------

/** Exposes KubernetesObjectApi's cached discovery (`resource()` is protected there). */
class DiscoveryClient extends KubernetesObjectApi {
  lookup(apiVersion: string, kind: string) {
    return this.resource(apiVersion, kind);
  }
}

const discoveryClients = new WeakMap<KubeConfig, DiscoveryClient>();

/** The plural name and scope of `kind` in `apiVersion`, from API discovery (cached per KubeConfig). */
export async function resolveResource(
  kc: KubeConfig,
  apiVersion: string,
  kind: string,
): Promise<{ plural: string; namespaced: boolean }> {
  let client = discoveryClients.get(kc);
  if (!client) {
    client = kc.makeApiClient(DiscoveryClient);
    discoveryClients.set(kc, client);
  }
  let resource: Awaited<ReturnType<DiscoveryClient['lookup']>>;
  try {
    resource = await client.lookup(apiVersion, kind);
  } catch (err) {
    const code = err instanceof ApiException ? err.code : 0;
    throw new KubeApiError(
      {
        statusCode: code,
        method: 'GET',
        path: apiVersionPath(apiVersion),
        message: `discovery of ${apiVersion} ${kind}: ${describe(err)}`,
      },
      { cause: err },
    );
  }
  // A CRD may be installed later: retryable.
  if (!resource)
    throw new RetryableError(
      ErrorCode.kubeUnknownKind,
      `the API server does not serve ${kind} in ${apiVersion}`,
    );
  return { plural: resource.name, namespaced: resource.namespaced };
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
  signal?: AbortSignal;
}

/**
 * Server-side apply (`PATCH` with `application/apply-patch+yaml`; JSON is YAML): the object
 * becomes exactly what `fieldManager` declares for the fields it owns. Returns the live object.
 * `metadata.managedFields` and `metadata.resourceVersion` of the input are not sent.
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
    body: { ...object, metadata },
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
        preconditions: options.uid ? { uid: options.uid } : undefined,
      },
      signal: options.signal,
    });
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

// ---- events ---------------------------------------------------------------------------------------

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  /**
   * Records an Event on `involved` (best effort: failures are logged, never thrown). The same
   * event repeated bumps `count` and `lastTimestamp` of the existing Event instead of adding one.
   */
  event(involved: KubeObject, type: EventType, reason: string, message: string): Promise<void>;
}

export interface EventRecorderOptions {
  /** `source.component` / `reportingComponent`, e.g. `gitops-backend`. */
  component: string;
  /** Default: the host name (the pod name in a cluster). */
  instance?: string;
  logger?: Logger;
  /** Remembered events for de-duplication (least recently used are forgotten). Default 4096. */
  cacheSize?: number;
  /** Wall clock for timestamps; tests may pin it. */
  now?: () => Date;
}

/** client-go caps messages at 1 KiB for events.k8s.io; we do the same for core/v1. */
const maxEventMessageLength = 1024;

/** Creates an Events recorder that writes core/v1 Events. */
export function createEventRecorder(kc: KubeConfig, options: EventRecorderOptions): EventRecorder {
  const instance = options.instance ?? hostname();
  const cacheSize = options.cacheSize ?? 4096;
  const now = options.now ?? (() => new Date());
  const recent = new Map<string, { namespace: string; name: string; count: number }>();
  const inFlight = new Map<string, Promise<void>>();

  const timestamp = () =>
    now()
      .toISOString()
      .replace(/\.\d{3}Z$/, 'Z');

  async function write(involved: KubeObject, type: EventType, reason: string, message: string, key: string) {
    const namespace = involved.metadata.namespace ?? 'default';
    const previous = recent.get(key);
    if (previous) {
      recent.delete(key);
      try {
        await kubeRequest(kc, {
          method: HttpMethod.PATCH,
          path: `/api/v1/namespaces/${encodeURIComponent(previous.namespace)}/events/${encodeURIComponent(previous.name)}`,
          body: { count: previous.count + 1, lastTimestamp: timestamp() },
          contentType: PatchStrategy.MergePatch,
        });
        recent.set(key, { ...previous, count: previous.count + 1 });
        return;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        // The Event expired (the API server keeps them 1 h by default): create a new one.
      }
    }
    const suffix = (
      BigInt(now().getTime()) * 1_000_000n +
      BigInt(Math.floor(Math.random() * 1_000_000))
    ).toString(16);
    const name = `${involved.metadata.name.slice(0, 253 - suffix.length - 1)}.${suffix}`;
    const time = timestamp();
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: involved.apiVersion,
          kind: involved.kind,
          name: involved.metadata.name,
          namespace: involved.metadata.namespace,
          uid: involved.metadata.uid,
          resourceVersion: involved.metadata.resourceVersion,
        },
        type,
        reason,
        message,
        count: 1,
        firstTimestamp: time,
        lastTimestamp: time,
        source: { component: options.component, host: instance },
        reportingComponent: options.component,
        reportingInstance: instance,
      },
    });
    recent.set(key, { namespace, name, count: 1 });
    while (recent.size > cacheSize) {
      const oldest = recent.keys().next().value;
      if (oldest === undefined) break;
      recent.delete(oldest);
    }
  }

  return {
    async event(involved, type, reason, rawMessage) {
      const message =
        rawMessage.length > maxEventMessageLength
          ? `${rawMessage.slice(0, maxEventMessageLength - 3)}...`
          : rawMessage;
      const identity = involved.metadata.uid ?? `${involved.kind}/${objectKey(involved)}`;
      const key = JSON.stringify([identity, type, reason, message]);
      // Serialise writes of one event so concurrent repeats bump the count instead of racing to create.
      const previous = inFlight.get(key) ?? Promise.resolve();
      const current = previous
        .then(() => write(involved, type, reason, message, key))
        .catch((err: unknown) => {
          options.logger?.warn({ err, reason, involved: objectKey(involved) }, 'could not record event');
        });
      inFlight.set(key, current);
      await current;
      if (inFlight.get(key) === current) inFlight.delete(key);
    },
  };
}
