import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { backoffCeiling, backoffDelay } from './backoff.ts';

describe('backoff', () => {
  it('backs off exponentially with bounded jitter and a cap', () => {
    const low = () => 0;
    const high = () => 0.999_999;
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7].map((attempt) => backoffDelay(attempt, 800, 30_000, low)),
      [640, 1280, 2560, 5120, 10240, 20480, 24000],
    );
    assert.equal(backoffDelay(50, 800, 30_000, high), 36_000);
    assert.equal(
      backoffDelay(1, 800, 30_000, () => 0.5),
      800,
    );
  });

  it('without jitter starts at the initial delay (also for attempt 0), doubles and stays at the cap', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4].map((attempt) => backoffCeiling(attempt, 5, 1_000_000)),
      [5, 5, 10, 20, 40],
    );
    assert.equal(backoffCeiling(10_000, 5, 1_000_000), 1_000_000);
    assert.equal(backoffCeiling(10_000, 0, 1_000), 0);
  });
});
