import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import {
  parseSyncRunSpec,
  syncRunApplicationStatus,
  syncRunCondition,
  syncRunErrorState,
  syncRunSyncStatus,
  syncStatusChanges,
} from './sync-run.status.ts';

describe('SyncRun spec', () => {
  test('accepts revisionID and its doc alias revisionId; no revision means ""', () => {
    assert.deepEqual(parseSyncRunSpec({ gitopsDeploymentName: 'd', revisionID: 'v1' }), {
      ok: true,
      spec: { gitopsDeploymentName: 'd', revisionID: 'v1', terminate: false },
    });
    assert.deepEqual(parseSyncRunSpec({ gitopsDeploymentName: 'd', revisionId: 'v2' }), {
      ok: true,
      spec: { gitopsDeploymentName: 'd', revisionID: 'v2', terminate: false },
    });
    assert.deepEqual(parseSyncRunSpec({ gitopsDeploymentName: 'd' }), {
      ok: true,
      spec: { gitopsDeploymentName: 'd', revisionID: '', terminate: false },
    });
  });
  test('a malformed spec is a problem, never a throw', () => {
    assert.equal(parseSyncRunSpec(undefined).ok, false);
    assert.equal(parseSyncRunSpec({ gitopsDeploymentName: '' }).ok, false);
    assert.equal(parseSyncRunSpec({ gitopsDeploymentName: 'd', revisionID: 3 }).ok, false);
    assert.equal(parseSyncRunSpec({ gitopsDeploymentName: 'd', terminate: 'yes' }).ok, false);
  });
});

describe('SyncRun condition', () => {
  test('requested, running and succeeded syncs are ErrorOccurred/False with empty reason and message', () => {
    for (const outcome of [null, 'Succeeded'] as const) {
      const state = syncRunErrorState({ outcome, outcome_message: '' }, undefined);
      assert.deepEqual(syncRunCondition(state), {
        type: 'ErrorOccurred',
        status: 'False',
        reason: '',
        message: '',
      });
    }
  });
  test('a failed sync is reported with its phase and Argo CD message', () => {
    const condition = syncRunCondition(
      syncRunErrorState({ outcome: 'Failed', outcome_message: 'apply failed' }, undefined),
    );
    assert.equal(condition.status, 'True');
    assert.equal(condition.reason, 'ErrorOccurred');
    assert.equal(condition.message, 'the sync ended with phase Failed: apply failed');
  });
  test('an operation the agent gave up on is reported while the sync has no outcome', () => {
    const state = syncRunErrorState(
      { outcome: null, outcome_message: '' },
      { state: 'Failed', message: 'failed after 10 attempts' },
    );
    assert.deepEqual(state, {
      status: 'error',
      message: 'the sync could not be requested in Argo CD: failed after 10 attempts',
    });
  });
});

describe('SyncRun sync status', () => {
  const row = (fields: Partial<Parameters<typeof syncRunSyncStatus>[0] & object> = {}) => ({
    outcome: null,
    outcome_message: '',
    argocd_phase: null,
    synced_revision: '',
    started_at: null,
    finished_at: null,
    argocd_message: '',
    ...fields,
  });
  test('no sync requested is Pending, or Terminated when the user terminated it first', () => {
    assert.equal(syncRunSyncStatus(undefined, undefined).phase, 'Pending');
    assert.deepEqual(syncRunSyncStatus(undefined, undefined, true), {
      phase: 'Terminated',
      revision: null,
      startedAt: null,
      finishedAt: null,
      message: 'terminated before the sync was requested',
      health: null,
      syncStatus: null,
    });
  });
  test("Argo CD's phases: Running and Terminating are Running; Failed and Error are Failed", () => {
    assert.equal(syncRunSyncStatus(row(), undefined).phase, 'Pending');
    assert.equal(syncRunSyncStatus(row({ argocd_phase: 'Running' }), undefined).phase, 'Running');
    assert.equal(syncRunSyncStatus(row({ argocd_phase: 'Terminating' }), undefined).phase, 'Running');
    assert.equal(syncRunSyncStatus(row({ outcome: 'Error' }), undefined).phase, 'Failed');
    assert.equal(syncRunSyncStatus(row({ outcome: 'Failed' }), undefined).phase, 'Failed');
    assert.equal(syncRunSyncStatus(row({ outcome: 'Terminated' }), undefined).phase, 'Terminated');
    const failedRequest = syncRunSyncStatus(row(), { state: 'Failed', message: 'forbidden' });
    assert.equal(failedRequest.phase, 'Failed');
    assert.equal(failedRequest.message, 'the sync could not be requested in Argo CD: forbidden');
  });
  test('times in whole seconds; the running message, then the final one', () => {
    const status = syncRunSyncStatus(
      row({
        outcome: 'Succeeded',
        outcome_message: 'done',
        argocd_message: 'waiting',
        synced_revision: 'abc',
        started_at: new Date('2026-01-01T10:00:00.000Z'),
        finished_at: new Date('2026-01-01T10:00:05.400Z'),
      }),
      undefined,
    );
    assert.deepEqual(status, {
      phase: 'Succeeded',
      revision: 'abc',
      startedAt: '2026-01-01T10:00:00Z',
      finishedAt: '2026-01-01T10:00:05Z',
      message: 'done',
      health: null,
      syncStatus: null,
    });
    assert.equal(syncRunSyncStatus(row({ argocd_message: 'waiting' }), undefined).message, 'waiting');
  });
  test('only changed fields are written; an absent field equals null', () => {
    const next = syncRunSyncStatus(row({ argocd_phase: 'Running' }), undefined);
    assert.deepEqual(syncStatusChanges({ phase: 'Running' }, next), {});
    assert.deepEqual(syncStatusChanges({ phase: 'Pending', message: 'old' }, next), {
      phase: 'Running',
      message: null,
    });
  });
});

