import assert from 'node:assert/strict';
import { test } from 'vitest';
import { parseLabelSelector } from './label-selector.ts';

test('equality-based selectors match like the API server', () => {
  const selector = parseLabelSelector('team=a, tier!=db,canary,!legacy');
  assert.ok(selector.matches({ team: 'a', tier: 'web', canary: '' }));
  assert.ok(!selector.matches({ team: 'b', canary: '' }));
  assert.ok(!selector.matches({ team: 'a', tier: 'db', canary: '' }));
  assert.ok(!selector.matches({ team: 'a' }));
  assert.ok(!selector.matches({ team: 'a', canary: 'x', legacy: 'y' }));
  assert.ok(parseLabelSelector('example.com/run==x').matches({ 'example.com/run': 'x' }));
  assert.ok(parseLabelSelector('').matches(undefined));
});

test('invalid selectors are rejected', () => {
  assert.throws(() => parseLabelSelector('a b=c'));
  assert.throws(() => parseLabelSelector('x in (a,b)'));
});
