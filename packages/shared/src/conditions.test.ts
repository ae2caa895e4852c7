import assert from 'node:assert/strict';
import { test } from 'vitest';
import { conditionsOfStatus, nextCondition, setCondition, setKubeCondition } from './conditions.ts';

const t0 = new Date('2026-01-01T00:00:00.123Z');
const t1 = new Date('2026-01-01T00:05:00Z');

test('a new condition gets both times; the same condition again keeps them; a new status moves both', () => {
  const first = setCondition(
    [],
    { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message: 'm' },
    t0,
  );
  assert.deepEqual(first, [
    {
      type: 'ErrorOccurred',
      status: 'True',
      reason: 'ErrorOccurred',
      message: 'm',
      lastProbeTime: '2026-01-01T00:00:00Z',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    },
  ]);
  assert.deepEqual(
    setCondition(first, { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message: 'm' }, t1),
    first,
  );
  const resolved = setCondition(
    first,
    { type: 'ErrorOccurred', status: 'False', reason: 'ErrorOccurredResolved', message: '' },
    t1,
  );
  assert.equal(resolved[0]?.lastProbeTime, '2026-01-01T00:05:00Z');
  assert.equal(resolved[0]?.lastTransitionTime, '2026-01-01T00:05:00Z');
});

test('a new message or reason with the same status moves lastProbeTime only', () => {
  const first = setCondition(
    [],
    { type: 'SyncError', status: 'True', reason: 'SyncError', message: 'a' },
    t0,
  );
  for (const input of [
    { type: 'SyncError', status: 'True', reason: 'SyncError', message: 'b' },
    { type: 'SyncError', status: 'True', reason: 'Other', message: 'a' },
  ] as const) {
    const [changed] = setCondition(first, input, t1);
    assert.deepEqual(changed, {
      ...input,
      lastProbeTime: '2026-01-01T00:05:00Z',
      lastTransitionTime: '2026-01-01T00:00:00Z',
    });
  }
  // A condition written without a transition time (by someone else) gets one.
  const [bare] = setCondition(
    [{ type: 'SyncError', status: 'True' }],
    { type: 'SyncError', status: 'True', reason: 'SyncError', message: 'c' },
    t1,
  );
  assert.equal(bare?.lastTransitionTime, '2026-01-01T00:05:00Z');
});

test('other conditions keep their place', () => {
  const list = setCondition(
    [
      { type: 'A', status: 'True' },
      { type: 'B', status: 'True' },
    ],
    { type: 'A', status: 'False', reason: 'AResolved', message: '' },
    t0,
  );
  assert.deepEqual(
    list.map((c) => c.type),
    ['A', 'B'],
  );
  assert.equal(list[0]?.status, 'False');
});

test('a metav1 condition keeps its transition time while only its generation moves, and moves it on a change', () => {
  const input = { type: 'Ready', status: 'True', reason: 'Ok', message: 'fine' } as const;
  const [first] = setKubeCondition([], { ...input, observedGeneration: 1 }, t0);
  assert.deepEqual(first, { ...input, observedGeneration: 1, lastTransitionTime: '2026-01-01T00:00:00Z' });
  assert.deepEqual(nextCondition(first, { ...input, observedGeneration: 2 }, t1), {
    ...input,
    observedGeneration: 2,
    lastTransitionTime: '2026-01-01T00:00:00Z',
  });
  assert.deepEqual(nextCondition(first, { ...input, status: 'False', observedGeneration: 2 }, t1), {
    ...input,
    status: 'False',
    observedGeneration: 2,
    lastTransitionTime: '2026-01-01T00:05:00Z',
  });
});

test('malformed conditions from the API server are dropped, well-formed ones keep their known fields', () => {
  const status = {
    conditions: [
      { type: 'A', status: 'True', reason: 'R', observedGeneration: 3, extra: 1 },
      { type: 'B', status: 'Maybe' },
      'not an object',
      { status: 'True' },
    ],
  };
  assert.deepEqual(conditionsOfStatus(status), [
    { type: 'A', status: 'True', reason: 'R', observedGeneration: 3 },
  ]);
  assert.deepEqual(conditionsOfStatus({ conditions: 'x' }), []);
  assert.deepEqual(conditionsOfStatus(undefined), []);
});
