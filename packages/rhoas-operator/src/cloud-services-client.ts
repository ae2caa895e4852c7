/**
 * The operator's client of the cloud services: the SSO refresh-token exchange and the five management
 * calls it makes, on the global `fetch`, with a per-request timeout. Every failure is a
 * {@link CloudServicesError} that says what kind of failure it was (HTTP status, unreachable, no answer in
 * time, malformed body) and carries the `reason` of the API's JSON error body; it never carries a token.
 * Base URLs: `CLOUD_SERVICES_API` (management APIs) and `CLOUD_SERVICES_SSO` (the SSO realm).
 */
import { isTransientStatus } from '@gitops/shared';

export const KAFKAS_PATH = '/api/kafkas_mgmt/v1/kafkas';
export const SERVICE_ACCOUNTS_PATH = '/api/kafkas_mgmt/v1/service_accounts';
export const REGISTRIES_PATH = '/api/serviceregistry_mgmt/v1/registries';
/** Path of the token endpoint below the SSO realm URL, and the OAuth client of the original. */
export const TOKEN_ENDPOINT_PATH = '/protocol/openid-connect/token';
export const SSO_CLIENT_ID = 'cloud-services';
/** Longest error body kept for a message (the SSO's error body goes into a condition message). */
const MAX_ERROR_BODY = 500;

export type CloudServicesFailure = 'http' | 'unreachable' | 'timeout' | 'malformed';

export class CloudServicesError extends Error {
  readonly failure: CloudServicesFailure;
  /** HTTP status when `failure` is `http`. */
  readonly status: number | undefined;
  /** The `reason` of the JSON error body, `''` when there is none. */
  readonly reason: string;
  /** The response body (truncated), for the SSO's `Exchange token failed with error <body>`. */
  readonly body: string;

  constructor(
    failure: CloudServicesFailure,
    message: string,
    fields: { status?: number; reason?: string; body?: string } = {},
  ) {
    super(message);
    this.name = 'CloudServicesError';
    this.failure = failure;
    this.status = fields.status;
    this.reason = fields.reason ?? '';
    this.body = fields.body ?? '';
  }

  /** Network errors, no answer in time, 5xx and 429 are retried; 4xx and malformed answers are not. */
  get transient(): boolean {
    if (this.failure === 'unreachable' || this.failure === 'timeout') return true;
    return this.failure === 'http' && this.status !== undefined && isTransientStatus(this.status);
  }
}

export interface Kafka {
  id: string;
  name: string;
  owner: string;
  status: string;
  cloudProvider: string;
  region: string;
  bootstrapServerHost: string;
  createdAt: string;
  updatedAt: string;
}

export interface Registry {
  id: string;
  name: string;
  status: string;
  registryUrl: string;
  updatedAt: string;
}

export interface ServiceAccount {
  id: string;
  clientId: string;
  clientSecret: string;
}

export interface CloudServicesClient {
  /** Swaps an offline (refresh) token for an access token. */
  exchangeToken(offlineToken: string, signal?: AbortSignal): Promise<string>;
  listKafkas(accessToken: string, signal?: AbortSignal): Promise<Kafka[]>;
  getKafka(accessToken: string, id: string, signal?: AbortSignal): Promise<Kafka>;
  createServiceAccount(
    accessToken: string,
    request: { name: string; description: string },
    signal?: AbortSignal,
  ): Promise<ServiceAccount>;
  listRegistries(accessToken: string, signal?: AbortSignal): Promise<Registry[]>;
  getRegistry(accessToken: string, id: string, signal?: AbortSignal): Promise<Registry>;
}

export interface CloudServicesClientOptions {
  /** `CLOUD_SERVICES_API`. */
  apiUrl: string;
  /** `CLOUD_SERVICES_SSO`: the realm URL; the token endpoint is below it. */
  ssoUrl: string;
  /** Per request, headers and body included. */
  timeoutMs: number;
  fetch?: typeof fetch;
}

const str = (value: unknown): string => (typeof value === 'string' ? value : '');
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const record = (value: unknown): Record<string, unknown> => (isObject(value) ? value : {});

