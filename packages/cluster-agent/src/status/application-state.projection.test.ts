import assert from 'node:assert/strict';
import { jsonFingerprint } from '@gitops/shared';
import { describe, it } from 'vitest';
import {
  PROJECT_CACHE_GRACE_MS,
  projectApplicationState,
  projectCacheLag,
} from './application-state.projection.ts';

/** A resource with every field the projection copies, and the revision the Application was compared to. */
const webDeployment = {
  group: 'apps',
  version: 'v1',
  kind: 'Deployment',
  namespace: 'jane',
  name: 'web',
  status: 'Synced',
  health: { status: 'Healthy' },
};
const comparedTo = {
  source: { repoURL: 'https://github.com/org/repo', path: 'env/dev', targetRevision: 'main' },
  destination: { name: 'in-cluster', namespace: 'jane' },
};

const application = {
  metadata: { name: 'gitopsdepl-1', namespace: 'argocd' },
  spec: { project: 'p' },
  status: {
    sync: { status: 'Synced', revision: 'abc123', comparedTo },
    health: { status: 'Progressing', message: 'waiting for rollout' },
    resources: [
      webDeployment,
      { version: 'v1', kind: 'ConfigMap', namespace: 'jane', name: 'cfg', status: 'OutOfSync' },
    ],
    operationState: {
      operation: { sync: { revision: 'abc123' } },
      phase: 'Succeeded',
      message: 'successfully synced',
      startedAt: '2026-01-01T00:00:00Z',
      finishedAt: '2026-01-01T00:00:05Z',
      retryCount: 0,
      syncResult: { revision: 'abc123' },
      somethingElse: 'not copied',
    },
    conditions: [{ type: 'ComparisonError', message: 'boom', lastTransitionTime: '2026-01-01T00:00:00Z' }],
    reconciledAt: '2026-01-01T00:00:06Z',
  },
};

describe('projectApplicationState', () => {
  it('projects sync, health, resources, reconciledState, operationState and conditions as in the contract', () => {
    assert.deepEqual(projectApplicationState(application), {
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: 'Progressing', message: 'waiting for rollout' },
      resources: [
        webDeployment,
        { group: '', version: 'v1', kind: 'ConfigMap', namespace: 'jane', name: 'cfg', status: 'OutOfSync' },
      ],
      reconciledState: comparedTo,
      operationState: {
        operation: { sync: { revision: 'abc123' } },
        phase: 'Succeeded',
        message: 'successfully synced',
        syncResult: { revision: 'abc123' },
        startedAt: '2026-01-01T00:00:00Z',
        finishedAt: '2026-01-01T00:00:05Z',
        retryCount: 0,
      },
      conditions: [{ type: 'ComparisonError', message: 'boom' }],
    });
  });

  it('several sources: one revision and one compared source per source, in their order', () => {
    const multi = {
      status: {
        sync: {
          status: 'Synced',
          revisions: ['1.2.0', 'abc123'],
          comparedTo: {
            sources: [
              { repoURL: 'https://charts.example.com', chart: 'web', targetRevision: '1.2.0' },
              { repoURL: 'https://github.com/org/values', ref: 'values' },
            ],
            destination: { namespace: 'jane' },
          },
        },
      },
    };
    const projected = projectApplicationState(multi) as {
      sync: unknown;
      reconciledState: { sources: unknown };
    };
    assert.deepEqual(projected.sync, { status: 'Synced', revision: '', revisions: ['1.2.0', 'abc123'] });
    assert.deepEqual(projected.reconciledState.sources, [
      { repoURL: 'https://charts.example.com', path: '', targetRevision: '1.2.0', chart: 'web' },
      { repoURL: 'https://github.com/org/values', path: '', targetRevision: '' },
    ]);
  });

  it('an Application without status projects Unknown and leaves operationState out', () => {
    assert.deepEqual(projectApplicationState({ metadata: { name: 'x' } }), {
      sync: { status: 'Unknown', revision: '' },
      health: { status: 'Unknown' },
      resources: [],
      reconciledState: {
        source: { repoURL: '', path: '', targetRevision: '' },
        destination: { name: '', namespace: '' },
      },
      conditions: [],
    });
  });

  it('never throws on malformed status values', () => {
    for (const status of [null, 'x', 42, { sync: 'x', resources: 'nope', conditions: [null, 3] }]) {
      const projection = projectApplicationState({ metadata: { name: 'x' }, status });
      assert.equal((projection.sync as { status: string }).status, 'Unknown');
    }
  });

  it('ignores status fields outside the projection (reconciledAt changes write nothing)', () => {
    const later = structuredClone(application);
    later.status.reconciledAt = '2026-01-01T00:10:00Z';
    assert.equal(
      jsonFingerprint(projectApplicationState(later)),
      jsonFingerprint(projectApplicationState(application)),
    );
  });

  it('jsonFingerprint does not depend on key order', () => {
    assert.equal(
      jsonFingerprint({ a: 1, b: [{ c: 2, d: 3 }] }),
      jsonFingerprint({ b: [{ d: 3, c: 2 }], a: 1 }),
    );
  });
});

describe("Argo CD's cache lag on a new tenant's AppProject", () => {
  const app = { spec: { project: 'app-project-t1' }, status: {} };
  const missing = {
    type: 'InvalidSpecError',
    message: 'Application referencing project app-project-t1 which does not exist',
  };
  const created = '2026-01-01T00:00:00Z';
  const at = (seconds: number) => Date.parse(created) + seconds * 1000;

  it('is not reported while the project we created is new, and is reported once the grace is over', () => {
    assert.equal(
      projectCacheLag(missing, app, { createdAt: created }, at(5)),
      PROJECT_CACHE_GRACE_MS - 5_000,
    );
    assert.equal(projectCacheLag(missing, app, { createdAt: created }, at(PROJECT_CACHE_GRACE_MS / 1000)), 0);
  });

  it('is reported when the project does not exist for us either, names another project, or is another error', () => {
    assert.equal(projectCacheLag(missing, app, undefined, at(1)), 0);
    assert.equal(
      projectCacheLag(
        { ...missing, message: missing.message.replace('t1', 't2') },
        app,
        { createdAt: created },
        at(1),
      ),
      0,
    );
    assert.equal(
      projectCacheLag({ ...missing, type: 'ComparisonError' }, app, { createdAt: created }, at(1)),
      0,
    );
  });

  it('the projection leaves out exactly the conditions it is told to', () => {
    const projection = projectApplicationState(
      { ...app, status: { conditions: [missing, { type: 'SyncError', message: 'boom' }] } },
      { ignoreCondition: (c) => projectCacheLag(c, app, { createdAt: created }, at(1)) > 0 },
    );
    assert.deepEqual(projection.conditions, [{ type: 'SyncError', message: 'boom' }]);
  });
});
