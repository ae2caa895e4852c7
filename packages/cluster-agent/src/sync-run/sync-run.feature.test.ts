import assert from 'node:assert/strict';
import { type KubeObject, passesCreate, passesDelete, passesUpdate } from '@gitops/shared';
import { describe, it } from 'vitest';
import { syncMoved } from './sync-run.feature.ts';

const app = (rv: string, extra: Partial<KubeObject> = {}): KubeObject => ({
  metadata: { name: 'app', namespace: 'argocd', resourceVersion: rv, labels: {} },
  ...extra,
});

describe('what wakes a running sync', () => {
  it('an Application whose operation or operationState changed; not its health, a relist, a create or a delete', () => {
    const running = app('1', {
      operation: { sync: { revision: 'a' } },
      status: { health: { status: 'Healthy' }, operationState: { phase: 'Running' } },
    });
    const p = [syncMoved];
    // Argo CD ended the operation: the sync moved.
    const ended = app('2', {
      status: { health: { status: 'Healthy' }, operationState: { phase: 'Succeeded' } },
    });
    assert.equal(passesUpdate(p, running, ended), true);
    // Argo CD took the requested operation (operation removed, same operationState): moved too.
    const taken = app('2', { status: running.status });
    assert.equal(passesUpdate(p, running, taken), true);
    // Only the health changed: nothing to look at.
    const healthOnly = app('2', {
      operation: running.operation,
      status: { health: { status: 'Progressing' }, operationState: { phase: 'Running' } },
    });
    assert.equal(passesUpdate(p, running, healthOnly), false);
    assert.equal(passesUpdate(p, running, running), false);
    assert.equal(passesCreate(p, running), false);
    assert.equal(passesDelete(p, running), false);
  });
});
