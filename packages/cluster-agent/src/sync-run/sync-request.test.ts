import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { describe, test } from 'vitest';
import { isRequestPending, observedSync, outcomeOfPhase, syncOperationRequest } from './sync-request.ts';

const ID = '00000000-0000-4000-8000-000000000001';
const OTHER = '00000000-0000-4000-8000-000000000002';
const app = (extra: Record<string, unknown> = {}): KubeObject => ({
  metadata: { name: 'gitopsdepl-x' },
  spec: { source: { repoURL: 'https://example/repo', path: 'p', targetRevision: 'main' } },
  ...extra,
});
const info = (id: string) => [{ name: 'gitops-sync-operation-id', value: id }];

describe('sync request', () => {
  test('syncs the SyncRun revision, else the Application targetRevision, as gitops-service', () => {
    assert.deepEqual(syncOperationRequest({ id: ID, revision: 'v1' }, app()), {
      initiatedBy: { username: 'gitops-service' },
      info: info(ID),
      sync: { revision: 'v1' },
    });
    assert.deepEqual(
      (syncOperationRequest({ id: ID, revision: '' }, app()).sync as { revision: string }).revision,
      'main',
    );
  });
  test('a pending request is recognised by its id', () => {
    assert.equal(isRequestPending(app({ operation: { info: info(ID) } }), ID), true);
    assert.equal(isRequestPending(app({ operation: { info: info(OTHER) } }), ID), false);
    assert.equal(isRequestPending(app(), ID), false);
  });

  test('a request Argo CD has started is not pending, though Argo CD keeps `operation` while it runs', () => {
    const running = app({
      operation: { info: info(ID) },
      status: { operationState: { operation: { info: info(ID) }, phase: 'Running' } },
    });
    assert.equal(isRequestPending(running, ID), false);
    const previousRun = app({
      operation: { info: info(ID) },
      status: { operationState: { operation: { info: info(OTHER) }, phase: 'Succeeded' } },
    });
    assert.equal(isRequestPending(previousRun, ID), true);
  });
});

describe('observed sync', () => {
  const requestedAt = new Date('2026-01-01T10:00:00.700Z');
  const state = (s: Record<string, unknown>) => app({ status: { operationState: s } });

  test('a result carrying our id is ours; finished once terminal with finishedAt', () => {
    const running = observedSync(state({ operation: { info: info(ID) }, phase: 'Running' }), {
      id: ID,
      requested_at: requestedAt,
    });
    assert.deepEqual(running, {
      phase: 'Running',
      message: '',
      revision: '',
      startedAt: null,
      finishedAt: null,
      finished: false,
    });
    const done = observedSync(
      state({
        operation: { info: info(ID) },
        phase: 'Succeeded',
        message: 'ok',
        syncResult: { revision: 'abc123' },
        startedAt: '2026-01-01T10:00:01Z',
        finishedAt: '2026-01-01T10:00:05Z',
      }),
      { id: ID, requested_at: requestedAt },
    );
    assert.deepEqual(done, {
      phase: 'Succeeded',
      message: 'ok',
      revision: 'abc123',
      startedAt: new Date('2026-01-01T10:00:01Z'),
      finishedAt: new Date('2026-01-01T10:00:05Z'),
      finished: true,
    });
  });
  test("another sync's result is never ours, even when it started later", () => {
    const other = state({
      operation: { info: info(OTHER) },
      phase: 'Succeeded',
      startedAt: '2026-01-01T11:00:00Z',
      finishedAt: '2026-01-01T11:00:01Z',
    });
    assert.equal(observedSync(other, { id: ID, requested_at: requestedAt }), undefined);
  });
  test('without an id, a run started at or after the request (whole seconds) is ours', () => {
    const sameSecond = state({
      phase: 'Failed',
      startedAt: '2026-01-01T10:00:00Z',
      finishedAt: '2026-01-01T10:00:02Z',
    });
    assert.equal(observedSync(sameSecond, { id: ID, requested_at: requestedAt })?.finished, true);
    const earlier = state({
      phase: 'Succeeded',
      startedAt: '2026-01-01T09:59:59Z',
      finishedAt: '2026-01-01T10:00:00Z',
    });
    assert.equal(observedSync(earlier, { id: ID, requested_at: requestedAt }), undefined);
    assert.equal(observedSync(sameSecond, { id: ID, requested_at: null }), undefined);
  });
  test('phases map to outcomes', () => {
    assert.equal(outcomeOfPhase('Succeeded'), 'Succeeded');
    assert.equal(outcomeOfPhase('Failed'), 'Failed');
    assert.equal(outcomeOfPhase('Terminated'), 'Terminated');
    assert.equal(outcomeOfPhase('Error'), 'Error');
  });
  test('a sync we asked Argo CD to terminate is Terminated unless it succeeded first', () => {
    assert.equal(outcomeOfPhase('Failed', true), 'Terminated');
    assert.equal(outcomeOfPhase('Error', true), 'Terminated');
    assert.equal(outcomeOfPhase('Succeeded', true), 'Succeeded');
  });
});
