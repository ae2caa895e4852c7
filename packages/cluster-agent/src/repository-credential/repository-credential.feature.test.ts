import assert from 'node:assert/strict';
import { type KubeObject, passesCreate, passesDelete, passesUpdate } from '@gitops/shared';
import { describe, it } from 'vitest';
import { ownedSecretChanged } from './repository-credential.feature.ts';

const secret = (
  rv: string,
  extra: { labels?: Record<string, string>; data?: Record<string, string>; deletionTimestamp?: string } = {},
): KubeObject => ({
  metadata: {
    name: 'repo-1',
    namespace: 'argocd',
    resourceVersion: rv,
    labels: extra.labels ?? { 'argocd.argoproj.io/secret-type': 'repository' },
    ...(extra.deletionTimestamp ? { deletionTimestamp: extra.deletionTimestamp } : {}),
  },
  data: extra.data ?? { url: 'aHR0cHM6Ly9leGFtcGxl' },
});

describe('what wakes a repository Secret', () => {
  it('an edit of its labels, data or deletion, a create and a delete; not a relist or an annotation', () => {
    const p = [ownedSecretChanged];
    const live = secret('1');
    assert.equal(passesUpdate(p, live, secret('2', { data: { url: 'b3RoZXI=' } })), true);
    assert.equal(passesUpdate(p, live, secret('2', { labels: {} })), true);
    assert.equal(passesUpdate(p, live, secret('2', { deletionTimestamp: '2026-11-27T00:00:00Z' })), true);
    assert.equal(passesUpdate(p, live, secret('1')), false);
    const annotated = { ...secret('2'), metadata: { ...secret('2').metadata, annotations: { a: 'b' } } };
    assert.equal(passesUpdate(p, live, annotated), false);
    assert.equal(passesCreate(p, live), true);
    assert.equal(passesDelete(p, live), true);
  });
});
