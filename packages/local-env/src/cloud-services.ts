/**
 * A local, contract-faithful cloud services API for the RHOAS operator (the real services were shut down):
 * one node:http server that plays both the SSO token endpoint and the management APIs the operator calls,
 * with the routes and JSON shapes of the published OpenAPI contracts (snake_case Kafka fields, the camelCase
 * `registryUrl` of registries, list wrappers with `kind/page/size/total/items`, error bodies
 * `{id, kind: "Error", href, code, reason, operation_id}`). See packages/rhoas-operator/README.md.
 *
 *   POST /auth/realms/redhat-external/protocol/openid-connect/token   form: grant_type=refresh_token,
 *                                                                     client_id=cloud-services, refresh_token
 *   GET  /api/kafkas_mgmt/v1/kafkas            GET /api/kafkas_mgmt/v1/kafkas/{id}
 *   POST /api/kafkas_mgmt/v1/service_accounts  {name, description} → 200 {client_id, client_secret, ...}
 *   GET  /api/serviceregistry_mgmt/v1/registries   GET /api/serviceregistry_mgmt/v1/registries/{id}
 *
 * Seeded from a JSON file (default: ../cloud-services-seed.json). For tests: a request log, and a fault per
 * route (a status and body, a malformed JSON body, a hang, a dropped connection), once or persistently.
 * The same hooks are served under /_local/ so `pnpm dev` users can drive them with curl.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export const SSO_REALM_PATH = '/auth/realms/redhat-external';
export const TOKEN_PATH = `${SSO_REALM_PATH}/protocol/openid-connect/token`;
const KAFKAS = '/api/kafkas_mgmt/v1/kafkas';
const SERVICE_ACCOUNTS = '/api/kafkas_mgmt/v1/service_accounts';
const REGISTRIES = '/api/serviceregistry_mgmt/v1/registries';
/** Largest request body read (the operator's bodies are tiny). */
const MAX_BODY_BYTES = 64 * 1024;

export const defaultSeedFile: string = new URL('../cloud-services-seed.json', import.meta.url).pathname;

/** A Kafka instance as the Kafka Management API returns it (the fields the operator reads, and some more). */
export interface SeedKafka {
  id: string;
  name: string;
  owner: string;
  status: string;
  cloud_provider: string;
  region: string;
  bootstrap_server_host: string;
  created_at: string;
  updated_at: string;
  [field: string]: unknown;
}

export interface SeedRegistry {
  id: string;
  name: string;
  status: string;
  registryUrl: string;
  owner?: string;
  created_at?: string;
  updated_at: string;
  [field: string]: unknown;
}

export interface CloudServicesSeed {
  /** Offline (refresh) tokens the SSO endpoint accepts. */
  offlineTokens: string[];
  kafkas: SeedKafka[];
  registries: SeedRegistry[];
}

export type CloudServicesRoute =
  | 'token'
  | 'listKafkas'
  | 'getKafka'
  | 'createServiceAccount'
  | 'listRegistries'
  | 'getRegistry';

export type Fault =
  | { status: number; body?: unknown }
  /** 200 with a body that is not JSON. */
  | { malformed: true }
  /** Never answers (until the client gives up or the server closes). */
  | { hang: true }
  /** Destroys the connection without an answer. */
  | { drop: true };

export interface RecordedRequest {
  route: CloudServicesRoute | 'unknown';
  method: string;
  path: string;
  /** The query string (without `?`), `''` when none. */
  query: string;
  contentType: string | undefined;
  /** Whether an `Authorization: Bearer <token issued by the SSO endpoint>` header came with it. */
  authorized: boolean;
  body: string;
}

export interface ServiceAccountRecord {
  id: string;
  name: string;
  description: string;
  client_id: string;
}

export interface CloudServicesApi {
  /** Base URL of the management APIs (the operator's CLOUD_SERVICES_API). */
  readonly url: string;
  /** The SSO realm URL (the operator's CLOUD_SERVICES_SSO). */
  readonly ssoUrl: string;
  readonly seed: CloudServicesSeed;
  /** Every request, oldest first. */
  requests(): RecordedRequest[];
  clearRequests(): void;
  /** Answers `route` with `fault` (`times` requests, default every request until clearFaults()). */
  inject(route: CloudServicesRoute, fault: Fault, options?: { times?: number }): void;
  clearFaults(): void;
  /** Service accounts created so far (never their secrets). */
  serviceAccounts(): ServiceAccountRecord[];
  /** Replaces or adds a Kafka instance / registry. */
  putKafka(kafka: SeedKafka): void;
  putRegistry(registry: SeedRegistry): void;
  close(): Promise<void>;
}

