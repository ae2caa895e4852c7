import assert from 'node:assert/strict';
import { SyncRunEventReason, SyncRunMessage } from '@gitops/api';
import { describe, test } from 'vitest';
import type { GitOpsDeploymentObject, SyncRunObject } from '../kinds.ts';
import { phaseEventOf } from './sync-run.conditions.ts';
import {
  earlierSyncRunPending,
  hasEnded,
  isBefore,
  refusalOrParent,
  trackCreationOrder,
} from './sync-run.reconciler.ts';
import { parseSyncRunSpec, SyncRunErrorMessage, type SyncRunSyncStatus } from './sync-run.status.ts';

/** A database the step must not touch (any use throws). */
const untouchedDb = new Proxy(
  {},
  {
    get() {
      throw new Error('the database was used');
    },
  },
) as never;

function syncRun(
  uid: string,
  spec: SyncRunObject['spec'] = { gitopsDeploymentName: 'd' },
  more: { creationTimestamp?: string; namespace?: string; phase?: string; deleting?: boolean } = {},
): SyncRunObject {
  return {
    apiVersion: 'managed-gitops.redhat.com/v1alpha1',
    kind: 'GitOpsDeploymentSyncRun',
    metadata: {
      namespace: more.namespace ?? 'jane',
      name: `run-${uid}`,
      uid,
      creationTimestamp: more.creationTimestamp ?? '2026-01-01T00:00:00Z',
      ...(more.deleting ? { deletionTimestamp: '2026-01-01T00:01:00Z' } : {}),
    },
    spec,
    ...(more.phase ? { status: { phase: more.phase } } : {}),
  } as SyncRunObject;
}

function parentDeployment(type: string, deleting = false): GitOpsDeploymentObject {
  return {
    apiVersion: 'managed-gitops.redhat.com/v1alpha1',
    kind: 'GitOpsDeployment',
    metadata: {
      namespace: 'jane',
      name: 'd',
      uid: 'p-1',
      ...(deleting ? { deletionTimestamp: '2026-01-01T00:01:00Z' } : {}),
    },
    spec: { source: { repoURL: 'https://github.com/org/repo', path: 'env' }, type },
  } as GitOpsDeploymentObject;
}

describe('the creation order of SyncRuns', () => {
  test('by creationTimestamp, ties by the order the watch delivered them, an unseen one last', () => {
    const handlers: { add?: (o: SyncRunObject) => void; del?: (o: SyncRunObject) => void } = {};
    const seen = trackCreationOrder({
      onAdd: (h: (o: SyncRunObject) => void) => {
        handlers.add = h;
      },
      onDelete: (h: (o: SyncRunObject) => void) => {
        handlers.del = h;
      },
    } as never);
    const a = syncRun('a');
    const b = syncRun('b');
    const earlier = syncRun('e', undefined, { creationTimestamp: '2025-12-31T23:59:59Z' });
    handlers.add?.(b);
    handlers.add?.(a);
    handlers.add?.(b); // delivered again (a relist): keeps its place
    assert.equal(isBefore(seen, b, a), true);
    assert.equal(isBefore(seen, a, b), false);
    assert.equal(isBefore(seen, a, a), false);
    // Not seen yet, but created a second earlier.
    assert.equal(isBefore(seen, earlier, b), true);
    handlers.del?.(b);
    assert.equal(isBefore(seen, a, b), true);
  });

  test('a SyncRun has ended once its phase is Succeeded, Failed or Terminated', () => {
    assert.equal(hasEnded(syncRun('a')), false);
    assert.equal(hasEnded(syncRun('a', undefined, { phase: 'Running' })), false);
    for (const phase of ['Succeeded', 'Failed', 'Terminated'])
      assert.equal(hasEnded(syncRun('a', undefined, { phase })), true);
  });

  test('only an earlier, live, unterminated, unfinished SyncRun of the same deployment and namespace is waited for', async () => {
    const object = syncRun('me', undefined, { creationTimestamp: '2026-01-01T00:00:10Z' });
    const others = [
      object,
      syncRun('later', undefined, { creationTimestamp: '2026-01-01T00:00:20Z' }),
      syncRun('other-namespace', undefined, { namespace: 'joe' }),
      syncRun('other-parent', { gitopsDeploymentName: 'x' }),
      syncRun('terminated', { gitopsDeploymentName: 'd', terminate: true }),
      syncRun('ended', undefined, { phase: 'Succeeded' }),
      syncRun('deleting', undefined, { deleting: true }),
    ];
    // None qualifies: the database is never asked.
    const deps = { db: untouchedDb, syncRuns: { list: () => others }, seen: new Map<string, number>() };
    assert.equal(await earlierSyncRunPending(deps, object, 'd'), false);
  });
});

