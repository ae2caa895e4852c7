import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createSilentLogger } from './logger.ts';
import { runPeriodically } from './periodic.ts';
import { eventually } from './testing/eventually.ts';

describe('runPeriodically', () => {
  it('runs at once, keeps running after a failed run, and never runs after stop', async () => {
    let runs = 0;
    const periodic = runPeriodically(
      'test',
      1,
      async () => {
        runs++;
        if (runs === 2) throw new Error('one bad run');
      },
      { logger: createSilentLogger() },
    );
    await eventually('four runs', () => runs >= 4);
    await periodic.stop();
    const stoppedAt = runs;
    // Timers keep firing meanwhile (another 1 ms task runs ten times), so the stopped one had every chance.
    let witness = 0;
    const other = runPeriodically('witness', 1, async () => void witness++, {
      logger: createSilentLogger(),
    });
    await eventually('ten runs of another task', () => witness >= 10);
    await other.stop();
    assert.equal(runs, stoppedAt);
  });

  it('never overlaps two runs of the same task', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    const periodic = runPeriodically(
      'slow',
      1,
      async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise((r) => setTimeout(r, 5));
        active--;
        runs++;
      },
      { logger: createSilentLogger() },
    );
    await eventually('three runs', () => runs >= 3);
    await periodic.stop();
    assert.equal(maxActive, 1);
  });

  it('waits a period before the first run when runAtStart is false', async () => {
    let runs = 0;
    const periodic = runPeriodically('later', 60_000, async () => void runs++, {
      logger: createSilentLogger(),
      runAtStart: false,
    });
    await periodic.stop();
    assert.equal(runs, 0);
  });
});
