import assert from 'node:assert/strict';
import { test } from 'vitest';
import { setCondition } from './conditions.ts';

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
