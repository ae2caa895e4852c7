/**
 * CloudServiceAccountRequest against the real API server and the local cloud services API: the service
 * account and its Secret (base64 keys, owner reference, `message: Created`), one service account per
 * processing, a Secret it owns updated on a re-trigger, a Secret owned by someone else refused before any
 * service account is created, API errors and answers that are not a service account on
 * ServiceAccountCreated, validation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import {
  condition,
  conditionFields,
  decode,
  finishedMissingArgument,
  TOKEN_SECRET,
  useRhoasFixture,
} from '../testing/rhoas-fixture.ts';

const KIND = 'CloudServiceAccountRequest';

describe('CloudServiceAccountRequest', () => {
  const f = useRhoasFixture();

  const spec = (secret: string) => ({
    serviceAccountName: 'rhoas-operator-ab12',
    serviceAccountDescription: 'made by the console',
    serviceAccountSecretName: secret,
    accessTokenSecretName: TOKEN_SECRET,
  });

  it('creates a service account and its Secret (client-id, client-secret), owned by the CR', async () => {
    const before = f.api.serviceAccounts().length;
    await f.create(KIND, 'golden', spec('golden-sa'));
    const cr = await f.waitFinished(KIND, 'golden', 'True');
    assert.equal(cr.status?.message, 'Created');
    assert.equal(cr.status?.serviceAccountSecretName, 'golden-sa');
    assert.match(String(cr.status?.updated), /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(conditionFields(cr, 'type', 'status'), [
      ['AcccesTokenSecretValid', 'True'],
      ['ServiceAccountCreated', 'True'],
      ['ServiceAccountSecretCreated', 'True'],
      ['Finished', 'True'],
    ]);
    const accounts = f.api.serviceAccounts().slice(before);
    assert.deepEqual(
      accounts.map((a) => [a.name, a.description]),
      [['rhoas-operator-ab12', 'made by the console']],
    );
    const secret = await f.getSecret('golden-sa');
    assert.equal(secret?.type, 'Opaque');
    assert.deepEqual(Object.keys(secret?.data ?? {}).sort(), ['client-id', 'client-secret']);
    const values = decode(secret?.data);
    assert.equal(values['client-id'], accounts[0]?.client_id);
    assert.ok((values['client-secret'] ?? '').length > 10);
    const owners = (
      (secret?.metadata ?? {}) as {
        ownerReferences?: {
          apiVersion: string;
          kind: string;
          name: string;
          uid: string;
          controller: boolean;
        }[];
      }
    ).ownerReferences;
    assert.deepEqual(
      owners?.map((o) => [o.apiVersion, o.kind, o.name, o.uid, o.controller]),
      [['rhoas.redhat.com/v1alpha1', 'CloudServiceAccountRequest', 'golden', cr.metadata.uid, true]],
    );
    await f.settled();
    const visible = JSON.stringify([cr, await f.events('golden')]) + f.logText();
    assert.ok(!visible.includes(values['client-secret'] ?? 'never'), 'the client secret is not visible');
  });

  it('a re-trigger creates one more service account and updates the Secret it owns', async () => {
    await f.create(KIND, 'again', spec('again-sa'));
    await f.waitFinished(KIND, 'again', 'True');
    const first = decode((await f.getSecret('again-sa'))?.data);
    const count = f.api.serviceAccounts().length;
    await f.forceRefresh(KIND, 'again');
    await f.waitFinished(KIND, 'again', 'True');
    assert.equal(f.api.serviceAccounts().length, count + 1);
    const second = decode((await f.getSecret('again-sa'))?.data);
    assert.notEqual(second['client-id'], first['client-id']);
  });

  it('refuses a Secret that belongs to someone else, before creating any service account', async () => {
    await f.createSecret('taken', { 'client-id': 'someone', 'client-secret': 'else' });
    const count = f.api.serviceAccounts().length;
    await f.create(KIND, 'conflict', spec('taken'));
    const cr = await f.waitFinished(KIND, 'conflict', 'False');
    assert.deepEqual(conditionFields(cr, 'type', 'status', 'reason'), [
      ['AcccesTokenSecretValid', 'True', ''],
      ['ServiceAccountCreated', 'Unknown', ''],
      ['ServiceAccountSecretCreated', 'False', 'SecretConflict'],
      ['Finished', 'False', 'SecretConflict'],
    ]);
    assert.equal(
      condition(cr, 'Finished')?.message,
      'Secret taken exists and is not owned by this CloudServiceAccountRequest; no service account was created',
    );
    assert.equal(f.api.serviceAccounts().length, count);
    assert.deepEqual(decode((await f.getSecret('taken'))?.data), {
      'client-id': 'someone',
      'client-secret': 'else',
    });
  });

  it('reports an API error on ServiceAccountCreated and writes no Secret', async () => {
    f.api.inject('createServiceAccount', {
      status: 400,
      body: { reason: 'max allowed number:2 of service accounts reached' },
    });
    try {
      await f.create(KIND, 'limit', spec('limit-sa'));
      const cr = await f.waitFinished(KIND, 'limit', 'False');
      assert.equal(condition(cr, 'ServiceAccountCreated')?.status, 'False');
      assert.equal(
        condition(cr, 'ServiceAccountCreated')?.message,
        'Provided user input is invalid: max allowed number:2 of service accounts reached',
      );
      assert.equal(condition(cr, 'ServiceAccountSecretCreated')?.status, 'Unknown');
      assert.equal(await f.getSecret('limit-sa'), undefined);
    } finally {
      f.api.clearFaults();
    }
  });

  it('reports a 200 answer that is not a service account as MalformedResponse, and writes no Secret', async () => {
    const cases: [name: string, body: unknown, message: string][] = [
      ['m-string', 'a string', 'create service account: the answer is not a JSON object'],
      [
        'm-array',
        [{ client_id: 'x', client_secret: 'y' }],
        'create service account: the answer is not a JSON object',
      ],
      [
        'm-secret',
        { client_id: 'x', client_secret: 5 },
        'create service account: client_secret is not a non-empty string (number)',
      ],
    ];
    for (const [name, body, message] of cases) {
      f.api.inject('createServiceAccount', { status: 200, body });
      try {
        await f.create(KIND, name, spec(`${name}-sa`));
        const cr = await f.waitFinished(KIND, name, 'False');
        assert.deepEqual(conditionFields(cr, 'type', 'status', 'reason', 'message'), [
          ['AcccesTokenSecretValid', 'True', '', ''],
          ['ServiceAccountCreated', 'False', 'MalformedResponse', message],
          ['ServiceAccountSecretCreated', 'Unknown', '', ''],
          ['Finished', 'False', 'MalformedResponse', message],
        ]);
        assert.equal(await f.getSecret(`${name}-sa`), undefined);
      } finally {
        f.api.clearFaults();
      }
    }
  });

  it('validates every required field in order', async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['v-token', { serviceAccountName: 'a', serviceAccountSecretName: 'b' }, 'spec.accessTokenSecretName'],
      [
        'v-name',
        { accessTokenSecretName: TOKEN_SECRET, serviceAccountSecretName: 'b' },
        'spec.serviceAccountName',
      ],
      [
        'v-secret',
        { accessTokenSecretName: TOKEN_SECRET, serviceAccountName: 'a' },
        'spec.serviceAccountSecretName',
      ],
    ];
    for (const cr of await finishedMissingArgument(f, KIND, cases)) {
      assert.equal(condition(cr, 'ServiceAccountCreated')?.status, 'Unknown');
    }
  });
});
