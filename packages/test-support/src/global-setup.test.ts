import assert from 'node:assert/strict';
import { describe, it } from 'vitest';

describe('the global setup module', () => {
  it('installs no exit hook in the vitest process (one ending on beforeExit would turn a failed run into exit code 0)', async () => {
    const events = ['beforeExit', 'exit', 'SIGINT', 'SIGTERM'] as const;
    const before = events.map((event) => process.listenerCount(event));
    const module = await import('./global-setup.ts');
    assert.equal(typeof module.default, 'function');
    assert.deepEqual(
      events.map((event) => process.listenerCount(event)),
      before,
    );
  });
});
