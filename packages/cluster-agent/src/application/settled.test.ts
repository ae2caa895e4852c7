import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { describe, it } from 'vitest';
import { ABSENT, createSettled, ownedState } from './settled.ts';

const project = (metadata: Partial<KubeObject['metadata']> = {}, spec: unknown = { sourceRepos: ['r'] }) => ({
  metadata: { name: 'p', labels: { a: '1', b: '2' }, finalizers: ['f'], resourceVersion: '1', ...metadata },
  spec,
});

describe('settled memo', () => {
  it('matches only the fingerprint last settled, until forgotten', () => {
    const settled = createSettled();
    assert.equal(settled.matches('k', 'x'), false);
    settled.settle('k', 'x');
    assert.equal(settled.matches('k', 'x'), true);
    assert.equal(settled.matches('k', 'y'), false);
    assert.equal(settled.matches('other', 'x'), false);
    settled.settle('k', 'y');
    assert.equal(settled.matches('k', 'x'), false);
    assert.equal(settled.matches('k', 'y'), true);
    settled.forget('k');
    assert.equal(settled.matches('k', 'y'), false);
  });

  it('keeps the ABSENT mark apart from any owned state', () => {
    const settled = createSettled();
    settled.settle('p', ABSENT);
    assert.equal(settled.matches('p', ABSENT), true);
    assert.equal(settled.matches('p', ownedState(project())), false);
    assert.notEqual(ownedState({ metadata: { name: 'p' } }), ABSENT);
  });
});

describe('ownedState', () => {
  it('ignores key order, status, operation and resourceVersion', () => {
    const a = ownedState(project());
    assert.equal(ownedState({ ...project({ labels: { b: '2', a: '1' }, resourceVersion: '9' }) }), a);
    assert.equal(ownedState({ ...project(), status: { sync: 'Synced' }, operation: { sync: {} } }), a);
  });

  it('changes with labels, finalizers, deletion and spec', () => {
    const a = ownedState(project());
    assert.notEqual(ownedState(project({ labels: { a: '1' } })), a);
    assert.notEqual(ownedState(project({ finalizers: [] })), a);
    assert.notEqual(ownedState(project({ deletionTimestamp: '2024-01-01T00:00:00Z' })), a);
    assert.notEqual(ownedState(project({}, { sourceRepos: ['s'] })), a);
  });
});
