import assert from 'node:assert/strict';
import type { GitOpsDeploymentCondition } from '@gitops/api';
import { describe, test } from 'vitest';
import {
  desiredStatus,
  managedEnvironmentIdOf,
  parseApplicationState,
  RESOURCES_TRUNCATED_CONDITION,
  statusPatch,
  syncTransitionEvent,
} from './deployment-status.ts';

const now = new Date('2026-02-01T10:00:00Z');
const earlier = '2026-01-01T00:00:00Z';
const errorOccurred: GitOpsDeploymentCondition = {
  type: 'ErrorOccurred',
  status: 'True',
  reason: 'ErrorOccurred',
  message: 'boom',
  lastProbeTime: earlier,
  lastTransitionTime: earlier,
};

/** An Argo CD condition that stays: the status keeps it as it is. */
const syncError: GitOpsDeploymentCondition = {
  type: 'SyncError',
  status: 'True',
  reason: 'SyncError',
  message: 'y',
  lastProbeTime: earlier,
  lastTransitionTime: earlier,
};

describe('GitOpsDeployment status from the application_state projection', () => {
  test('sync, health, resources, reconciledState and operationState are copied; destination names are user-facing', () => {
    // Copied as they are: the same values in the projection and in the status.
    const copied = {
      sync: { status: 'Synced', revision: 'abc' },
      health: { status: 'Healthy' },
      resources: [
        {
          group: 'apps',
          version: 'v1',
          kind: 'Deployment',
          namespace: 'n',
          name: 'd',
          status: 'Synced',
          health: { status: 'Healthy', message: 'ok' },
        },
      ],
      operationState: { phase: 'Succeeded', retryCount: 0 },
    };
    const state = parseApplicationState({
      ...copied,
      reconciledState: {
        source: { repoURL: 'r', path: 'p', targetRevision: 'main' },
        destination: { name: 'in-cluster', namespace: 'n' },
      },
    });
    assert.deepEqual(desiredStatus(state, { currentConditions: [], destinationName: '', now }), {
      ...copied,
      reconciledState: {
        source: { repoURL: 'r', path: 'p', branch: 'main' },
        destination: { name: '', namespace: 'n' },
      },
    });
    assert.equal(
      managedEnvironmentIdOf('managed-env-0b6f3c1e-0000-4000-8000-000000000001'),
      '0b6f3c1e-0000-4000-8000-000000000001',
    );
    assert.equal(managedEnvironmentIdOf('in-cluster'), undefined);
  });

  test('several sources: their revisions are in status.sync and what each was compared against in reconciledState', () => {
    const state = parseApplicationState({
      sync: { status: 'Synced', revision: '', revisions: ['1.2.0', 'abc'] },
      reconciledState: {
        source: { repoURL: '', path: '', targetRevision: '' },
        sources: [
          { repoURL: 'https://charts.example.com', path: '', targetRevision: '1.2.0', chart: 'web' },
          { repoURL: 'https://github.com/org/values', path: '', targetRevision: 'main' },
        ],
        destination: { name: 'in-cluster', namespace: 'n' },
      },
    });
    const status = desiredStatus(state, { currentConditions: [], destinationName: '', now });
    assert.deepEqual(status.sync, { status: 'Synced', revision: '', revisions: ['1.2.0', 'abc'] });
    assert.deepEqual((status.reconciledState as { sources: unknown }).sources, [
      { path: '', repoURL: 'https://charts.example.com', branch: '1.2.0', chart: 'web' },
      { path: '', repoURL: 'https://github.com/org/values', branch: 'main' },
    ]);
  });

  test('Argo CD conditions pass through as T/True/T/M; dropped ones become <T>Resolved; ErrorOccurred is never touched', () => {
    const current: GitOpsDeploymentCondition[] = [
      errorOccurred,
      {
        type: 'ComparisonError',
        status: 'True',
        reason: 'ComparisonError',
        message: 'x',
        lastProbeTime: earlier,
        lastTransitionTime: earlier,
      },
      syncError,
    ];
    const state = parseApplicationState({
      conditions: [
        { type: 'SyncError', message: 'y' },
        { type: 'InvalidSpecError', message: 'z' },
        { type: 'ErrorOccurred', message: 'must not override' },
      ],
    });
    const { conditions } = desiredStatus(state, {
      currentConditions: current,
      destinationName: '',
      now,
    }) as unknown as {
      conditions: GitOpsDeploymentCondition[];
    };
    assert.deepEqual(conditions, [
      errorOccurred,
      {
        type: 'ComparisonError',
        status: 'False',
        reason: 'ComparisonErrorResolved',
        message: '',
        lastProbeTime: '2026-02-01T10:00:00Z',
        lastTransitionTime: '2026-02-01T10:00:00Z',
      },
      syncError,
      {
        type: 'InvalidSpecError',
        status: 'True',
        reason: 'InvalidSpecError',
        message: 'z',
        lastProbeTime: '2026-02-01T10:00:00Z',
        lastTransitionTime: '2026-02-01T10:00:00Z',
      },
    ]);
  });

  test('resources beyond the limit are cut and ResourcesTruncated says so, then resolves', () => {
    const resources = Array.from({ length: 5 }, (_, i) => ({ kind: 'ConfigMap', name: `c${i}` }));
    const truncated = desiredStatus(parseApplicationState({ resources }), {
      currentConditions: [],
      destinationName: '',
      now,
      resourcesLimit: 3,
    }) as unknown as { resources: unknown[]; conditions: GitOpsDeploymentCondition[] };
    assert.equal(truncated.resources.length, 3);
    assert.deepEqual(
      truncated.conditions.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        [
          RESOURCES_TRUNCATED_CONDITION,
          'True',
          RESOURCES_TRUNCATED_CONDITION,
          'status.resources lists the first 3 of 5 resources',
        ],
      ],
    );
    const fits = desiredStatus(parseApplicationState({ resources: resources.slice(0, 2) }), {
      currentConditions: truncated.conditions,
      destinationName: '',
      now,
      resourcesLimit: 3,
    }) as unknown as { conditions: GitOpsDeploymentCondition[] };
    assert.deepEqual(
      fits.conditions.map((c) => [c.type, c.status, c.reason]),
      [[RESOURCES_TRUNCATED_CONDITION, 'False', `${RESOURCES_TRUNCATED_CONDITION}Resolved`]],
    );
  });

  test('no write when the status already matches; fields the agent dropped are removed', () => {
    const desired = desiredStatus(parseApplicationState({ sync: { status: 'Synced', revision: 'a' } }), {
      currentConditions: [errorOccurred],
      destinationName: '',
      now,
    });
    // A field the status path does not own (`other`) is left alone.
    const current = { sync: { status: 'Synced', revision: 'a' }, conditions: [errorOccurred], other: 1 };
    assert.equal(statusPatch(current, desired), undefined);
    assert.deepEqual(
      statusPatch(
        {
          sync: { status: 'Synced', revision: 'a' },
          health: { status: 'Healthy' },
          conditions: [errorOccurred],
        },
        desired,
      ),
      {
        health: null,
      },
    );
  });

  test('malformed projections are parsed field by field, never thrown', () => {
    assert.deepEqual(parseApplicationState('nope'), {});
    const state = parseApplicationState({
      sync: 5,
      health: { status: 'Healthy' },
      resources: [1, { name: 'x' }],
      conditions: [{}, { type: 'T' }],
    });
    assert.equal(state.sync, undefined);
    assert.deepEqual(state.resources, [{ name: 'x' }]);
    assert.deepEqual(state.conditions, [{ type: 'T', message: '' }]);
  });
});

