import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { parseSyncRunSpec, syncRunCondition, syncRunErrorState } from './sync-run.status.ts';

describe('SyncRun spec', () => {
  test('accepts revisionID and its doc alias revisionId; no revision means ""', () => {
    assert.deepEqual(parseSyncRunSpec({ gitopsDeploymentName: 'd', revisionID: 'v1' }), {
      ok: true,
      spec: { gitopsDeploymentName: 'd', revisionID: 'v1' },
    });
    assert.deepEqual(parseSyncRunSpec({ gitopsDeploymentName: 'd', revisionId: 'v2' }), {
      ok: true,
      spec: { gitopsDeploymentName: 'd', revisionID: 'v2' },
    });
    assert.deepEqual(parseSyncRunSpec({ gitopsDeploymentName: 'd' }), {
      ok: true,
      spec: { gitopsDeploymentName: 'd', revisionID: '' },
    });
  });
  test('a malformed spec is a problem, never a throw', () => {
    assert.equal(parseSyncRunSpec(undefined).ok, false);
    assert.equal(parseSyncRunSpec({ gitopsDeploymentName: '' }).ok, false);
    assert.equal(parseSyncRunSpec({ gitopsDeploymentName: 'd', revisionID: 3 }).ok, false);
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
