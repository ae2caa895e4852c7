import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { eventually } from './eventually.ts';

describe('eventually', () => {
  it('returns the first value that is neither undefined nor false, retrying until then', async () => {
    const answers: unknown[] = [undefined, false, 0, 'late'];
    let calls = 0;
    const value = await eventually('a value', () => answers[calls++] as number | undefined | false);
    assert.equal(value, 0);
    assert.equal(calls, 3);
  });

  it('treats a throwing check as not yet and returns once it succeeds', async () => {
    let calls = 0;
    const value = await eventually('the object to exist', async () => {
      calls++;
      if (calls < 3) throw new Error('404 not found');
      return { name: 'obj' };
    });
    assert.deepEqual(value, { name: 'obj' });
    assert.equal(calls, 3);
  });

  it('fails naming what it waited for, with the last error as cause and in the message', async () => {
    const last = new Error('connection refused');
    await assert.rejects(
      eventually(
        'the API server',
        () => {
          throw last;
        },
        300,
      ),
      (error: Error) => {
        assert.match(error.message, /^timed out after 300 ms waiting for the API server/);
        assert.match(error.message, /connection refused/);
        assert.equal(error.cause, last);
        return true;
      },
    );
  });

  it('fails without a cause when the check only ever answered undefined', async () => {
    await assert.rejects(
      eventually('nothing', () => undefined, 200),
      (error: Error) => {
        assert.equal(error.message, 'timed out after 200 ms waiting for nothing');
        assert.equal(error.cause, undefined);
        return true;
      },
    );
  });
});