describe('sync Events from operationState transitions', () => {
  test('a failed run is an Event once; a run starting or succeeding is not (the status says it)', () => {
    const running = { phase: 'Running', startedAt: 't1', operation: { sync: { revision: 'abc' } } };
    assert.equal(syncTransitionEvent(undefined, running), undefined);
    assert.equal(
      syncTransitionEvent(running, { phase: 'Succeeded', startedAt: 't1', syncResult: { revision: 'abc' } }),
      undefined,
    );
    assert.deepEqual(
      syncTransitionEvent(running, { ...running, phase: 'Failed', message: 'one or more objects failed' }),
      {
        type: 'Warning',
        reason: 'SyncFailed',
        message: 'Argo CD sync failed at revision abc: one or more objects failed',
      },
    );
    assert.equal(
      syncTransitionEvent(undefined, { phase: 'Error', startedAt: 't2', message: 'x' })?.reason,
      'SyncFailed',
    );
    assert.equal(
      syncTransitionEvent({ phase: 'Failed', startedAt: 't2' }, { phase: 'Failed', startedAt: 't2' }),
      undefined,
    );
    // The next run failing again is a new failure.
    assert.equal(
      syncTransitionEvent({ phase: 'Failed', startedAt: 't2' }, { phase: 'Failed', startedAt: 't3' })?.reason,
      'SyncFailed',
    );
    assert.equal(syncTransitionEvent({ phase: 'Running' }, undefined), undefined);
  });
});