describe('why a SyncRun cannot request its sync', () => {
  const deployments = (parent?: GitOpsDeploymentObject) => ({ deployments: { get: () => parent } });
  const run = syncRun('a');

  test('a malformed spec, or terminated before the request', () => {
    const malformed = refusalOrParent(deployments(), run, parseSyncRunSpec({ gitopsDeploymentName: '' }));
    assert.deepEqual(malformed, {
      refused: SyncRunErrorMessage.invalidSpec('spec.gitopsDeploymentName: must be a non-empty string'),
    });
    const terminated = refusalOrParent(
      deployments(parentDeployment('manual')),
      run,
      parseSyncRunSpec({ gitopsDeploymentName: 'd', terminate: true }),
    );
    assert.deepEqual(terminated, {
      refused: 'the sync ended with phase Terminated: terminated before the sync was requested',
      terminated: true,
    });
  });

  test('a parent missing, being deleted or automated; a manual one is the answer', () => {
    const parsed = parseSyncRunSpec({ gitopsDeploymentName: 'd' });
    assert.deepEqual(refusalOrParent(deployments(), run, parsed), {
      refused: SyncRunMessage.parentNotFound('d'),
    });
    assert.deepEqual(refusalOrParent(deployments(parentDeployment('manual', true)), run, parsed), {
      refused: SyncRunMessage.parentNotFound('d'),
    });
    assert.deepEqual(refusalOrParent(deployments(parentDeployment('automated')), run, parsed), {
      refused: SyncRunMessage.parentIsAutomated('run-a'),
    });
    const parent = parentDeployment('manual');
    const checked = refusalOrParent(deployments(parent), run, parsed);
    assert.ok(!('refused' in checked));
    assert.equal(checked.parent, parent);
    assert.equal(checked.spec.gitopsDeploymentName, 'd');
    assert.equal(checked.parentSpec.type, 'manual');
  });
});

describe('the Event of a new phase', () => {
  const sync: SyncRunSyncStatus = {
    phase: 'Failed',
    revision: 'abc',
    startedAt: null,
    finishedAt: null,
    message: 'one resource failed',
    health: null,
    syncStatus: null,
  };
  test('a phase that changed has its Event with the revision and message; Pending and no change have none', () => {
    assert.deepEqual(phaseEventOf({ phase: 'Failed' }, sync), {
      type: 'Warning',
      reason: SyncRunEventReason.SyncFailed,
      message: 'The sync is Failed at revision abc: one resource failed',
    });
    assert.deepEqual(
      phaseEventOf({ phase: 'Running' }, { ...sync, phase: 'Running', revision: null, message: null }),
      {
        type: 'Normal',
        reason: SyncRunEventReason.SyncStarted,
        message: 'The sync is Running',
      },
    );
    assert.equal(phaseEventOf({ phase: 'Pending' }, { ...sync, phase: 'Pending' }), undefined);
    assert.equal(phaseEventOf({}, sync), undefined);
    assert.equal(phaseEventOf({ phase: 'Failed' }, undefined), undefined);
  });
});
