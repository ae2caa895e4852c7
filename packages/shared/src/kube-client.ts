/**
 * The client of the API server, on top of `@kubernetes/client-node` 2.x: loading a kubeconfig, one request
 * (`kubeRequest`) or one stream (`kubeStream`), the API paths of a resource, and API discovery
 * (`resolveResource`). What is sent and read are Kubernetes objects: kube.ts.
 *
 * Requests use client-node's KubeConfig (authentication, and the undici dispatcher it builds from the TLS and
 * proxy settings, kept per KubeConfig) and `KubernetesObjectApi`'s discovery cache; they are sent with
 * undici's `request()` on that one dispatcher. Bodies stay plain JSON: client-node's typed serializer would turn
 * timestamps into `Date`s and drop fields it does not know, while watch events arrive as plain
 * JSON. Everything read from the API server is `unknown` until a consumer parses it.
 */
import {
  ApiException,
  HttpMethod,
  KubeConfig,
  KubernetesObjectApi,
  RequestContext,
} from '@kubernetes/client-node';
import { type Dispatcher, getGlobalDispatcher } from 'undici';
import { ErrorCode, KubeApiError, RetryableError, TerminalError } from './errors.ts';
import { scrubString } from './logger.ts';

export { HttpMethod, KubeConfig } from '@kubernetes/client-node';

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
