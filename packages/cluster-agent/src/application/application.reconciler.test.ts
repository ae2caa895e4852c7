import assert from 'node:assert/strict';
import type { ApplicationRow } from '@gitops/db';
import type { KubeObject } from '@gitops/shared';
import { describe, it } from 'vitest';
import { applicationFingerprint, hasStaleRevision, isSettled } from './application.reconciler.ts';
import { createSettled } from './settled.ts';

const row = (fields: Partial<ApplicationRow> = {}) =>
  ({
    id: '33333333-3333-4333-8333-333333333333',
    name: 'gitopsdepl-1',
    spec: { source: { repoURL: 'r', path: 'p' } },
    managed_environment_id: null,
    updated_at: new Date('2024-01-01T00:00:00Z'),
    ...fields,
  }) as ApplicationRow;

const live = (
  fields: { spec?: unknown; status?: unknown; labels?: Record<string, string> } = {},
): KubeObject => ({
  metadata: {
    name: 'gitopsdepl-1',
    namespace: 'argocd',
    labels: fields.labels ?? { a: '1' },
    resourceVersion: '7',
  },
  spec: fields.spec ?? { project: 'p', source: { repoURL: 'r', path: 'p' } },
  ...(fields.status !== undefined && { status: fields.status }),
});

describe('isSettled', () => {
  const depsWith = (application: KubeObject | undefined) => ({
    namespace: 'argocd',
    applications: { get: () => application, list: () => [] },
    settledApplications: createSettled(),
  });

  it('settled while the row and the owned fields of the live Application are as they were', () => {
    const deps = depsWith(live());
    assert.equal(isSettled(deps, row()), false);
    deps.settledApplications.settle(row().id, applicationFingerprint(row(), live()));
    assert.equal(isSettled(deps, row()), true);
    // Argo CD's status is not ours.
    assert.equal(
      isSettled({ ...deps, applications: depsWith(live({ status: { x: 1 } })).applications }, row()),
      true,
    );
  });

  it('not once the row, its environment, its update time or the owned live fields changed, or it is gone', () => {
    const deps = depsWith(live());
    deps.settledApplications.settle(row().id, applicationFingerprint(row(), live()));
    assert.equal(isSettled(deps, row({ spec: { source: { repoURL: 'r', path: 'q' } } })), false);
    assert.equal(
      isSettled(deps, row({ managed_environment_id: '44444444-4444-4444-8444-444444444444' })),
      false,
    );
    assert.equal(isSettled(deps, row({ updated_at: new Date('2024-01-02T00:00:00Z') })), false);
    const relabelled = { ...deps, applications: depsWith(live({ labels: { a: '2' } })).applications };
    assert.equal(isSettled(relabelled, row()), false);
    assert.equal(isSettled({ ...deps, applications: depsWith(undefined).applications }, row()), false);
  });
});

describe('hasStaleRevision', () => {
  const app = (source: unknown): KubeObject => ({ metadata: { name: 'a' }, spec: { source } });

  it('a live targetRevision the row no longer declares', () => {
    assert.equal(
      hasStaleRevision(app({ repoURL: 'r' }), app({ repoURL: 'r', targetRevision: 'main' })),
      true,
    );
    assert.equal(hasStaleRevision(app({ repoURL: 'r' }), app({ repoURL: 'r' })), false);
    assert.equal(hasStaleRevision(app({ repoURL: 'r' }), app({ repoURL: 'r', targetRevision: '' })), false);
    // Declared: compared as a declared field (compareOwnedFields), not here.
    assert.equal(hasStaleRevision(app({ targetRevision: 'dev' }), app({ targetRevision: 'main' })), false);
    assert.equal(hasStaleRevision(app({ repoURL: 'r' }), undefined), false);
  });
});
