import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { createBatcher } from './batcher.ts';

/** A run that records its batches and answers when released. */
function recordingRun() {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  return {
    batches,
    releaseNext: () => releases.shift()?.(),
    run: (items: readonly number[]) => {
      batches.push([...items]);
      return new Promise<number[]>((resolve) => releases.push(() => resolve(items.map((i) => i * 10))));
    },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('createBatcher', () => {
  it('sends a lone item at once; items that arrive while it is written go together next, each with its own result', async () => {
    const recorder = recordingRun();
    const batcher = createBatcher({ run: recorder.run });
    const first = batcher.submit(1);
    await tick();
    assert.deepEqual(recorder.batches, [[1]], 'nothing was in flight: the first item went alone, at once');
    const later = [batcher.submit(2), batcher.submit(3), batcher.submit(4)];
    await tick();
    assert.deepEqual(recorder.batches, [[1]], 'the others wait while the first batch is in flight');
    recorder.releaseNext();
    assert.equal(await first, 10);
    await tick();
    assert.deepEqual(recorder.batches, [[1], [2, 3, 4]]);
    recorder.releaseNext();
    assert.deepEqual(await Promise.all(later), [20, 30, 40]);
    await batcher.whenIdle();
  });

  it('keeps batches at maxBatch items', async () => {
    const recorder = recordingRun();
    const batcher = createBatcher({ run: recorder.run, maxBatch: 2 });
    const all = [1, 2, 3, 4, 5].map((i) => batcher.submit(i));
    for (let i = 0; i < 3; i++) {
      await tick();
      recorder.releaseNext();
    }
    assert.deepEqual(await Promise.all(all), [10, 20, 30, 40, 50]);
    assert.deepEqual(recorder.batches, [[1], [2, 3], [4, 5]]);
  });

  it('a failed batch rejects every item in it, and the next batch still goes', async () => {
    let calls = 0;
    const batcher = createBatcher<number, number>({
      run: async (items) => {
        calls++;
        if (calls === 2) throw new Error('database gone');
        return items.map((i) => i + 1);
      },
    });
    const first = batcher.submit(1);
    const failed = [batcher.submit(2), batcher.submit(3)];
    assert.equal(await first, 2);
    for (const f of failed) await assert.rejects(f, /database gone/);
    assert.equal(await batcher.submit(4), 5);
  });

  it('a run that answers the wrong number of results fails its batch instead of mixing them up', async () => {
    const batcher = createBatcher<number, number>({ run: async () => [1] });
    const first = batcher.submit(1);
    const pair = [batcher.submit(2), batcher.submit(3)];
    assert.equal(await first, 1);
    for (const p of pair) await assert.rejects(p, /a batch of 2 answered 1 results/);
  });
});