/**
 * The parsers of 2xx answers, at the boundary: an answer is used only when it is the promised object, with
 * the fields the operator reads of the right types; anything else is a `malformed` CloudServicesError that
 * names the field and the type it found (never a value: an answer may hold a secret). Fields the operator
 * does not read are not checked.
 */
const jsonType = (value: unknown) =>
  value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;

function objectAnswer(what: string, value: unknown, at = ''): Record<string, unknown> {
  if (isObject(value)) return value;
  throw new CloudServicesError(
    'malformed',
    `${what}: ${at ? `${at} is` : 'the answer is'} not a JSON object`,
  );
}

/** A string the operator cannot do without (an id, a credential): present and not empty. */
function requiredString(what: string, fields: Record<string, unknown>, key: string, at: string): string {
  const value = fields[key];
  if (typeof value === 'string' && value !== '') return value;
  throw new CloudServicesError(
    'malformed',
    `${what}: ${at}${key} is not a non-empty string (${jsonType(value)})`,
  );
}

/** A string the contract lets the service leave out (absent or null reads as `''`). */
function optionalString(what: string, fields: Record<string, unknown>, key: string, at: string): string {
  const value = fields[key];
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  throw new CloudServicesError('malformed', `${what}: ${at}${key} is not a string (${jsonType(value)})`);
}

function itemsOf(what: string, body: unknown): unknown[] {
  const list = objectAnswer(what, body).items;
  if (!Array.isArray(list))
    throw new CloudServicesError('malformed', `${what}: items is not a list (${jsonType(list)})`);
  return list;
}

/** A Kafka instance (`KafkaRequest`): `id` required, the other fields the operator reads optional strings. */
function parseKafka(what: string, value: unknown, at = ''): Kafka {
  const k = objectAnswer(what, value, at.replace(/\.$/, ''));
  const opt = (key: string) => optionalString(what, k, key, at);
  return {
    id: requiredString(what, k, 'id', at),
    name: opt('name'),
    owner: opt('owner'),
    status: opt('status'),
    cloudProvider: opt('cloud_provider'),
    region: opt('region'),
    bootstrapServerHost: opt('bootstrap_server_host'),
    createdAt: opt('created_at'),
    updatedAt: opt('updated_at'),
  };
}

/** A Service Registry (`Registry`): `id` required, the other fields the operator reads optional strings. */
function parseRegistry(what: string, value: unknown, at = ''): Registry {
  const r = objectAnswer(what, value, at.replace(/\.$/, ''));
  const opt = (key: string) => optionalString(what, r, key, at);
  return {
    id: requiredString(what, r, 'id', at),
    name: opt('name'),
    status: opt('status'),
    registryUrl: opt('registryUrl'),
    updatedAt: opt('updated_at'),
  };
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}

