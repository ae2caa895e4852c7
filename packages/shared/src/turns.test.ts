import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createTurns } from './turns.ts';

describe('createTurns', () => {
  it('runs the work of one key one at a time, in order, even after a failure; other keys alongside', async () => {
    const turns = createTurns();
    const log: string[] = [];
    const { promise: released, resolve: release } = Promise.withResolvers<void>();
    const first = turns.run('a', async () => {
      log.push('a1 start');
      await released;
      log.push('a1 end');
      throw new Error('a1 failed');
    });
    const second = turns.run('a', async () => {
      log.push('a2');
      return 2;
    });
    const other = turns.run('b', async () => {
      log.push('b1');
      return 'b';
    });
    assert.equal(await other, 'b');
    assert.deepEqual(log, ['a1 start', 'b1']);
    release();
    await assert.rejects(first, /a1 failed/);
    assert.equal(await second, 2);
    assert.deepEqual(log, ['a1 start', 'b1', 'a1 end', 'a2']);
    // Forgotten once settled (after the settling callbacks ran).
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(turns.size, 0);
  });
});
