import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { describe, it } from 'vitest';
import type { DestinationEnvironment } from './application.render.ts';
import {
  FIRST_SYNC_INFO,
  firstSyncOperation,
  isFirstSync,
  isSyncWithoutOperation,
  withFirstSync,
} from './first-sync.ts';

const retry = { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } };
const application = (syncPolicy?: unknown, extra: Partial<KubeObject> = {}): KubeObject => ({
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'Application',
  metadata: { name: 'gitopsdepl-1', namespace: 'argocd' },
  spec: { project: 'p', source: { repoURL: 'r', path: 'x' }, ...(syncPolicy ? { syncPolicy } : {}) },
  ...extra,
});
const automated = {
  automated: { prune: true, selfHeal: true, allowEmpty: true },
  syncOptions: ['PrunePropagationPolicy=background'],
  retry,
};
const workspace: DestinationEnvironment = { kind: 'Workspace' };
const created = { adopting: false, environment: workspace };

describe('firstSyncOperation: what Argo CD’s automated policy would set, marked as ours', () => {
  it('prunes as the policy says, with its sync options and its retry', () => {
    assert.deepEqual(firstSyncOperation(application(automated)), {
      initiatedBy: { automated: true },
      info: [{ name: FIRST_SYNC_INFO, value: "started with the Application's create by the GitOps Service" }],
      sync: { prune: true, syncOptions: ['PrunePropagationPolicy=background'] },
      retry,
    });
  });

  it("no prune, no sync options, and Argo CD's default retry of 5 when the policy names none", () => {
    assert.deepEqual(firstSyncOperation(application({ automated: { selfHeal: true } })), {
      initiatedBy: { automated: true },
      info: [{ name: FIRST_SYNC_INFO, value: "started with the Application's create by the GitOps Service" }],
      sync: { prune: false },
      retry: { limit: 5 },
    });
  });
});

describe('withFirstSync', () => {
  it('a new automated in-cluster Application is created with its first sync', () => {
    const desired = application(automated);
    const out = withFirstSync(desired, undefined, created);
    assert.deepEqual(out.desired.operation, firstSyncOperation(desired));
    assert.equal(out.resourceVersion, undefined);
    assert.equal(out.startsSync, true);
    assert.equal(isFirstSync(out.desired.operation), true);
  });

  it('none for a manual one, one switched off, an adopted one, or another cluster', () => {
    const cases: Array<[string, KubeObject, { adopting: boolean; environment: DestinationEnvironment }]> = [
      ['manual', application(), created],
      ['switched off', application({ automated: { enabled: false } }), created],
      ['adopted from another instance', application(automated), { adopting: true, environment: workspace }],
      [
        'an External environment',
        application(automated),
        { adopting: false, environment: { kind: 'External', id: 'e', allowsClusterResources: false } },
      ],
      ['no environment', application(automated), { adopting: false, environment: { kind: 'None' } }],
    ];
    for (const [what, desired, context] of cases) {
      const out = withFirstSync(desired, undefined, context);
      assert.equal(out.desired.operation, undefined, what);
      assert.equal(out.desired, desired, what);
      assert.equal(out.startsSync, false, what);
    }
  });

  it('an existing Application gets no first sync of its own', () => {
    const live = application(automated, {
      metadata: { name: 'gitopsdepl-1', namespace: 'argocd', resourceVersion: '7' },
    });
    const desired = application(automated);
    assert.deepEqual(withFirstSync(desired, live, created), { desired, startsSync: false });
    // Someone else's operation (a user's sync, ours of a SyncRun) is not ours to carry, running or not.
    const syncing = {
      ...live,
      operation: { initiatedBy: { username: 'admin' }, sync: {} },
      status: { operationState: { phase: 'Running' } },
    };
    assert.deepEqual(withFirstSync(desired, syncing, created), { desired, startsSync: false });
    // A sync that ended cleared its operation: nothing to resume.
    const ended = { ...live, status: { operationState: { phase: 'Succeeded' } } };
    assert.deepEqual(withFirstSync(desired, ended, created), { desired, startsSync: false });
  });

  it('our first sync still on the live Application is carried as it is, at its resourceVersion', () => {
    const desired = application({ ...automated, automated: { prune: false } });
    const operation = firstSyncOperation(application(automated));
    const live = application(automated, {
      metadata: { name: 'gitopsdepl-1', namespace: 'argocd', resourceVersion: '7' },
      operation,
    });
    const out = withFirstSync(desired, live, created);
    assert.deepEqual(out.desired, { ...desired, operation });
    assert.equal(out.resourceVersion, '7');
    assert.equal(out.startsSync, false);
  });

  it('a sync still running without its operation (withdrawn) is resumed, adopted or not, at its resourceVersion', () => {
    const desired = application(automated);
    const orphaned = application(automated, {
      metadata: { name: 'gitopsdepl-1', namespace: 'argocd', resourceVersion: '9' },
      status: { operationState: { phase: 'Running', retryCount: 2, finishedAt: '2026-11-30T18:07:21Z' } },
    });
    for (const context of [created, { adopting: true, environment: workspace }]) {
      const out = withFirstSync(desired, orphaned, context);
      assert.equal(out.startsSync, true);
      assert.equal(out.resourceVersion, '9');
      assert.equal(isFirstSync(out.desired.operation), true);
      assert.deepEqual((out.desired.operation as { sync?: unknown }).sync, firstSyncOperation(desired).sync);
      assert.ok(isSyncWithoutOperation(orphaned));
    }
    // Not for a manual Application: nobody asked Argo CD to keep it synced.
    const manual = application();
    assert.deepEqual(withFirstSync(manual, { ...orphaned, spec: manual.spec }, created), {
      desired: manual,
      startsSync: false,
    });
  });
});

describe('isFirstSync', () => {
  it('only an operation whose info names our first sync', () => {
    assert.equal(isFirstSync(undefined), false);
    assert.equal(isFirstSync(null), false);
    assert.equal(isFirstSync({ initiatedBy: { automated: true }, sync: {} }), false);
    assert.equal(isFirstSync({ info: [{ name: 'gitops-sync-operation-id', value: 'x' }] }), false);
    assert.equal(isFirstSync({ info: [{ name: FIRST_SYNC_INFO, value: 'x' }] }), true);
  });
});
