import assert from 'node:assert/strict';
import { ManagedEnvironmentReason } from '@gitops/api';
import { KubeApiError, type KubeCondition } from '@gitops/shared';
import { describe, it } from 'vitest';
import { installFailure, isNewSecret } from './managed-environment.connect.ts';
import { removalAttempts } from './managed-environment.delete.ts';
import { conditionChange } from './managed-environment.reconciler.ts';

const type = 'ConnectionInitializationSucceeded';
const t0 = new Date('2026-03-01T10:00:00Z');
const t1 = new Date('2026-03-01T11:00:00Z');
const succeeded = { status: 'True', reason: 'Succeeded', message: '' } as const;

describe('ManagedEnvironment steps: the condition', () => {
  it('a first condition is a change with an Event', () => {
    const change = conditionChange([], succeeded, 1, t0);
    assert.deepEqual(change, {
      next: [{ type, ...succeeded, observedGeneration: 1, lastTransitionTime: '2026-03-01T10:00:00Z' }],
      same: false,
    });
  });

  it('the same condition of the same generation is no change', () => {
    const conditions = conditionChange([], succeeded, 1, t0)?.next ?? [];
    assert.equal(conditionChange(conditions, succeeded, 1, t1), undefined);
  });

  it('a new generation only is written without an Event, keeping lastTransitionTime', () => {
    const conditions = conditionChange([], succeeded, 1, t0)?.next ?? [];
    const change = conditionChange(conditions, succeeded, 2, t1);
    assert.equal(change?.same, true);
    assert.equal(change?.next[0]?.observedGeneration, 2);
    assert.equal(change?.next[0]?.lastTransitionTime, '2026-03-01T10:00:00Z');
  });

  it('another message is a transition (an Event)', () => {
    const conditions: KubeCondition[] = conditionChange([], succeeded, 1, t0)?.next ?? [];
    const change = conditionChange(
      conditions,
      { status: 'False', reason: 'SecretNotFound', message: 'm' },
      1,
      t1,
    );
    assert.equal(change?.same, false);
    assert.equal(change?.next[0]?.lastTransitionTime, '2026-03-01T11:00:00Z');
  });
});

describe('ManagedEnvironment steps: the connection', () => {
  const secret = (creationTimestamp?: string) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 's', ...(creationTimestamp ? { creationTimestamp } : {}) },
  });

  it('a Secret is new for 60 s after its creation; without a timestamp never', () => {
    const created = Date.parse('2026-03-01T10:00:00Z');
    assert.equal(isNewSecret(secret('2026-03-01T10:00:00Z'), created + 59_999), true);
    assert.equal(isNewSecret(secret('2026-03-01T10:00:00Z'), created + 60_000), false);
    assert.equal(isNewSecret(secret(), created), false);
    assert.equal(isNewSecret(undefined, created), false);
  });

  it('a failed install says UnableToInstallServiceAccount, except when no client could connect', () => {
    const api = (statusCode: number, message = 'x') =>
      new KubeApiError({ statusCode, method: 'POST', path: '/api/v1/namespaces', message });
    for (const status of [401, 403, 500]) {
      const outcome = installFailure(api(status), 'https://a');
      assert.equal(outcome.reason, ManagedEnvironmentReason.UnableToInstallServiceAccount);
      assert.match(outcome.message, /^unable to install the ServiceAccount on the cluster: /);
    }
    const dns = installFailure(api(0, 'POST /api: getaddrinfo ENOTFOUND x.invalid'), 'https://a');
    assert.equal(dns.reason, ManagedEnvironmentReason.UnableToCreateClient);
  });
});

describe('ManagedEnvironment steps: removing the ServiceAccount', () => {
  const target = { server: 'https://a', caData: 'ca', token: 'user-token' };
  const stored = { apiUrl: 'https://stored', token: 'our-token' };

  it("the user's credentials first, then our stored token on the user's cluster entry", () => {
    assert.deepEqual(removalAttempts(target, stored), [
      { target, token: 'user-token' },
      { target, token: 'our-token' },
    ]);
  });

  it('without usable user credentials, the stored token on the stored API URL; with neither, nothing', () => {
    assert.deepEqual(removalAttempts(undefined, stored), [
      { target: { server: 'https://stored', caData: undefined, token: 'our-token' }, token: 'our-token' },
    ]);
    assert.deepEqual(removalAttempts(target, undefined), [{ target, token: 'user-token' }]);
    assert.deepEqual(removalAttempts(undefined, undefined), []);
  });
});
