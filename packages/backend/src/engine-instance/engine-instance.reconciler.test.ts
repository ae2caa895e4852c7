import assert from 'node:assert/strict';
import { ENGINE_INSTANCE_FINALIZER } from '@gitops/api';
import { createLogger } from '@gitops/shared';
import { describe, test } from 'vitest';
import { cordonFollower, creatable } from './engine-instance.reconciler.ts';
import { parseEngineInstance } from './engine-instance.status.ts';

const object = (fields: { cordoned?: boolean; observedGeneration?: number } = {}) =>
  parseEngineInstance({
    metadata: { name: 'east', generation: 3, finalizers: [ENGINE_INSTANCE_FINALIZER] },
    spec: { cordoned: fields.cordoned ?? false },
    ...(fields.observedGeneration === undefined
      ? {}
      : { status: { observedGeneration: fields.observedGeneration } }),
  });

/** What creatable reads: the log, the clock, the retry interval and the names remembered. */
function steps(clock: { ms: number }) {
  return {
    logger: createLogger({ name: 'test', level: 'silent' }),
    now: () => new Date(clock.ms),
    otherShardRetryMs: 60_000,
    badNames: new Set<string>(),
    otherShard: new Map<string, number>(),
  };
}

describe('GitOpsEngineInstance steps', () => {
  test('cordonFollower: none when spec and database agree', () => {
    assert.equal(
      cordonFollower(object({ cordoned: true, observedGeneration: 3 }), { cordoned: true }),
      undefined,
    );
    assert.equal(cordonFollower(object(), { cordoned: false }), undefined);
  });

  test('cordonFollower: an applied spec follows the database, an unapplied one is the operator switch', () => {
    assert.equal(
      cordonFollower(object({ cordoned: false, observedGeneration: 3 }), { cordoned: true }),
      'spec',
    );
    assert.equal(
      cordonFollower(object({ cordoned: true, observedGeneration: 2 }), { cordoned: false }),
      'database',
    );
    // No status yet (no agent registered it): the spec written before is applied when it registers.
    assert.equal(cordonFollower(object({ cordoned: true }), { cordoned: false }), 'database');
  });

  test('creatable: a name that is no object name never, and is remembered (logged once)', () => {
    const deps = steps({ ms: 0 });
    assert.equal(creatable(deps, 'East_1'), false);
    assert.equal(creatable(deps, 'East_1'), false);
    assert.deepEqual([...deps.badNames], ['East_1']);
    assert.equal(creatable(deps, 'east'), true);
  });

  test('creatable: a name whose object is another shard’s waits otherShardRetryMs', () => {
    const clock = { ms: 1_000_000 };
    const deps = steps(clock);
    deps.otherShard.set('east', clock.ms);
    assert.equal(creatable(deps, 'east'), false);
    clock.ms += 59_999;
    assert.equal(creatable(deps, 'east'), false);
    clock.ms += 1;
    assert.equal(creatable(deps, 'east'), true);
  });
});
