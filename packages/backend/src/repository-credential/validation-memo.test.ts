import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import type { LsRemoteOutcome } from './git-ls-remote.ts';
import { createValidationMemo } from './validation-memo.ts';

const MINUTE = 60_000;

describe('validation memo (never a hot loop)', () => {
  const setup = () => {
    let clock = 0;
    let runs = 0;
    const memo = createValidationMemo({
      revalidateMs: 10 * MINUTE,
      failureBackoffMs: 15_000,
      now: () => clock,
    });
    const check = (fingerprint: string, outcome: LsRemoteOutcome) =>
      memo.check('ns/name', fingerprint, async () => {
        runs++;
        return outcome;
      });
    return { memo, check, advance: (ms: number) => (clock += ms), runs: () => runs };
  };
  const rejected: LsRemoteOutcome = { result: 'invalidCredentials' };

  it('re-validates the same valid input only every revalidate interval', async () => {
    const t = setup();
    assert.deepEqual(await t.check('a', { result: 'valid' }), {
      outcome: { result: 'valid' },
      requeueAfter: 10 * MINUTE,
      ran: true,
    });
    for (let i = 0; i < 50; i++) await t.check('a', { result: 'valid' });
    assert.equal(t.runs(), 1);
    t.advance(10 * MINUTE);
    await t.check('a', { result: 'valid' });
    assert.equal(t.runs(), 2);
  });

  it('backs off exponentially on repeated failures of the same input, capped at the interval', async () => {
    const t = setup();
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const result = await t.check('a', rejected);
      assert.equal(result.ran, true);
      waits.push(result.requeueAfter);
      for (let j = 0; j < 10; j++) assert.equal((await t.check('a', rejected)).ran, false);
      t.advance(result.requeueAfter);
    }
    assert.deepEqual(waits, [15_000, 30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000]);
    assert.equal(t.runs(), 8);
  });

  it('validates a changed input (edited Secret or CR) at once', async () => {
    const t = setup();
    await t.check('a', rejected);
    const changed = await t.check('b', { result: 'valid' });
    assert.equal(changed.ran, true);
    assert.equal(t.runs(), 2);
  });

  it('forgets an object', async () => {
    const t = setup();
    await t.check('a', { result: 'valid' });
    t.memo.forget('ns/name');
    assert.equal((await t.check('a', { result: 'valid' })).ran, true);
  });
});