export interface StartCloudServicesOptions {
  /** The seed, or a JSON file with one. Default {@link defaultSeedFile}. */
  seed?: CloudServicesSeed | string;
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
}

export async function loadCloudServicesSeed(file: string = defaultSeedFile): Promise<CloudServicesSeed> {
  const value = JSON.parse(await readFile(file, 'utf8')) as Partial<CloudServicesSeed>;
  return {
    offlineTokens: value.offlineTokens ?? [],
    kafkas: value.kafkas ?? [],
    registries: value.registries ?? [],
  };
}

function errorBody(status: number, code: string, reason: string) {
  const id = code.replace(/^.*-/, '');
  return {
    id,
    kind: 'Error',
    href: `/api/kafkas_mgmt/v1/errors/${id}`,
    code,
    reason,
    operation_id: randomUUID(),
    status,
  };
}

const notFound = () => errorBody(404, 'KAFKAS-MGMT-7', "The requested resource doesn't exist");
const unauthenticated = () =>
  errorBody(401, 'KAFKAS-MGMT-11', 'Unable to verify JWT token: Required authorization token not found');

export async function startCloudServicesApi(
  options: StartCloudServicesOptions = {},
): Promise<CloudServicesApi> {
  const seed =
    typeof options.seed === 'object'
      ? structuredClone(options.seed)
      : await loadCloudServicesSeed(options.seed);
  const kafkas = new Map(seed.kafkas.map((k) => [k.id, k]));
  const registries = new Map(seed.registries.map((r) => [r.id, r]));
  const accessTokens = new Set<string>();
  const log: RecordedRequest[] = [];
  const faults = new Map<CloudServicesRoute, { fault: Fault; remaining: number }>();
  const accounts: ServiceAccountRecord[] = [];
  const sockets = new Set<Socket>();

  function routeOf(method: string, path: string): { route: CloudServicesRoute; id?: string } | undefined {
    if (method === 'POST' && path === TOKEN_PATH) return { route: 'token' };
    if (method === 'GET' && path === KAFKAS) return { route: 'listKafkas' };
    if (method === 'POST' && path === SERVICE_ACCOUNTS) return { route: 'createServiceAccount' };
    if (method === 'GET' && path === REGISTRIES) return { route: 'listRegistries' };
    const kafka = path.startsWith(`${KAFKAS}/`) ? path.slice(KAFKAS.length + 1) : undefined;
    if (method === 'GET' && kafka && !kafka.includes('/'))
      return { route: 'getKafka', id: decodeURIComponent(kafka) };
    const registry = path.startsWith(`${REGISTRIES}/`) ? path.slice(REGISTRIES.length + 1) : undefined;
    if (method === 'GET' && registry && !registry.includes('/'))
      return { route: 'getRegistry', id: decodeURIComponent(registry) };
    return undefined;
  }

  function takeFault(route: CloudServicesRoute): Fault | undefined {
    const entry = faults.get(route);
    if (!entry) return undefined;
    entry.remaining -= 1;
    if (entry.remaining <= 0) faults.delete(route);
    return entry.fault;
  }

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  function list<T>(kind: string, items: T[]) {
    return { kind, page: 1, size: items.length, total: items.length, items };
  }

  function kafkaJson(k: SeedKafka) {
    return { kind: 'Kafka', href: `${KAFKAS}/${k.id}`, multi_az: true, reauthentication_enabled: true, ...k };
  }
  function registryJson(r: SeedRegistry) {
    return { kind: 'ServiceRegistry', href: `${REGISTRIES}/${r.id}`, instance_type: 'standard', ...r };
  }

  function token(req: RecordedRequest, res: ServerResponse) {
    const form = new URLSearchParams(req.body);
    const refresh = form.get('refresh_token') ?? '';
    if (
      !req.contentType?.startsWith('application/x-www-form-urlencoded') ||
      form.get('grant_type') !== 'refresh_token' ||
      form.get('client_id') !== 'cloud-services'
    ) {
      send(res, 400, { error: 'invalid_request', error_description: 'Invalid grant or client' });
      return;
    }
    if (!seed.offlineTokens.includes(refresh)) {
      send(res, 401, { error: 'invalid_grant', error_description: 'Invalid refresh token' });
      return;
    }
    const accessToken = `local-at-${randomBytes(16).toString('hex')}`;
    accessTokens.add(accessToken);
    send(res, 200, {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: 900,
      refresh_expires_in: 0,
      scope: 'openid offline_access',
    });
  }

  function management(
    route: CloudServicesRoute,
    id: string | undefined,
    req: RecordedRequest,
    res: ServerResponse,
  ) {
    if (!req.authorized) return send(res, 401, unauthenticated());
    switch (route) {
      case 'listKafkas':
        return send(res, 200, list('KafkaRequestList', [...kafkas.values()].map(kafkaJson)));
      case 'getKafka': {
        const k = id ? kafkas.get(id) : undefined;
        return k ? send(res, 200, kafkaJson(k)) : send(res, 404, notFound());
      }
      case 'listRegistries':
        return send(res, 200, list('RegistryList', [...registries.values()].map(registryJson)));
      case 'getRegistry': {
        const r = id ? registries.get(id) : undefined;
        return r ? send(res, 200, registryJson(r)) : send(res, 404, notFound());
      }
      case 'createServiceAccount': {
        let body: { name?: unknown; description?: unknown };
        try {
          body = JSON.parse(req.body) as typeof body;
        } catch {
          return send(res, 400, errorBody(400, 'KAFKAS-MGMT-21', 'Bad request: the body is not JSON'));
        }
        if (typeof body.name !== 'string' || body.name === '')
          return send(res, 400, errorBody(400, 'KAFKAS-MGMT-21', 'name is required'));
        const account = {
          id: randomUUID(),
          name: body.name,
          description: typeof body.description === 'string' ? body.description : '',
          client_id: `srvc-acct-${randomBytes(8).toString('hex')}`,
        };
        accounts.push(account);
        return send(res, 200, {
          ...account,
          kind: 'ServiceAccount',
          href: `${SERVICE_ACCOUNTS}/${account.id}`,
          client_secret: randomBytes(24).toString('base64url'),
          owner: 'local-user',
          created_by: 'local-user',
          created_at: new Date().toISOString(),
        });
      }
      default:
        return send(res, 404, notFound());
    }
  }

  /** /_local/requests (GET, DELETE), /_local/faults (POST {route, fault, times}, DELETE). */
  function admin(path: string, method: string, body: string, res: ServerResponse) {
    if (path === '/_local/requests' && method === 'GET') return send(res, 200, log);
    if (path === '/_local/requests' && method === 'DELETE') {
      log.length = 0;
      return send(res, 200, {});
    }
    if (path === '/_local/faults' && method === 'DELETE') {
      faults.clear();
      return send(res, 200, {});
    }
    if (path === '/_local/faults' && method === 'POST') {
      try {
        const { route, fault, times } = JSON.parse(body) as {
          route: CloudServicesRoute;
          fault: Fault;
          times?: number;
        };
        api.inject(route, fault, { times });
        return send(res, 200, {});
      } catch (err) {
        return send(res, 400, { error: String(err) });
      }
    }
    return send(res, 404, { error: 'no such admin route' });
  }

  async function readBody(req: IncomingMessage): Promise<string | undefined> {
    let size = 0;
    const chunks: Buffer[] = [];
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) return undefined;
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://local');
    const method = req.method ?? 'GET';
    const body = await readBody(req);
    if (body === undefined) return send(res, 413, errorBody(413, 'KAFKAS-MGMT-21', 'request body too large'));
    if (url.pathname.startsWith('/_local/')) return admin(url.pathname, method, body, res);
    const matched = routeOf(method, url.pathname);
    const auth = req.headers.authorization ?? '';
    const recorded: RecordedRequest = {
      route: matched?.route ?? 'unknown',
      method,
      path: url.pathname,
      query: url.search.replace(/^\?/, ''),
      contentType: req.headers['content-type'],
      authorized: auth.startsWith('Bearer ') && accessTokens.has(auth.slice('Bearer '.length)),
      body,
    };
    log.push(recorded);
    if (!matched) return send(res, 404, notFound());
    const fault = takeFault(matched.route);
    if (fault) {
      if ('hang' in fault) return; // the socket is destroyed on close()
      if ('drop' in fault) return req.socket.destroy();
      if ('malformed' in fault) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end('{"items": [ this is not json');
      }
      return send(
        res,
        fault.status,
        fault.body ?? errorBody(fault.status, 'KAFKAS-MGMT-9', `injected ${fault.status}`),
      );
    }
    if (matched.route === 'token') return token(recorded, res);
    return management(matched.route, matched.id, recorded, res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.address.includes(':') ? `[${address.address}]` : address.address}:${address.port}`;

  const api: CloudServicesApi = {
    url,
    ssoUrl: `${url}${SSO_REALM_PATH}`,
    seed,
    requests: () => [...log],
    clearRequests: () => {
      log.length = 0;
    },
    inject(route, fault, injectOptions = {}) {
      faults.set(route, { fault, remaining: injectOptions.times ?? Number.POSITIVE_INFINITY });
    },
    clearFaults: () => faults.clear(),
    serviceAccounts: () => [...accounts],
    putKafka: (kafka) => void kafkas.set(kafka.id, kafka),
    putRegistry: (registry) => void registries.set(registry.id, registry),
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
  return api;
}
