import assert from 'node:assert/strict';
import { test } from 'vitest';
import { conditionsOfStatus, nextCondition, setCondition, setKubeCondition } from './conditions.ts';

const t0 = new Date('2026-01-01T00:00:00.123Z');
const t1 = new Date('2026-01-01T00:05:00Z');

test('a new condition gets both times; the same condition again keeps them; a change moves them', () => {
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
  const changed = setCondition(
    first,
    { type: 'ErrorOccurred', status: 'True', reason: 'ErrorOccurred', message: 'other' },
    t1,
  );
  assert.equal(changed[0]?.lastTransitionTime, '2026-01-01T00:05:00Z');
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
