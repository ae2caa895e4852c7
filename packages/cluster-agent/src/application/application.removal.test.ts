import assert from 'node:assert/strict';
import type { KubeConfig, KubeObject, Logger } from '@gitops/shared';
import { describe, it } from 'vitest';
import {
  boundedWaits,
  clusterSecretSettled,
  DESTINATION_WAIT_MAX_MS,
  destinationEnvironmentId,
  endSyncBeforeDelete,
  hasOperation,
  PENDING_DELETE_RECHECK_MS,
  pendingRemoval,
  SYNC_END_RECHECK_MS,
  type SyncStep,
  syncStepBeforeDelete,
} from './application.removal.ts';
import { HOLD_RECHECK_MS } from './deletion-guard.ts';

const ENV = '44444444-4444-4444-8444-444444444444';

function app(fields: { phase?: string; operation?: unknown; destination?: unknown } = {}): KubeObject {
  return {
    metadata: { name: 'gitopsdepl-1', uid: 'u1', resourceVersion: '5' },
    spec: { destination: fields.destination === undefined ? { name: 'in-cluster' } : fields.destination },
    ...(fields.operation !== undefined && { operation: fields.operation }),
    ...(fields.phase !== undefined && { status: { operationState: { phase: fields.phase } } }),
  };
}

describe('syncStepBeforeDelete', () => {
  const step = (a: KubeObject, options: { overdue?: boolean; letRunningFinish?: boolean } = {}): SyncStep =>
    syncStepBeforeDelete(a, {
      letRunningFinish: options.letRunningFinish,
      overdue: () => options.overdue ?? false,
    });

  it('nothing in the way: no operation, and the last sync finished (whatever its phase)', () => {
    assert.equal(step(app()), 'none');
    assert.equal(step(app({ phase: 'Succeeded' })), 'none');
    assert.equal(step(app({ phase: 'Failed', operation: null })), 'none');
    // Not even when the wait is over: it never started.
    assert.equal(step(app({ phase: 'Error' }), { overdue: true }), 'none');
  });

  it('a requested sync not started is withdrawn; a running one terminated; a terminating one waited for', () => {
    assert.equal(step(app({ operation: { sync: {} } })), 'withdraw');
    assert.equal(step(app({ operation: { sync: {} }, phase: 'Succeeded' })), 'withdraw');
    assert.equal(step(app({ phase: 'Running' })), 'terminate');
    assert.equal(step(app({ phase: 'Running', operation: { sync: {} } })), 'terminate');
    assert.equal(step(app({ phase: 'Terminating' })), 'wait');
  });

  it('a release lets a running sync finish', () => {
    assert.equal(step(app({ phase: 'Running' }), { letRunningFinish: true }), 'wait');
    assert.equal(step(app({ operation: { sync: {} } }), { letRunningFinish: true }), 'withdraw');
  });

  it('gives up once the wait is over, and asks about the wait only while a sync is in the way', () => {
    assert.equal(step(app({ phase: 'Running' }), { overdue: true }), 'give-up');
    assert.equal(step(app({ operation: { sync: {} } }), { overdue: true }), 'give-up');
    let asked = 0;
    syncStepBeforeDelete(app(), { overdue: () => ++asked > 0 });
    assert.equal(asked, 0);
    syncStepBeforeDelete(app({ phase: 'Running' }), { overdue: () => ++asked > 0 });
    assert.equal(asked, 1);
  });

  it('hasOperation: an operation that is neither undefined nor null', () => {
    assert.equal(hasOperation(app()), false);
    assert.equal(hasOperation(app({ operation: null })), false);
    assert.equal(hasOperation(app({ operation: { sync: {} } })), true);
  });
});

