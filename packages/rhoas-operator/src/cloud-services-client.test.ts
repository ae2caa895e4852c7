/**
 * Contract test of the local cloud services API (packages/local-env): the official SDK clients and the
 * operator's own client drive the same routes over real HTTP and must agree on paths, shapes and errors.
 */
import assert from 'node:assert/strict';
import { type CloudServicesApi, startCloudServicesApi } from '@gitops/local-env';
import { Configuration, DefaultApi, SecurityApi } from '@rhoas/kafka-management-sdk';
import { RegistriesApi, Configuration as RegistryConfiguration } from '@rhoas/registry-management-sdk';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type CloudServicesClient,
  CloudServicesError,
  createCloudServicesClient,
  standardizedErrorMessage,
} from './cloud-services-client.ts';

const OFFLINE = 'local-offline-token';

/** The HTTP error an SDK call ended with (axios puts it on `response`). */
async function sdkError(call: Promise<unknown>): Promise<{ status: number; data: Record<string, unknown> }> {
  try {
    await call;
  } catch (err) {
    const response = (err as { response?: { status: number; data: Record<string, unknown> } }).response;
    if (response) return response;
  }
  throw new Error('the SDK call did not fail with an HTTP error');
}

describe('the local cloud services API, through the official SDKs and the operator client', () => {
  let api: CloudServicesApi;
  let client: CloudServicesClient;
  let token: string;

  beforeAll(async () => {
    api = await startCloudServicesApi();
    // The product's default limit: a local answer can take seconds on a loaded machine (only the hang case
    // below uses a short one, on purpose).
    client = createCloudServicesClient({ apiUrl: api.url, ssoUrl: api.ssoUrl, timeoutMs: 30_000 });
    token = await client.exchangeToken(OFFLINE);
  });
  afterAll(async () => {
    await api.close();
  });

  const sdk = () => {
    const configuration = new Configuration({ basePath: api.url, accessToken: token });
    return {
      kafkas: new DefaultApi(configuration),
      security: new SecurityApi(configuration),
      registries: new RegistriesApi(new RegistryConfiguration({ basePath: api.url, accessToken: token })),
    };
  };

  it('exchanges the offline token with the form body of a refresh grant', async () => {
    const exchange = api.requests().find((r) => r.route === 'token');
    assert.equal(exchange?.method, 'POST');
    assert.equal(exchange?.path, '/auth/realms/redhat-external/protocol/openid-connect/token');
    assert.equal(exchange?.contentType, 'application/x-www-form-urlencoded');
    assert.deepEqual(Object.fromEntries(new URLSearchParams(exchange?.body)), {
      grant_type: 'refresh_token',
      client_id: 'cloud-services',
      refresh_token: OFFLINE,
    });
    assert.match(token, /^local-at-/);
  });

  it('refuses an unknown offline token with 401 and a Keycloak error body', async () => {
    const err = await client.exchangeToken('not-a-known-token').catch((e: unknown) => e);
    assert.ok(err instanceof CloudServicesError);
    assert.equal(err.status, 401);
    assert.equal(JSON.parse(err.body).error, 'invalid_grant');
    assert.ok(!err.body.includes('not-a-known-token'));
  });

  it('lists kafkas the same way for the SDK and the operator client (one route, no query)', async () => {
    api.clearRequests();
    const viaSdk = (await sdk().kafkas.getKafkas()).data;
    const viaClient = await client.listKafkas(token);
    const [a, b] = api.requests();
    assert.equal(a?.path, '/api/kafkas_mgmt/v1/kafkas');
    assert.equal(b?.path, a?.path);
    assert.equal(b?.query, '');
    assert.ok(a?.authorized && b?.authorized);
    assert.equal(viaSdk.kind, 'KafkaRequestList');
    assert.deepEqual(
      viaSdk.items.map((k) => k.id),
      viaClient.map((k) => k.id),
    );
    const first = viaSdk.items[0];
    assert.equal(first?.cloud_provider, viaClient[0]?.cloudProvider);
    assert.equal(first?.bootstrap_server_host, viaClient[0]?.bootstrapServerHost);
    assert.equal(first?.created_at, viaClient[0]?.createdAt);
  });

  it('gets one kafka by id, and answers 404 with the KAFKAS-MGMT-7 error body', async () => {
    const id = api.seed.kafkas[0]?.id ?? '';
    assert.equal((await sdk().kafkas.getKafkaById(id)).data.name, (await client.getKafka(token, id)).name);
    const sdkFailure = await sdkError(sdk().kafkas.getKafkaById('nope'));
    assert.equal(sdkFailure.status, 404);
    assert.equal(sdkFailure.data.code, 'KAFKAS-MGMT-7');
    assert.equal(sdkFailure.data.kind, 'Error');
    const err = await client.getKafka(token, 'nope').catch((e: unknown) => e);
    assert.ok(err instanceof CloudServicesError);
    assert.equal(err.status, 404);
    assert.equal(err.reason, "The requested resource doesn't exist");
    assert.equal(err.transient, false);
    assert.equal(
      standardizedErrorMessage(404, err.reason),
      "Error 404: The requested resource doesn't exist",
    );
  });

  it('creates service accounts through the same route for both clients', async () => {
    api.clearRequests();
    const before = api.serviceAccounts().length;
    const viaSdk = (await sdk().security.createServiceAccount({ name: 'sdk-sa', description: 'by the SDK' }))
      .data;
    const viaClient = await client.createServiceAccount(token, {
      name: 'op-sa',
      description: 'by the operator',
    });
    assert.ok(viaSdk.client_id && viaSdk.client_secret);
    assert.ok(viaClient.clientId && viaClient.clientSecret);
    assert.deepEqual(
      api.requests().map((r) => [r.method, r.path]),
      [
        ['POST', '/api/kafkas_mgmt/v1/service_accounts'],
        ['POST', '/api/kafkas_mgmt/v1/service_accounts'],
      ],
    );
    assert.deepEqual(JSON.parse(api.requests()[1]?.body ?? ''), {
      name: 'op-sa',
      description: 'by the operator',
    });
    assert.deepEqual(
      api
        .serviceAccounts()
        .slice(before)
        .map((a) => a.name),
      ['sdk-sa', 'op-sa'],
    );
  });

  it('lists and gets registries the same way for both clients (camelCase registryUrl)', async () => {
    const list = (await sdk().registries.getRegistries()).data;
    const mine = await client.listRegistries(token);
    assert.deepEqual(
      list.items.map((r) => [r.id, r.registryUrl]),
      mine.map((r) => [r.id, r.registryUrl]),
    );
    const id = mine[0]?.id ?? '';
    assert.equal(
      (await sdk().registries.getRegistry(id)).data.registryUrl,
      (await client.getRegistry(token, id)).registryUrl,
    );
    const err = await client.getRegistry(token, 'nope').catch((e: unknown) => e);
    assert.ok(err instanceof CloudServicesError && err.status === 404);
  });

  it('answers 401 KAFKAS-MGMT-11 without a token the SSO endpoint issued', async () => {
    const res = await sdkError(
      new DefaultApi(new Configuration({ basePath: api.url, accessToken: 'forged' })).getKafkas(),
    );
    assert.equal(res.status, 401);
    assert.equal(res.data.code, 'KAFKAS-MGMT-11');
    const err = await client.listRegistries('forged').catch((e: unknown) => e);
    assert.ok(err instanceof CloudServicesError && err.status === 401);
  });

  it('injects faults per route: a status once, malformed JSON, a hang, a dropped connection', async () => {
    api.inject('listKafkas', { status: 503 }, { times: 1 });
    const first = await client.listKafkas(token).catch((e: unknown) => e);
    assert.ok(first instanceof CloudServicesError && first.status === 503 && first.transient);
    assert.equal((await client.listKafkas(token)).length, api.seed.kafkas.length);

    api.inject('getKafka', {
      status: 403,
      body: { kind: 'Error', code: 'KAFKAS-MGMT-4', reason: 'not yours' },
    });
    const forbidden = await client.getKafka(token, 'x').catch((e: unknown) => e);
    assert.ok(forbidden instanceof CloudServicesError);
    assert.equal(
      standardizedErrorMessage(403, forbidden.reason),
      'User not authorized to access the service: not yours',
    );

    api.inject('listRegistries', { malformed: true });
    const malformed = await client.listRegistries(token).catch((e: unknown) => e);
    assert.ok(
      malformed instanceof CloudServicesError && malformed.failure === 'malformed' && !malformed.transient,
    );

    const quick = createCloudServicesClient({ apiUrl: api.url, ssoUrl: api.ssoUrl, timeoutMs: 300 });
    api.inject('getRegistry', { hang: true });
    const hung = await quick.getRegistry(token, 'x').catch((e: unknown) => e);
    assert.ok(hung instanceof CloudServicesError && hung.failure === 'timeout' && hung.transient);

    api.inject('token', { drop: true });
    const dropped = await client.exchangeToken(OFFLINE).catch((e: unknown) => e);
    assert.ok(dropped instanceof CloudServicesError && dropped.failure === 'unreachable');
    api.clearFaults();
    assert.ok(await client.exchangeToken(OFFLINE));
  });

  it('refuses every 200 answer that is not the promised object as malformed, naming the field (never a value)', async () => {
    const kafka = api.seed.kafkas[0];
    const registry = api.seed.registries[0];
    assert.ok(kafka && registry);
    type Call = (c: CloudServicesClient) => Promise<unknown>;
    const calls = {
      token: ['token', (c) => c.exchangeToken(OFFLINE)],
      listKafkas: ['listKafkas', (c) => c.listKafkas(token)],
      getKafka: ['getKafka', (c) => c.getKafka(token, kafka.id)],
      createServiceAccount: [
        'createServiceAccount',
        (c) => c.createServiceAccount(token, { name: 'malformed', description: '' }),
      ],
      listRegistries: ['listRegistries', (c) => c.listRegistries(token)],
      getRegistry: ['getRegistry', (c) => c.getRegistry(token, registry.id)],
    } satisfies Record<string, [route: Parameters<CloudServicesApi['inject']>[0], call: Call]>;
    const cases: [keyof typeof calls, body: unknown, message: string][] = [
      ['token', 'a string', 'token exchange: the answer is not a JSON object'],
      ['token', [], 'token exchange: the answer is not a JSON object'],
      ['token', { access_token: 42 }, 'token exchange: access_token is not a non-empty string (number)'],
      ['listKafkas', 'a string', 'list kafkas: the answer is not a JSON object'],
      ['listKafkas', [kafka], 'list kafkas: the answer is not a JSON object'],
      ['listKafkas', { kind: 'KafkaRequestList' }, 'list kafkas: items is not a list (undefined)'],
      ['listKafkas', { items: 'x' }, 'list kafkas: items is not a list (string)'],
      ['listKafkas', { items: [kafka, 42] }, 'list kafkas: items[1] is not a JSON object'],
      ['listKafkas', { items: [null] }, 'list kafkas: items[0] is not a JSON object'],
      ['listKafkas', { items: [[kafka]] }, 'list kafkas: items[0] is not a JSON object'],
      [
        'listKafkas',
        { items: [{ name: 'no id' }] },
        'list kafkas: items[0].id is not a non-empty string (undefined)',
      ],
      [
        'listKafkas',
        { items: [{ ...kafka, bootstrap_server_host: 9092 }] },
        'list kafkas: items[0].bootstrap_server_host is not a string (number)',
      ],
      ['getKafka', 'a string', 'get kafka: the answer is not a JSON object'],
      ['getKafka', 7, 'get kafka: the answer is not a JSON object'],
      ['getKafka', [kafka], 'get kafka: the answer is not a JSON object'],
      ['getKafka', {}, 'get kafka: id is not a non-empty string (undefined)'],
      ['getKafka', { ...kafka, id: '' }, 'get kafka: id is not a non-empty string (string)'],
      ['getKafka', { ...kafka, id: 12 }, 'get kafka: id is not a non-empty string (number)'],
      [
        'getKafka',
        { ...kafka, id: 'another' },
        `get kafka: the answer is Kafka instance another, not ${kafka.id}`,
      ],
      ['getKafka', { ...kafka, status: { ready: true } }, 'get kafka: status is not a string (object)'],
      ['createServiceAccount', 'a string', 'create service account: the answer is not a JSON object'],
      [
        'createServiceAccount',
        { client_id: 'x', client_secret: 5 },
        'create service account: client_secret is not a non-empty string (number)',
      ],
      ['listRegistries', { items: [1, 2] }, 'list registries: items[0] is not a JSON object'],
      [
        'listRegistries',
        { items: [{ ...registry, registryUrl: ['x'] }] },
        'list registries: items[0].registryUrl is not a string (array)',
      ],
      ['getRegistry', 'a string', 'get registry: the answer is not a JSON object'],
      [
        'getRegistry',
        { ...registry, id: undefined },
        'get registry: id is not a non-empty string (undefined)',
      ],
      ['getRegistry', { ...registry, name: 42 }, 'get registry: name is not a string (number)'],
      [
        'getRegistry',
        { ...registry, id: 'another' },
        `get registry: the answer is registry another, not ${registry.id}`,
      ],
    ];
    for (const [name, body, message] of cases) {
      const [route, call] = calls[name];
      api.inject(route, { status: 200, body }, { times: 1 });
      const err = await call(client).catch((e: unknown) => e);
      assert.ok(err instanceof CloudServicesError, `${name} ${JSON.stringify(body)}: ${String(err)}`);
      assert.equal(err.failure, 'malformed', `${name} ${JSON.stringify(body)}`);
      assert.equal(err.transient, false);
      assert.equal(err.message, message, `${name} ${JSON.stringify(body)}`);
    }
    api.clearFaults();
    // Fields the operator does not read are not checked, and an optional field may be absent or null.
    api.inject(
      'getKafka',
      { status: 200, body: { id: kafka.id, bootstrap_server_host: null, extra: [1] } },
      { times: 1 },
    );
    assert.deepEqual(await client.getKafka(token, kafka.id), {
      id: kafka.id,
      name: '',
      owner: '',
      status: '',
      cloudProvider: '',
      region: '',
      bootstrapServerHost: '',
      createdAt: '',
      updatedAt: '',
    });
  });

  it('maps every HTTP status to the original standardized message', () => {
    assert.deepEqual(
      [400, 401, 403, 404, 500, 503, 504, 418].map((s) => standardizedErrorMessage(s, 'why')),
      [
        'Provided user input is invalid: why',
        'Cannot authenticate user with the service',
        'User not authorized to access the service: why',
        'Error 404: why',
        'Unknown server error',
        'Service unavailable at the moment',
        'Server timeout. Server is not responding',
        'Error 418: why',
      ],
    );
  });
});
