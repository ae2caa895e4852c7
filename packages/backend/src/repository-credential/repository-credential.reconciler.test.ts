import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { nextConditions } from './repository-credential.conditions.ts';
import { conditionsEvent, outcomeOfCheck } from './repository-credential.reconciler.ts';
import { fingerprintOf } from './repository-credential.secret.ts';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const spec = { repository: 'https://h/r', secret: 's', type: 'git' } as const;

describe('RepositoryCredential steps', () => {
  it('outcomeOfCheck: valid, refused credentials, and an unusable URL or an unreachable server', () => {
    assert.deepEqual(outcomeOfCheck({ result: 'valid' }, spec), { kind: 'valid', repository: 'https://h/r' });
    assert.deepEqual(outcomeOfCheck({ result: 'invalidCredentials' }, spec), {
      kind: 'invalidCredentials',
      repository: 'https://h/r',
      secret: 's',
    });
    for (const result of ['invalidUrl', 'unreachable'] as const) {
      assert.deepEqual(outcomeOfCheck({ result, detail: 'd' }, spec), {
        kind: 'invalidRepositoryUrl',
        repository: 'https://h/r',
        detail: 'd',
      });
    }
  });

  it('conditionsEvent: an error when new or changed, resolved when gone, none while unchanged', () => {
    const valid = nextConditions([], { kind: 'valid', repository: 'https://h/r' }, t0, 1);
    const missing = nextConditions(valid, { kind: 'secretNotFound', secret: 's' }, t0, 1);
    const otherError = nextConditions(missing, { kind: 'error', message: 'm' }, t0, 1);
    assert.equal(conditionsEvent([], valid), undefined);
    assert.equal(conditionsEvent(valid, missing), 'error');
    assert.equal(conditionsEvent([], missing), 'error');
    assert.equal(conditionsEvent(missing, otherError), 'error');
    assert.equal(conditionsEvent(missing, missing), undefined);
    assert.equal(conditionsEvent(missing, valid), 'resolved');
  });

  it('fingerprintOf: changes with the URL, the type and any credential, and holds no credential', () => {
    const base = fingerprintOf('uid', 'https://h/r', 'git', { username: 'u', password: 'secret-pw' });
    assert.doesNotMatch(base, /secret-pw/);
    assert.equal(base, fingerprintOf('uid', 'https://h/r', 'git', { username: 'u', password: 'secret-pw' }));
    for (const other of [
      fingerprintOf('uid', 'https://h/other', 'git', { username: 'u', password: 'secret-pw' }),
      fingerprintOf('uid', 'https://h/r', 'helm', { username: 'u', password: 'secret-pw' }),
      fingerprintOf('uid', 'https://h/r', 'git', { username: 'u', password: 'changed' }),
      fingerprintOf('uid2', 'https://h/r', 'git', { username: 'u', password: 'secret-pw' }),
    ]) {
      assert.notEqual(other, base);
    }
  });
});