describe('endSyncBeforeDelete', () => {
  /** Waits that record what they were told; no API server: these paths write nothing. */
  function recordingWaits(overdue = false) {
    const calls: string[] = [];
    return {
      calls,
      overdue: (key: string) => {
        calls.push(`overdue ${key}`);
        return overdue;
      },
      done: (key: string) => void calls.push(`done ${key}`),
    };
  }
  const deps = (syncEnds: ReturnType<typeof recordingWaits>) => ({
    kc: {} as KubeConfig,
    namespace: 'argocd',
    syncEnds,
  });
  const options = { signal: new AbortController().signal, logger: {} as Logger };

  it('with no sync in the way: not in the way, and its wait forgotten', async () => {
    const syncEnds = recordingWaits();
    const looked = app();
    assert.deepEqual(await endSyncBeforeDelete(deps(syncEnds), looked, options), {
      inTheWay: false,
      app: looked,
    });
    assert.deepEqual(syncEnds.calls, ['done u1']);
  });

  it('a running sync let finish: in the way, its wait started, nothing written', async () => {
    const syncEnds = recordingWaits();
    const running = app({ phase: 'Running' });
    assert.deepEqual(
      await endSyncBeforeDelete(deps(syncEnds), running, { ...options, letRunningFinish: true }),
      { inTheWay: true },
    );
    assert.deepEqual(syncEnds.calls, ['overdue u1']);
  });
});

describe('boundedWaits', () => {
  it('is overdue once longer than maxMs after the first look, then starts over; done forgets', () => {
    let now = 1_000;
    const waits = boundedWaits(DESTINATION_WAIT_MAX_MS, () => now);
    assert.equal(waits.overdue('a'), false);
    now += DESTINATION_WAIT_MAX_MS;
    assert.equal(waits.overdue('a'), false);
    assert.equal(waits.overdue('b'), false);
    now += 1;
    assert.equal(waits.overdue('a'), true);
    // Forgotten when overdue: the next look starts a new wait.
    assert.equal(waits.overdue('a'), false);
    waits.done('b');
    now += DESTINATION_WAIT_MAX_MS + 1;
    assert.equal(waits.overdue('b'), false);
  });
});

describe('the destination of an Application being deleted', () => {
  it('names an environment only through its cluster Secret managed-env-<uuid>', () => {
    assert.equal(destinationEnvironmentId(app({ destination: { name: `managed-env-${ENV}` } })), ENV);
    assert.equal(destinationEnvironmentId(app({ destination: { name: 'in-cluster' } })), undefined);
    assert.equal(destinationEnvironmentId(app({ destination: { name: 'managed-env-x' } })), undefined);
    assert.equal(destinationEnvironmentId(app({ destination: { server: 'https://k' } })), undefined);
    assert.equal(destinationEnvironmentId({ metadata: { name: 'a' } }), undefined);
  });

  it('a cluster Secret is known to Argo CD once it is 3 s old', () => {
    const now = Date.parse('2024-01-01T00:00:10Z');
    const secret = (created?: string) => ({
      metadata: { name: `managed-env-${ENV}`, ...(created && { creationTimestamp: created }) },
    });
    assert.equal(clusterSecretSettled(undefined, now), false);
    assert.equal(clusterSecretSettled(secret('2024-01-01T00:00:09Z'), now), false);
    assert.equal(clusterSecretSettled(secret('2024-01-01T00:00:07Z'), now), true);
    // No creation time to go by: not waited for.
    assert.equal(clusterSecretSettled(secret(), now), true);
  });
});

describe('pendingRemoval', () => {
  it('a held delete first (the guard decides before anything is touched), then a sync', () => {
    assert.deepEqual(pendingRemoval({ held: ['held x'], syncing: ['a'], waitingFor: [], live: ['a'] }), {
      reason: 'held x',
      requeueAfterMs: HOLD_RECHECK_MS,
    });
  });
  it('a sync in the way first, then a destination, then Argo CD deleting; nothing once none is left', () => {
    assert.deepEqual(
      pendingRemoval({ held: [], syncing: ['a'], waitingFor: ['secret x'], live: ['a', 'b'] }),
      {
        reason: 'waiting for the sync of Application a to end before deleting it',
        requeueAfterMs: SYNC_END_RECHECK_MS,
      },
    );
    assert.deepEqual(pendingRemoval({ held: [], syncing: [], waitingFor: ['x', 'y'], live: ['a'] }), {
      reason: 'x; y',
      requeueAfterMs: 2_000,
    });
    assert.deepEqual(pendingRemoval({ held: [], syncing: [], waitingFor: [], live: ['a', 'b'] }), {
      reason: 'waiting for Argo CD to delete Application a, b',
      requeueAfterMs: PENDING_DELETE_RECHECK_MS,
    });
    assert.equal(pendingRemoval({ held: [], syncing: [], waitingFor: [], live: [] }), undefined);
  });
});
