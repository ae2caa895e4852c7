/**
 * KafkaConnection against the real API server and the local cloud services API: the golden path with the
 * exact status and metadata map, the labels step, the servicebinding.io binding Secret, a 404 kafka,
 * validation of every required field, a missing service-account Secret, a Secret of the binding's name it
 * does not own (left alone, SecretConflict), one of an earlier connection or on its way out (waited for),
 * the longest name, and answers that are not a Kafka instance (MalformedResponse).
 */
import assert from 'node:assert/strict';
import { HttpMethod, kubeRequest } from '@gitops/shared';
import { describe, it } from 'vitest';
import {
  condition,
  conditionFields,
  connectionSpec,
  decode,
  eventually,
  finishedMissingArgument,
  OFFLINE_TOKEN,
  type RhoasCr,
  SA_SECRET,
  TOKEN_SECRET,
  useRhoasFixture,
} from '../testing/rhoas-fixture.ts';

const KIND = 'KafkaConnection';
const conditionRows = (cr: RhoasCr) => conditionFields(cr, 'type', 'status', 'reason', 'message');

describe('KafkaConnection', () => {
  const f = useRhoasFixture({
    secrets: { [SA_SECRET]: { 'client-id': 'srvc-acct-1', 'client-secret': 'very-secret-value' } },
  });

  const spec = (kafkaId: string) => connectionSpec('kafkaId', kafkaId);

  it('publishes the connection details, the labels and a binding Secret', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    await f.create(KIND, 'orders', spec(kafka.id));
    const cr = await f.waitFinished(KIND, 'orders', 'True');
    assert.equal(cr.status?.message, 'Created');
    assert.match(String(cr.status?.updated), /^\d{4}-\d\d-\d\dT/);
    assert.equal(cr.status?.bootstrapServerHost, kafka.bootstrap_server_host);
    assert.equal(cr.status?.serviceAccountSecretName, SA_SECRET);
    assert.deepEqual(cr.status?.metadata, {
      saslMechanism: 'PLAIN',
      securityProtocol: 'SASL_SSL',
      cloudUI: `https://console.redhat.com/beta/application-services/streams/kafkas/${kafka.id}`,
      provider: 'rhoas',
      type: 'kafka',
    });
    assert.deepEqual(conditionFields(cr, 'type', 'status'), [
      ['AcccesTokenSecretValid', 'True'],
      ['FoundKafkaById', 'True'],
      ['Finished', 'True'],
    ]);
    assert.equal(cr.metadata.labels?.['app.kubernetes.io/component'], 'external-service');
    assert.equal(cr.metadata.labels?.['app.kubernetes.io/managed-by'], 'rhoas');

    assert.deepEqual(cr.status?.binding, { name: 'orders-binding' });
    const binding = await f.getSecret('orders-binding');
    assert.equal(binding?.type, 'servicebinding.io/kafka');
    assert.deepEqual(decode(binding?.data), {
      type: 'kafka',
      provider: 'rhoas',
      'bootstrap-servers': kafka.bootstrap_server_host,
      'sasl.mechanism': 'PLAIN',
      'security.protocol': 'SASL_SSL',
      'oauth-token-url': `${f.api.url}/auth/realms/rhoas/protocol/openid-connect/token`,
      'client-id': 'srvc-acct-1',
      'client-secret': 'very-secret-value',
    });
    const owners = (
      (binding?.metadata ?? {}) as { ownerReferences?: { kind: string; uid: string; controller: boolean }[] }
    ).ownerReferences;
    assert.deepEqual(
      owners?.map((o) => [o.kind, o.uid, o.controller]),
      [['KafkaConnection', cr.metadata.uid, true]],
    );
    // Neither the client secret nor any token shows in status, Events or logs (all of them written).
    await f.settled();
    const visible = JSON.stringify([cr, await f.events('orders')]) + f.logText();
    assert.ok(!visible.includes('very-secret-value'));
    assert.ok(!visible.includes(OFFLINE_TOKEN));
  });

  it('copies binary service-account credentials byte for byte into the binding Secret, and nowhere else', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    const planted = 'planted-binary-client-secret';
    const bytes = Buffer.concat([
      Buffer.from([0x00, 0xff, 0xfe]),
      Buffer.from(planted),
      Buffer.from([0x00, 0x1b]),
    ]);
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${f.namespace}/secrets`,
      body: {
        metadata: { name: 'sa-binary' },
        data: {
          'client-id': Buffer.from('srvc-acct-1').toString('base64'),
          'client-secret': bytes.toString('base64'),
        },
      },
    });
    await f.create(KIND, 'binary-sa', {
      ...spec(kafka.id),
      credentials: { serviceAccountSecretName: 'sa-binary' },
    });
    const cr = await f.waitFinished(KIND, 'binary-sa', 'True');
    const binding = await f.getSecret('binary-sa-binding');
    assert.equal(binding?.data?.['client-secret'], bytes.toString('base64'));
    await f.settled();
    const visible = JSON.stringify([cr, await f.events('binary-sa')]) + f.logText();
    assert.ok(!visible.includes(planted));
  });

  it('keeps labels a user set (component present), as the original', async () => {
    const kafka = f.seed.kafkas[1];
    assert.ok(kafka);
    await f.create(KIND, 'labelled', spec(kafka.id), { 'app.kubernetes.io/component': 'mine' });
    const cr = await f.waitFinished(KIND, 'labelled', 'True');
    assert.deepEqual(cr.metadata.labels, { 'app.kubernetes.io/component': 'mine' });
  });

  it('reports an unknown kafka id on FoundKafkaById with the 404 message, and writes no binding', async () => {
    await f.create(KIND, 'ghost', spec('no-such-kafka'));
    const cr = await f.waitFinished(KIND, 'ghost', 'False');
    assert.deepEqual(conditionFields(cr, 'type', 'status', 'reason', 'message'), [
      ['AcccesTokenSecretValid', 'True', '', ''],
      ['FoundKafkaById', 'False', 'ApiException', "Error 404: The requested resource doesn't exist"],
      ['Finished', 'False', 'ApiException', "Error 404: The requested resource doesn't exist"],
    ]);
    assert.equal(cr.status?.binding, undefined);
    assert.equal(await f.getSecret('ghost-binding'), undefined);
    // 404 is not retried: the request log shows one lookup.
    await f.operator.features.kafkaConnections.queue.whenIdle();
    assert.equal(
      f.api.requests().filter((r) => r.route === 'getKafka' && r.path.endsWith('/no-such-kafka')).length,
      1,
    );
  });

  it('validates every required field in order with the original message', async () => {
    const cases: [string, Record<string, unknown> | undefined, string][] = [
      ['v-spec', undefined, 'spec'],
      [
        'v-token',
        { kafkaId: 'x', credentials: { serviceAccountSecretName: SA_SECRET } },
        'spec.accessTokenSecretName',
      ],
      ['v-credentials', { kafkaId: 'x', accessTokenSecretName: TOKEN_SECRET }, 'spec.credentials'],
      [
        'v-sa',
        { kafkaId: 'x', accessTokenSecretName: TOKEN_SECRET, credentials: {} },
        'spec.credentials.serviceAccountSecretName',
      ],
      [
        'v-id',
        { accessTokenSecretName: TOKEN_SECRET, credentials: { serviceAccountSecretName: SA_SECRET } },
        'spec.kafkaId',
      ],
    ];
    for (const cr of await finishedMissingArgument(f, KIND, cases)) {
      assert.equal(condition(cr, 'Finished')?.reason, 'InvalidUserInput');
      assert.equal(condition(cr, 'AcccesTokenSecretValid')?.status, 'Unknown');
      assert.equal(condition(cr, 'FoundKafkaById')?.status, 'Unknown');
    }
    // A huge id is refused at admission, naming the field (the operator's own check stays for older objects).
    const err = await f.create(KIND, 'v-huge', spec('k'.repeat(50_000))).catch((e: unknown) => e);
    assert.equal((err as { statusCode?: number }).statusCode, 422);
    assert.match(String((err as Error).message), /spec\.kafkaId: Too long/);
  });

  it('leaves wrong types to admission (a clear 422), and keeps unknown spec fields such as forceRefresh', async () => {
    for (const [name, bad, field] of [
      ['t-id', { kafkaId: 42 }, 'spec.kafkaId'],
      ['t-credentials', { kafkaId: 'x', credentials: 'sa' }, 'spec.credentials'],
      ['t-spec', 'not an object', 'spec'],
    ] as const) {
      const err = await f.create(KIND, name, bad as never).catch((e: unknown) => e);
      assert.equal((err as { statusCode?: number }).statusCode, 422, name);
      assert.match(String((err as Error).message), new RegExp(field.replace('.', '\\.')), name);
    }
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    await f.create(KIND, 'extra', {
      ...spec(kafka.id),
      forceRefresh: '2026-01-01T00:00:00Z',
      somethingElse: { a: 1 },
    });
    const cr = await f.waitFinished(KIND, 'extra', 'True');
    assert.equal(cr.spec?.forceRefresh, '2026-01-01T00:00:00Z');
    assert.deepEqual(cr.spec?.somethingElse, { a: 1 });
  });

  it('writes the binding without credentials, and warns, when the service-account Secret is missing', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    await f.create(KIND, 'no-sa', {
      ...spec(kafka.id),
      credentials: { serviceAccountSecretName: 'missing-sa' },
    });
    await f.waitFinished(KIND, 'no-sa', 'True');
    const binding = await f.getSecret('no-sa-binding');
    assert.equal(decode(binding?.data)['client-id'], undefined);
    await eventually('the Warning Event', async () =>
      (await f.events('no-sa')).some(
        (e) => e.type === 'Warning' && e.reason === 'ServiceAccountSecretMissing',
      ),
    );
  });

  const dropFinalizers = (name: string) =>
    kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `/api/v1/namespaces/${f.namespace}/secrets/${name}`,
      body: { metadata: { finalizers: null } },
      contentType: 'application/merge-patch+json',
    }).catch(() => undefined);
  const controllerUid = (secret: { metadata: Record<string, unknown> } | undefined) =>
    (secret?.metadata.ownerReferences as { uid: string; controller?: boolean }[] | undefined)?.find(
      (o) => o.controller,
    )?.uid;

  it('leaves a Secret of the binding name that it does not own exactly as it was, reports SecretConflict, and the Secret outlives the connection', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    const users = await f.createSecret(
      'mine-binding',
      { type: 'kafka', 'bootstrap-servers': 'users-own.example.test:443', password: 'the-users-own-secret' },
      undefined,
      { type: 'servicebinding.io/kafka' },
    );
    await f.create(KIND, 'mine', spec(kafka.id));
    // A connection with a binding of its own, to see the garbage collector at work below.
    await f.create(KIND, 'ours', spec(kafka.id));
    const cr = await f.waitFinished(KIND, 'mine', 'False');
    const message =
      'Secret mine-binding exists and is not owned by this KafkaConnection; no binding Secret was written';
    assert.deepEqual(conditionRows(cr), [
      ['AcccesTokenSecretValid', 'True', '', ''],
      ['FoundKafkaById', 'True', '', ''],
      ['Finished', 'False', 'SecretConflict', message],
    ]);
    assert.equal(cr.status?.binding, undefined);
    // Not written, not adopted, no owner reference: the same object, resourceVersion included.
    assert.deepEqual(await f.getSecret('mine-binding'), users);
    await eventually('the ProcessingFailed Event', async () =>
      (await f.events('mine')).some(
        (e) =>
          e.type === 'Warning' &&
          e.reason === 'ProcessingFailed' &&
          e.message === `SecretConflict: ${message}`,
      ),
    );

    const ours = await f.waitFinished(KIND, 'ours', 'True');
    assert.equal(controllerUid(await f.getSecret('ours-binding')), ours.metadata.uid);
    await f.delete(KIND, 'mine');
    await f.delete(KIND, 'ours');
    await eventually('the garbage collector deleted the binding Secret the operator owned', async () =>
      (await f.getSecret('ours-binding')) === undefined ? true : undefined,
    );
    assert.deepEqual(await f.getSecret('mine-binding'), users);
    const visible = JSON.stringify([cr, await f.events('mine')]) + f.logText();
    assert.ok(!visible.includes('the-users-own-secret'));
  });

  it('waits while the binding Secret of an earlier connection of the same name awaits garbage collection, then writes its own', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    const first = await f.create(KIND, 'again', spec(kafka.id));
    await f.waitFinished(KIND, 'again', 'True');
    // Hold the Secret as a slow garbage collector would, then delete and create the connection again.
    await kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `/api/v1/namespaces/${f.namespace}/secrets/again-binding`,
      body: { metadata: { finalizers: ['rhoas.example.test/hold'] } },
      contentType: 'application/merge-patch+json',
    });
    try {
      await f.delete(KIND, 'again');
      await eventually('the first connection is gone', async () =>
        (await f.get(KIND, 'again')) === undefined ? true : undefined,
      );
      const second = await f.create(KIND, 'again', spec(kafka.id));
      assert.notEqual(second.metadata.uid, first.metadata.uid);
      const waiting = await f.waitFinished(KIND, 'again', 'False');
      assert.deepEqual(conditionRows(waiting)?.at(-1), [
        'Finished',
        'False',
        'SecretConflict',
        'Secret again-binding exists and is owned by an earlier KafkaConnection of this name; retried until the garbage collector has deleted it',
      ]);
      assert.equal(controllerUid(await f.getSecret('again-binding')), first.metadata.uid);
    } finally {
      await dropFinalizers('again-binding');
    }
    // No spec change: the retry writes the new connection's own Secret once the old one is gone.
    const done = await eventually('the second connection Finished=True with its own binding', async () => {
      const cr = await f.get(KIND, 'again');
      const secret = await f.getSecret('again-binding');
      return condition(cr, 'Finished')?.status === 'True' && controllerUid(secret) === cr?.metadata.uid
        ? cr
        : undefined;
    });
    assert.deepEqual(done.status?.binding, { name: 'again-binding' });
  });

  it('waits while a Secret of the binding name is being deleted, and never writes it', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    await f.createSecret('leaving-binding', { note: 'the users own' }, undefined, {
      finalizers: ['rhoas.example.test/hold'],
    });
    try {
      await f.deleteSecret('leaving-binding');
      const leaving = await f.getSecret('leaving-binding');
      assert.ok(leaving?.metadata.deletionTimestamp);
      await f.create(KIND, 'leaving', spec(kafka.id));
      const cr = await f.waitFinished(KIND, 'leaving', 'False');
      assert.deepEqual(conditionRows(cr)?.at(-1), [
        'Finished',
        'False',
        'BindingSecretFailed',
        'binding Secret leaving-binding could not be written: it is being deleted (retried until it is gone)',
      ]);
      assert.deepEqual(await f.getSecret('leaving-binding'), leaving);
    } finally {
      await dropFinalizers('leaving-binding');
    }
    const done = await f.waitFinished(KIND, 'leaving', 'True');
    const binding = await f.getSecret('leaving-binding');
    assert.equal(controllerUid(binding), done.metadata.uid);
    assert.equal(decode(binding?.data).note, undefined);
  });

  it('gives the longest valid name (253 characters) a valid binding Secret of its own', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    const name = `${'d'.repeat(244)}.${'e'.repeat(8)}`;
    await f.create(KIND, name, spec(kafka.id));
    const cr = await f.waitFinished(KIND, name, 'True');
    const binding = (cr.status?.binding as { name?: string } | undefined)?.name ?? '';
    assert.match(binding, /^d{234}-[0-9a-f]{10}-binding$/);
    const secret = await f.getSecret(binding);
    assert.equal(secret?.type, 'servicebinding.io/kafka');
    assert.equal(controllerUid(secret), cr.metadata.uid);
    assert.equal(decode(secret?.data)['bootstrap-servers'], kafka.bootstrap_server_host);
  });

  it('reports a 200 answer that is not a Kafka instance as MalformedResponse on FoundKafkaById, writes no binding, and keeps serving', async () => {
    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    const cases: [name: string, body: unknown, message: string][] = [
      ['m-string', 'a string', 'get kafka: the answer is not a JSON object'],
      ['m-array', [kafka], 'get kafka: the answer is not a JSON object'],
      ['m-number', 42, 'get kafka: the answer is not a JSON object'],
      ['m-no-id', { ...kafka, id: undefined }, 'get kafka: id is not a non-empty string (undefined)'],
      [
        'm-host',
        { ...kafka, bootstrap_server_host: 9092 },
        'get kafka: bootstrap_server_host is not a string (number)',
      ],
      [
        'm-other',
        { ...kafka, id: 'another' },
        `get kafka: the answer is Kafka instance another, not ${kafka.id}`,
      ],
    ];
    for (const [name, body, message] of cases) {
      f.api.inject('getKafka', { status: 200, body });
      try {
        await f.create(KIND, name, spec(kafka.id));
        const cr = await f.waitFinished(KIND, name, 'False');
        assert.deepEqual(conditionRows(cr), [
          ['AcccesTokenSecretValid', 'True', '', ''],
          ['FoundKafkaById', 'False', 'MalformedResponse', message],
          ['Finished', 'False', 'MalformedResponse', message],
        ]);
        assert.equal(cr.status?.bootstrapServerHost, undefined);
        assert.equal(cr.status?.binding, undefined);
        assert.equal(await f.getSecret(`${name}-binding`), undefined);
      } finally {
        f.api.clearFaults();
      }
    }
    await f.create(KIND, 'after-malformed', spec(kafka.id));
    assert.equal(
      (await f.waitFinished(KIND, 'after-malformed', 'True')).status?.bootstrapServerHost,
      kafka.bootstrap_server_host,
    );
  });
});
