/**
 * CloudServicesRequest against the real API server and the local cloud services API over real HTTP:
 * golden path with the exact field mapping, the generation gate (checked through the request log), a
 * forceRefresh bump, token failures, every API error code, validation, a partial failure that keeps the
 * previous lists, a transient 503 then success, malformed JSON, 200 answers that are not the promised
 * objects, and a hanging API.
 */
import assert from 'node:assert/strict';
import { randomSuffix } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import {
  condition,
  conditionFields,
  eventually,
  OFFLINE_TOKEN,
  type RhoasFixture,
  TOKEN_SECRET,
  useRhoasFixture,
} from '../testing/rhoas-fixture.ts';

const KIND = 'CloudServicesRequest';
const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('CloudServicesRequest', () => {
  const f = useRhoasFixture();

  const statuses = (cr: Awaited<ReturnType<RhoasFixture['get']>>) =>
    Object.fromEntries((cr?.status?.conditions ?? []).map((c) => [c.type, c.status]));

  it('lists the kafkas and registries the token can see, with the exact field mapping', async () => {
    await f.create(KIND, 'golden', { accessTokenSecretName: TOKEN_SECRET });
    const cr = await f.waitFinished(KIND, 'golden', 'True');
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    assert.deepEqual(((cr.status?.userKafkas ?? []) as unknown[])[0], {
      id: kafka.id,
      name: kafka.name,
      owner: kafka.owner,
      bootstrapServerHost: kafka.bootstrap_server_host,
      status: kafka.status,
      createdAt: '2022-06-01T10:00:00.123Z',
      updatedAt: '2022-06-02T09:30:00.000Z',
      provider: kafka.cloud_provider,
      region: kafka.region,
    });
    assert.equal(((cr.status?.userKafkas ?? []) as unknown[]).length, f.seed.kafkas.length);
    const registry = f.seed.registries[0];
    assert.deepEqual(cr.status?.serviceRegistries, [
      {
        id: registry?.id,
        name: registry?.name,
        registryUrl: registry?.registryUrl,
        registryStatus: 'ready',
        lastUpdated: '2022-06-04T08:00:00.500Z',
      },
    ]);
    assert.match(String(cr.status?.lastUpdate), iso);
    assert.deepEqual(conditionFields(cr, 'type', 'status', 'reason', 'message', 'lastTransitionGeneration'), [
      ['AcccesTokenSecretValid', 'True', '', '', 1],
      ['ServiceRegistriesUpToDate', 'True', '', '', 1],
      ['Finished', 'True', '', '', 1],
      ['UserKafkasUpToDate', 'True', '', '', 1],
    ]);
    // The operator's exchange: a form POST of a refresh grant for client cloud-services.
    const exchange = f.api.requests().find((r) => r.route === 'token');
    assert.equal(exchange?.contentType, 'application/x-www-form-urlencoded');
    assert.deepEqual(Object.fromEntries(new URLSearchParams(exchange?.body)), {
      grant_type: 'refresh_token',
      client_id: 'cloud-services',
      refresh_token: OFFLINE_TOKEN,
    });
    // Every management call carried the access token the SSO issued.
    assert.ok(
      f.api
        .requests()
        .filter((r) => r.route !== 'token')
        .every((r) => r.authorized),
    );
    // The Event is recorded after the status write, so it may land a moment later.
    await eventually('a Normal Finished Event', async () =>
      (await f.events('golden')).some((e) => e.type === 'Normal' && e.reason === 'Finished'),
    );
  });

  it('makes no API call while Finished is True for the generation; a forceRefresh bump refreshes the lists', async () => {
    await f.create(KIND, 'gate', { accessTokenSecretName: TOKEN_SECRET });
    await f.waitFinished(KIND, 'gate', 'True');
    f.api.clearRequests();
    // A restart lists every CR again: the gate must still say "nothing to do".
    await f.restartOperator();
    await f.operator.features.cloudServicesRequests.queue.whenIdle();
    await f.get(KIND, 'gate');
    assert.deepEqual(f.api.requests(), []);

    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    f.api.putKafka({ ...kafka, status: 'suspended' });
    const bumped = await f.forceRefresh(KIND, 'gate');
    assert.equal(bumped.metadata.generation, 2);
    const cr = await f.waitFinished(KIND, 'gate', 'True');
    assert.equal(((cr.status?.userKafkas ?? []) as { status: string }[])[0]?.status, 'suspended');
    assert.deepEqual(
      f.api.requests().map((r) => r.route),
      ['token', 'listKafkas', 'listRegistries'],
    );
    f.api.putKafka(kafka);
  });

  it('reports a missing token Secret, a Secret without value, and the SSO refusing the token', async () => {
    await f.create(KIND, 'no-secret', { accessTokenSecretName: 'does-not-exist' });
    let cr = await f.waitFinished(KIND, 'no-secret', 'False');
    assert.deepEqual(
      [condition(cr, 'AcccesTokenSecretValid')?.status, condition(cr, 'AcccesTokenSecretValid')?.reason],
      ['False', 'SecretNotFound'],
    );
    assert.equal(condition(cr, 'Finished')?.message, 'Missing Offline Token Secret does-not-exist');
    assert.equal(condition(cr, 'UserKafkasUpToDate')?.status, 'Unknown');

    await f.createSecret('no-value', { other: 'x' });
    await f.create(KIND, 'no-value', { accessTokenSecretName: 'no-value' });
    cr = await f.waitFinished(KIND, 'no-value', 'False');
    assert.equal(condition(cr, 'AcccesTokenSecretValid')?.reason, 'InvalidTokenSecret');
    assert.equal(
      condition(cr, 'Finished')?.message,
      'Secret no-value has no key "value" with an offline token',
    );

    const garbage = `garbage-${randomSuffix()}\u0000\n%&=`;
    await f.createSecret('wrong-token', { value: garbage });
    f.api.clearRequests();
    await f.create(KIND, 'sso-401', { accessTokenSecretName: 'wrong-token' });
    cr = await f.waitFinished(KIND, 'sso-401', 'False');
    assert.equal(condition(cr, 'AcccesTokenSecretValid')?.status, 'False');
    assert.equal(condition(cr, 'AcccesTokenSecretValid')?.reason, 'Http Error Code 401');
    assert.match(
      condition(cr, 'Finished')?.message ?? '',
      /^Exchange token failed with error \{"error":"invalid_grant"/,
    );
    assert.deepEqual(statuses(cr), {
      AcccesTokenSecretValid: 'False',
      ServiceRegistriesUpToDate: 'Unknown',
      Finished: 'False',
      UserKafkasUpToDate: 'Unknown',
    });
    // No management call after a failed exchange; the garbage token never reaches status, Events or logs.
    assert.deepEqual(
      f.api.requests().filter((r) => r.route !== 'token'),
      [],
    );
    await f.settled();
    const visible = JSON.stringify([cr, await f.events('sso-401')]) + f.logText();
    assert.ok(!visible.includes(garbage.slice(0, 16)));
    assert.ok(!visible.includes(OFFLINE_TOKEN));
    assert.ok(!/local-at-[0-9a-f]{32}/.test(visible), 'no access token is visible');
  });

  it('reports an unreachable SSO with a clear condition', async () => {
    await f.restartOperator({ CLOUD_SERVICES_SSO: 'http://127.0.0.1:1/auth/realms/redhat-external' });
    try {
      await f.create(KIND, 'sso-down', { accessTokenSecretName: TOKEN_SECRET });
      const cr = await f.waitFinished(KIND, 'sso-down', 'False');
      assert.equal(condition(cr, 'AcccesTokenSecretValid')?.reason, 'ConnectionError');
      assert.match(
        condition(cr, 'Finished')?.message ?? '',
        /token exchange: the service could not be reached/,
      );
    } finally {
      await f.restartOperator();
    }
  });

  const apiErrors: [number, string][] = [
    [400, 'Provided user input is invalid: bad page size'],
    [401, 'Cannot authenticate user with the service'],
    [403, 'User not authorized to access the service: bad page size'],
    [404, 'Error 404: bad page size'],
    [409, 'Error 409: bad page size'],
  ];
  for (const [status, message] of apiErrors) {
    it(`maps an API ${status} to "${message}" on UserKafkasUpToDate and does not retry`, async () => {
      const name = `err-${status}`;
      f.api.inject('listKafkas', {
        status,
        body: { kind: 'Error', code: 'KAFKAS-MGMT-21', reason: 'bad page size' },
      });
      try {
        await f.create(KIND, name, { accessTokenSecretName: TOKEN_SECRET });
        const cr = await f.waitFinished(KIND, name, 'False');
        assert.deepEqual(statuses(cr), {
          AcccesTokenSecretValid: 'True',
          ServiceRegistriesUpToDate: 'Unknown',
          Finished: 'False',
          UserKafkasUpToDate: 'False',
        });
        assert.equal(condition(cr, 'UserKafkasUpToDate')?.reason, 'ApiException');
        assert.equal(condition(cr, 'UserKafkasUpToDate')?.message, message);
        assert.equal(condition(cr, 'Finished')?.message, message);
        assert.equal(condition(cr, 'Finished')?.reason, 'ApiException');
        await f.operator.features.cloudServicesRequests.queue.whenIdle();
        const calls = f.api.requests().filter((r) => r.route === 'listKafkas').length;
        f.api.clearFaults();
        // No retry: a new event (a spec change) is needed; it then succeeds.
        await f.forceRefresh(KIND, name);
        await f.waitFinished(KIND, name, 'True');
        assert.equal(f.api.requests().filter((r) => r.route === 'listKafkas').length, calls + 1);
      } finally {
        f.api.clearFaults();
      }
    });
  }

  for (const [status, message] of [
    [500, 'Unknown server error'],
    [503, 'Service unavailable at the moment'],
    [504, 'Server timeout. Server is not responding'],
  ] as const) {
    it(`maps an API ${status} to "${message}", then retries until it succeeds without a spec change`, async () => {
      const name = `transient-${status}`;
      f.api.inject('listRegistries', { status }, { times: 3 });
      await f.create(KIND, name, { accessTokenSecretName: TOKEN_SECRET });
      const cr = await f.waitFinished(KIND, name, 'True');
      assert.equal(cr.metadata.generation, 1);
      assert.equal(f.api.requests().filter((r) => r.route === 'listRegistries' && r.path).length > 0, true);
      // The failure was visible while it lasted: a Warning Event with the standardized message.
      await eventually(`a Warning Event "ApiException: ${message}"`, async () =>
        (await f.events(name)).some((e) => e.type === 'Warning' && e.message === `ApiException: ${message}`),
      );
      assert.equal(((cr.status?.serviceRegistries ?? []) as unknown[]).length, f.seed.registries.length);
    });
  }

  it('keeps the previous lists when the registries call fails after the kafkas call succeeded', async () => {
    await f.create(KIND, 'partial', { accessTokenSecretName: TOKEN_SECRET });
    const first = await f.waitFinished(KIND, 'partial', 'True');
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    f.api.putKafka({ ...kafka, name: 'renamed' });
    f.api.inject('listRegistries', { status: 403, body: { reason: 'no registries for you' } });
    try {
      await f.forceRefresh(KIND, 'partial');
      const cr = await f.waitFinished(KIND, 'partial', 'False');
      assert.equal(condition(cr, 'UserKafkasUpToDate')?.status, 'True');
      assert.equal(condition(cr, 'ServiceRegistriesUpToDate')?.status, 'False');
      assert.equal(
        condition(cr, 'ServiceRegistriesUpToDate')?.message,
        'User not authorized to access the service: no registries for you',
      );
      assert.deepEqual(cr.status?.userKafkas, first.status?.userKafkas);
      assert.deepEqual(cr.status?.serviceRegistries, first.status?.serviceRegistries);
    } finally {
      f.api.clearFaults();
      f.api.putKafka(kafka);
    }
  });

  it('validates the required fields with the original messages (only Finished changes)', async () => {
    await f.create(KIND, 'no-spec', undefined);
    let cr = await f.waitFinished(KIND, 'no-spec', 'False');
    assert.equal(condition(cr, 'Finished')?.message, 'Missing argument spec in CR, spec should not be null');
    assert.equal(condition(cr, 'Finished')?.reason, 'InvalidUserInput');
    assert.equal(condition(cr, 'AcccesTokenSecretValid')?.status, 'Unknown');
    await f.create(KIND, 'no-name', { forceRefresh: 'x' });
    cr = await f.waitFinished(KIND, 'no-name', 'False');
    assert.equal(
      condition(cr, 'Finished')?.message,
      'Missing argument spec.accessTokenSecretName in CR, spec.accessTokenSecretName should not be null',
    );
    // A name that is no Secret name never gets this far: admission refuses it, naming the field.
    const err = await f
      .create(KIND, 'huge-name', { accessTokenSecretName: 'x'.repeat(100_000) })
      .catch((e: unknown) => e);
    assert.equal((err as { statusCode?: number }).statusCode, 422);
    assert.match(String((err as Error).message), /spec\.accessTokenSecretName/);
  });

  it('reports malformed JSON and a hanging API with clear conditions, and keeps serving', async () => {
    f.api.inject('listKafkas', { malformed: true });
    try {
      await f.create(KIND, 'malformed', { accessTokenSecretName: TOKEN_SECRET });
      const cr = await f.waitFinished(KIND, 'malformed', 'False');
      assert.equal(condition(cr, 'UserKafkasUpToDate')?.reason, 'MalformedResponse');
      assert.equal(condition(cr, 'UserKafkasUpToDate')?.message, 'list kafkas: the answer is not valid JSON');
    } finally {
      f.api.clearFaults();
    }
    f.api.inject('listKafkas', { hang: true }, { times: 2 });
    await f.create(KIND, 'hang', { accessTokenSecretName: TOKEN_SECRET });
    await f.waitFinished(KIND, 'hang', 'True');
    const events = await f.events('hang');
    assert.ok(
      events.some(
        (e) => e.type === 'Warning' && e.message === 'ConnectionError: list kafkas: no answer within 1000 ms',
      ),
      JSON.stringify(events),
    );
  });

  it('reports 200 answers that are not the promised objects as MalformedResponse on their step, keeping the previous lists', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    const cases: [
      route: 'token' | 'listKafkas' | 'listRegistries',
      body: unknown,
      condition: string,
      message: string,
    ][] = [
      ['listKafkas', 'a string', 'UserKafkasUpToDate', 'list kafkas: the answer is not a JSON object'],
      ['listKafkas', [kafka], 'UserKafkasUpToDate', 'list kafkas: the answer is not a JSON object'],
      ['listKafkas', { items: 'x' }, 'UserKafkasUpToDate', 'list kafkas: items is not a list (string)'],
      [
        'listKafkas',
        { items: [kafka, 42] },
        'UserKafkasUpToDate',
        'list kafkas: items[1] is not a JSON object',
      ],
      [
        'listKafkas',
        { items: [{ name: 'no id' }] },
        'UserKafkasUpToDate',
        'list kafkas: items[0].id is not a non-empty string (undefined)',
      ],
      [
        'listRegistries',
        { items: ['schemas'] },
        'ServiceRegistriesUpToDate',
        'list registries: items[0] is not a JSON object',
      ],
      ['token', 'a string', 'AcccesTokenSecretValid', 'token exchange: the answer is not a JSON object'],
    ];
    await f.create(KIND, 'shapes', { accessTokenSecretName: TOKEN_SECRET });
    const good = await f.waitFinished(KIND, 'shapes', 'True');
    for (const [route, body, step, message] of cases) {
      f.api.inject(route, { status: 200, body });
      try {
        await f.forceRefresh(KIND, 'shapes');
        const cr = await f.waitFinished(KIND, 'shapes', 'False');
        const label = `${route} ${JSON.stringify(body)}`;
        assert.equal(condition(cr, step)?.status, 'False', label);
        assert.equal(condition(cr, step)?.reason, 'MalformedResponse', label);
        assert.equal(condition(cr, step)?.message, message, label);
        assert.equal(condition(cr, 'Finished')?.message, message, label);
        assert.deepEqual(cr.status?.userKafkas, good.status?.userKafkas, label);
        assert.deepEqual(cr.status?.serviceRegistries, good.status?.serviceRegistries, label);
      } finally {
        f.api.clearFaults();
      }
    }
    // The operator kept serving: the next refresh succeeds.
    await f.forceRefresh(KIND, 'shapes');
    const again = await f.waitFinished(KIND, 'shapes', 'True');
    assert.deepEqual(again.status?.userKafkas, good.status?.userKafkas);
  });
});
