/**
 * The operator's client of the cloud services: the SSO refresh-token exchange and the five management
 * calls it makes, on the global `fetch`, with a per-request timeout. Every failure is a
 * {@link CloudServicesError} that says what kind of failure it was (HTTP status, unreachable, no answer in
 * time, malformed body) and carries the `reason` of the API's JSON error body; it never carries a token.
 * Base URLs: `CLOUD_SERVICES_API` (management APIs) and `CLOUD_SERVICES_SSO` (the SSO realm).
 */

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
    return (
      this.failure === 'http' && this.status !== undefined && (this.status >= 500 || this.status === 429)
    );
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
const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

function toKafka(value: unknown): Kafka {
  const k = record(value);
  return {
    id: str(k.id),
    name: str(k.name),
    owner: str(k.owner),
    status: str(k.status),
    cloudProvider: str(k.cloud_provider),
    region: str(k.region),
    bootstrapServerHost: str(k.bootstrap_server_host),
    createdAt: str(k.created_at),
    updatedAt: str(k.updated_at),
  };
}

function toRegistry(value: unknown): Registry {
  const r = record(value);
  return {
    id: str(r.id),
    name: str(r.name),
    status: str(r.status),
    registryUrl: str(r.registryUrl),
    updatedAt: str(r.updated_at),
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

  function items(what: string, body: unknown): unknown[] {
    const list = record(body).items;
    if (!Array.isArray(list))
      throw new CloudServicesError('malformed', `${what}: the answer has no "items" list`);
    return list;
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
      const accessToken = str(record(answer).access_token);
      if (!accessToken)
        throw new CloudServicesError('malformed', 'token exchange: the answer has no access_token');
      return accessToken;
    },
    async listKafkas(accessToken, signal) {
      const what = 'list kafkas';
      return items(
        what,
        await request(
          what,
          `${apiUrl}${KAFKAS_PATH}`,
          { method: 'GET', headers: bearer(accessToken) },
          signal,
        ),
      ).map(toKafka);
    },
    async getKafka(accessToken, id, signal) {
      const url = `${apiUrl}${KAFKAS_PATH}/${encodeURIComponent(id)}`;
      return toKafka(
        await request('get kafka', url, { method: 'GET', headers: bearer(accessToken) }, signal),
      );
    },
    async createServiceAccount(accessToken, sa, signal) {
      const answer = record(
        await request(
          'create service account',
          `${apiUrl}${SERVICE_ACCOUNTS_PATH}`,
          {
            method: 'POST',
            headers: { ...bearer(accessToken), 'content-type': 'application/json' },
            body: JSON.stringify({ name: sa.name, description: sa.description }),
          },
          signal,
        ),
      );
      const account = {
        id: str(answer.id),
        clientId: str(answer.client_id),
        clientSecret: str(answer.client_secret),
      };
      if (!account.clientId || !account.clientSecret)
        throw new CloudServicesError(
          'malformed',
          'create service account: the answer has no client_id/client_secret',
        );
      return account;
    },
    async listRegistries(accessToken, signal) {
      const what = 'list registries';
      return items(
        what,
        await request(
          what,
          `${apiUrl}${REGISTRIES_PATH}`,
          { method: 'GET', headers: bearer(accessToken) },
          signal,
        ),
      ).map(toRegistry);
    },
    async getRegistry(accessToken, id, signal) {
      const url = `${apiUrl}${REGISTRIES_PATH}/${encodeURIComponent(id)}`;
      return toRegistry(
        await request('get registry', url, { method: 'GET', headers: bearer(accessToken) }, signal),
      );
    },
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
