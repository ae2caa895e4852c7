import assert from 'node:assert/strict';
import { afterAll, describe, it } from 'vitest';
import { useFixture } from './use-fixture.ts';

describe('useFixture', () => {
  const events: string[] = [];
  afterAll(() => {
    assert.deepEqual(events, ['created', 'released 2']);
  });

  describe('a block that uses a fixture', () => {
    interface Counter {
      n: number;
      twice(): number;
    }
    const f = useFixture(
      async (): Promise<Counter> => {
        events.push('created');
        const counter: Counter = {
          n: 1,
          twice() {
            return this.n * 2;
          },
        };
        return counter;
      },
      async (made) => {
        events.push(`released ${made.n}`);
      },
    );
    assert.throws(() => f.n, /exists only from beforeAll to afterAll/);

    it('forwards reads, writes and method calls to the fixture made before the tests', () => {
      assert.deepEqual(events, ['created']);
      assert.equal(f.n, 1);
      f.n = 2;
      assert.equal(f.twice(), 4);
      assert.ok('twice' in f);
    });
  });
});
