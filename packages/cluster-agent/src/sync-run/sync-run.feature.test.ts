import assert from 'node:assert/strict';
import { type KubeObject, passesCreate, passesDelete, passesUpdate } from '@gitops/shared';
import { describe, it } from 'vitest';
import { SYNC_INITIATOR } from './sync-request.ts';
import { syncMoved } from './sync-run.feature.ts';

const app = (rv: string, extra: Partial<KubeObject> = {}): KubeObject => ({
  metadata: { name: 'app', namespace: 'argocd', resourceVersion: rv, labels: {} },
  ...extra,
});

const ours = { initiatedBy: { username: SYNC_INITIATOR }, sync: { revision: 'a' } };

describe('what wakes a running sync', () => {
  it('an Application whose operation or operationState changed; not its health, a relist, a create or a delete', () => {
    const running = app('1', {
      operation: ours,
      status: { health: { status: 'Healthy' }, operationState: { phase: 'Running', operation: ours } },
    });
    const p = [syncMoved];
    // Argo CD ended the operation: the sync moved.
    const ended = app('2', {
      status: { health: { status: 'Healthy' }, operationState: { phase: 'Succeeded', operation: ours } },
    });
    assert.equal(passesUpdate(p, running, ended), true);
    // Argo CD took the requested operation (operation removed, same operationState): moved too.
    const taken = app('2', { status: running.status });
    assert.equal(passesUpdate(p, running, taken), true);
    // Only the health changed: nothing to look at.
    const healthOnly = app('2', {
      operation: running.operation,
      status: { health: { status: 'Progressing' }, operationState: { phase: 'Running', operation: ours } },
    });
    assert.equal(passesUpdate(p, running, healthOnly), false);
    assert.equal(passesUpdate(p, running, running), false);
    assert.equal(passesCreate(p, running), false);
    assert.equal(passesDelete(p, running), false);
  });

  it("not Argo CD's automated sync, nor anyone else's: they are no SyncRun's", () => {
    const p = [syncMoved];
    const automated = { initiatedBy: { automated: true }, sync: { revision: 'a' } };
    const running = app('1', { status: { operationState: { phase: 'Running', operation: automated } } });
    const ended = app('2', { status: { operationState: { phase: 'Succeeded', operation: automated } } });
    assert.equal(passesUpdate(p, running, ended), false);
    const someone = { initiatedBy: { username: 'admin' }, sync: { revision: 'a' } };
    assert.equal(
      passesUpdate(p, app('1', { operation: someone }), app('2', { status: running.status })),
      false,
    );
    // Our request replacing an automated run's report: ours, so it wakes.
    assert.equal(passesUpdate(p, ended, app('3', { operation: ours, status: ended.status })), true);
  });
});
