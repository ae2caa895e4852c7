import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { resolved, withError, withSuccess } from './condition-pair.ts';

const t0 = new Date('2026-01-01T00:00:00Z');
const t1 = new Date('2026-01-01T01:00:00Z');
const brief = (list: { type: string; status: string; reason?: string; message?: string }[]) =>
  list.map(({ type, status, reason, message }) => ({ type, status, reason, message }));

describe('the ErrorOccurred/Reconciled condition pair', () => {
  it('an error adds ErrorOccurred then Reconciled, with the same message', () => {
    assert.deepEqual(brief(withError([], 'SecretNotFound', 'm', t0)), [
      { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message: 'm' },
      { type: 'Reconciled', status: 'False', reason: 'SecretNotFound', message: 'm' },
    ]);
  });

  it('the same error again changes nothing (times kept); another reason or message replaces both', () => {
    const first = withError([], 'SecretNotFound', 'm', t0);
    assert.deepEqual(withError(first, 'SecretNotFound', 'm', t1), first);
    const other = withError(first, 'InvalidEnvironment', 'n', t1);
    assert.deepEqual(brief(other), [
      { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message: 'n' },
      { type: 'Reconciled', status: 'False', reason: 'InvalidEnvironment', message: 'n' },
    ]);
    assert.equal(other[1]?.lastTransitionTime, '2026-01-01T01:00:00Z');
  });

  it('resolving touches only existing conditions: <reason>Resolved, empty message; nothing for none', () => {
    assert.deepEqual(resolved([], t0), []);
    const fixed = resolved(withError([], 'SecretNotFound', 'm', t0), t1);
    assert.deepEqual(brief(fixed), [
      { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurredResolved', message: '' },
      { type: 'Reconciled', status: 'True', reason: 'SecretNotFoundResolved', message: '' },
    ]);
    assert.deepEqual(resolved(fixed, t1), fixed);
  });

  it("a binding's success pair is ErrorOccurred False/ErrorOccurred and Reconciled True/<reason>", () => {
    assert.deepEqual(brief(withSuccess(withError([], 'GitOpsRepoNotReady', 'm', t0), 'Reconciled', t1)), [
      { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurred', message: '' },
      { type: 'Reconciled', status: 'True', reason: 'Reconciled', message: '' },
    ]);
  });
});