describe('SyncRun health and sync status', () => {
  const started = new Date('2026-01-01T10:00:00.000Z');
  const row = (id: string, fields: { argocd_phase?: string | null; started_at?: Date | null } = {}) => ({
    id,
    application_id: 'app-1',
    argocd_phase: null,
    started_at: null,
    ...fields,
  });
  const application = { health: { status: 'Healthy' }, sync: { status: 'Synced' } };

  test('absent until Argo CD starts the sync, whatever the Application shows', () => {
    const queued = row('b');
    assert.deepEqual(syncRunApplicationStatus(queued, [row('a'), queued], application, {}), {
      health: null,
      syncStatus: null,
      follow: false,
    });
    assert.deepEqual(syncRunApplicationStatus(undefined, undefined, application, {}), {
      health: null,
      syncStatus: null,
      follow: false,
    });
  });

  test("the Application's values from the start of the sync on, also after it ended", () => {
    const running = row('a', { argocd_phase: 'Running', started_at: started });
    assert.deepEqual(
      syncRunApplicationStatus(
        running,
        [running],
        { health: { status: 'Progressing' }, sync: { status: 'OutOfSync' } },
        { health: 'Missing' },
      ),
      { health: 'Progressing', syncStatus: 'OutOfSync', follow: true },
    );
    const ended = row('a', { argocd_phase: 'Succeeded', started_at: started });
    assert.deepEqual(syncRunApplicationStatus(ended, [ended, row('b')], application, {}), {
      health: 'Healthy',
      syncStatus: 'Synced',
      follow: true,
    });
  });

  test('once a later sync of the Application has started, the values stay as they were', () => {
    const ended = row('a', { argocd_phase: 'Succeeded', started_at: started });
    const later = row('b', { argocd_phase: 'Running', started_at: started });
    assert.deepEqual(
      syncRunApplicationStatus(
        ended,
        [ended, later],
        { health: { status: 'Degraded' }, sync: { status: 'OutOfSync' } },
        { health: 'Healthy', syncStatus: 'Synced' },
      ),
      { health: 'Healthy', syncStatus: 'Synced', follow: false },
    );
  });

  test("an Application state that already shows a later sync, before that sync's progress is recorded, changes nothing", () => {
    const ended = row('a', { argocd_phase: 'Succeeded', started_at: started });
    const later = row('b');
    const showing = (id: string) => ({
      health: { status: 'Degraded' },
      sync: { status: 'OutOfSync' },
      operationState: {
        operation: { info: [{ name: 'gitops-sync-operation-id', value: id }] },
        phase: 'Running',
      },
    });
    const shown = { health: 'Healthy', syncStatus: 'Synced' };
    // The later row is listed, not started yet as far as the rows say.
    assert.deepEqual(syncRunApplicationStatus(ended, [ended, later], showing('b'), shown), {
      ...shown,
      follow: false,
    });
    // The later row was not even listed when the rows were read.
    assert.deepEqual(syncRunApplicationStatus(ended, [ended], showing('c'), shown), {
      ...shown,
      follow: false,
    });
    // A state still showing an earlier sync is older than this sync's start: the values stay, and it follows.
    const running = row('b', { argocd_phase: 'Running', started_at: started });
    assert.deepEqual(syncRunApplicationStatus(running, [ended, running], showing('a'), {}), {
      health: null,
      syncStatus: null,
      follow: true,
    });
    // Its own sync shown: the Application's values.
    assert.deepEqual(syncRunApplicationStatus(running, [ended, running], showing('b'), {}), {
      health: 'Degraded',
      syncStatus: 'OutOfSync',
      follow: true,
    });
  });

  test('without a state of the Application yet, or once it is gone, the values stay', () => {
    const running = row('a', { argocd_phase: 'Running' });
    assert.deepEqual(syncRunApplicationStatus(running, [running], undefined, { health: 'Progressing' }), {
      health: 'Progressing',
      syncStatus: null,
      follow: true,
    });
    const orphaned = { ...running, application_id: null };
    assert.deepEqual(syncRunApplicationStatus(orphaned, undefined, undefined, { syncStatus: 'Synced' }), {
      health: null,
      syncStatus: 'Synced',
      follow: false,
    });
  });
});