export function createCloudServicesClient(options: CloudServicesClientOptions): CloudServicesClient {
  const doFetch = options.fetch ?? fetch;
  const apiUrl = trimSlash(options.apiUrl);
  const tokenUrl = `${trimSlash(options.ssoUrl)}${TOKEN_ENDPOINT_PATH}`;

  /** One request: returns the parsed JSON of a 2xx answer; throws CloudServicesError otherwise. */
  async function request(
    what: string,
    url: string,
    init: { method: string; headers: Record<string, string>; body?: string },
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let text: string;
    let status: number;
    try {
      const res = await doFetch(url, { ...init, signal: combined, redirect: 'error' });
      status = res.status;
      text = await res.text();
    } catch (err) {
      if (timeout.aborted)
        throw new CloudServicesError('timeout', `${what}: no answer within ${options.timeoutMs} ms`);
      if (signal?.aborted) throw err;
      const cause = (err as { cause?: { code?: unknown } }).cause;
      const code = typeof cause?.code === 'string' ? ` (${cause.code})` : '';
      throw new CloudServicesError('unreachable', `${what}: the service could not be reached${code}`);
    }
    if (status < 200 || status > 299) {
      let reason = '';
      try {
        reason = str(record(JSON.parse(text)).reason);
      } catch {
        // not a JSON error body: reason stays ''
      }
      throw new CloudServicesError('http', `${what}: HTTP ${status}`, {
        status,
        reason,
        body: text.slice(0, MAX_ERROR_BODY),
      });
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new CloudServicesError('malformed', `${what}: the answer is not valid JSON`, { status });
    }
  }

  const bearer = (accessToken: string) => ({
    authorization: `Bearer ${accessToken}`,
    accept: 'application/json',
  });

  /** The items of the management API's list at `path`, each parsed. */
  async function listOf<T>(
    what: string,
    path: string,
    parse: (what: string, value: unknown, at: string) => T,
    accessToken: string,
    signal: AbortSignal | undefined,
  ): Promise<T[]> {
    const body = await request(
      what,
      `${apiUrl}${path}`,
      { method: 'GET', headers: bearer(accessToken) },
      signal,
    );
    return itemsOf(what, body).map((item, i) => parse(what, item, `items[${i}].`));
  }

  /**
   * The instance `id` under `path`, parsed. Another instance's details (`noun` in the message) would connect
   * the workload to the wrong one: such an answer is malformed.
   */
  async function getById<T extends { id: string }>(
    what: string,
    path: string,
    noun: string,
    parse: (what: string, value: unknown) => T,
    accessToken: string,
    id: string,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const url = `${apiUrl}${path}/${encodeURIComponent(id)}`;
    const item = parse(
      what,
      await request(what, url, { method: 'GET', headers: bearer(accessToken) }, signal),
    );
    if (item.id !== id)
      throw new CloudServicesError('malformed', `${what}: the answer is ${noun} ${item.id}, not ${id}`);
    return item;
  }

  return {
    async exchangeToken(offlineToken, signal) {
      const body = new URLSearchParams({
        grant_type: 'refresh_token',
        client_id: SSO_CLIENT_ID,
        refresh_token: offlineToken,
      }).toString();
      const answer = await request(
        'token exchange',
        tokenUrl,
        {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
          body,
        },
        signal,
      ).catch((err: unknown) => {
        // Never let the offline token reach a message (an SSO could echo the request).
        if (err instanceof CloudServicesError && offlineToken !== '' && err.body.includes(offlineToken)) {
          throw new CloudServicesError(err.failure, err.message, {
            status: err.status,
            reason: err.reason,
            body: err.body.split(offlineToken).join('[REDACTED]'),
          });
        }
        throw err;
      });
      return requiredString('token exchange', objectAnswer('token exchange', answer), 'access_token', '');
    },
    listKafkas: (accessToken, signal) => listOf('list kafkas', KAFKAS_PATH, parseKafka, accessToken, signal),
    getKafka: (accessToken, id, signal) =>
      getById('get kafka', KAFKAS_PATH, 'Kafka instance', parseKafka, accessToken, id, signal),
    async createServiceAccount(accessToken, sa, signal) {
      const what = 'create service account';
      const answer = objectAnswer(
        what,
        await request(
          what,
          `${apiUrl}${SERVICE_ACCOUNTS_PATH}`,
          {
            method: 'POST',
            headers: { ...bearer(accessToken), 'content-type': 'application/json' },
            body: JSON.stringify({ name: sa.name, description: sa.description }),
          },
          signal,
        ),
      );
      return {
        id: optionalString(what, answer, 'id', ''),
        clientId: requiredString(what, answer, 'client_id', ''),
        clientSecret: requiredString(what, answer, 'client_secret', ''),
      };
    },
    listRegistries: (accessToken, signal) =>
      listOf('list registries', REGISTRIES_PATH, parseRegistry, accessToken, signal),
    getRegistry: (accessToken, id, signal) =>
      getById('get registry', REGISTRIES_PATH, 'registry', parseRegistry, accessToken, id, signal),
  };
}

/**
 * The original's standardized message for a management API error of HTTP `status`; `reason` is the
 * `reason` of the API's JSON error body (`''` when there is none).
 */
export function standardizedErrorMessage(status: number, reason: string): string {
  switch (status) {
    case 504:
      return 'Server timeout. Server is not responding';
    case 503:
      return 'Service unavailable at the moment';
    case 500:
      return 'Unknown server error';
    case 400:
      return `Provided user input is invalid: ${reason}`;
    case 401:
      return 'Cannot authenticate user with the service';
    case 403:
      return `User not authorized to access the service: ${reason}`;
    default:
      return `Error ${status}: ${reason}`;
  }
}
