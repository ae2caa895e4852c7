/**
 * A SyncRun whose parent GitOpsDeployment was deleted and created again under its name while this replica's
 * cache still holds the earlier incarnation (its watch lagged): the earlier incarnation's row is not the one
 * to sync. Before, the sync was requested on that row, which then went with its deployment and ended the sync
 * ("the GitOpsDeployment's Argo CD Application was deleted before the sync ended"): the new deployment was
 * never synced (chaos seed 675057761). The reconcile steps run on a real database; the cache and the API
 * server's answer are played.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { GitOpsDeploymentType } from '@gitops/api';
import { insertApiCrMapping } from '@gitops/db';
import { givenTenantApplication, useTestDatabase } from '@gitops/db/testing';
import { createLogger } from '@gitops/shared';
import { describe, test } from 'vitest';
import type { GitOpsDeploymentObject, SyncRunObject } from '../kinds.ts';
import { reconcileLive, type SyncRunSteps } from './sync-run.reconciler.ts';
import { syncOperationOf } from './sync-run.store.ts';

const testDb = useTestDatabase();
const logger = createLogger({ name: 'test', level: 'silent' });

async function given(liveUid: (cachedUid: string) => string) {
  const { clusterUser, application } = await givenTenantApplication(testDb.db);
  const namespace = clusterUser.namespace_name;
  // The incarnation the cache holds, and its row.
  const cached: GitOpsDeploymentObject = {
    apiVersion: 'managed-gitops.redhat.com/v1alpha1',
    kind: 'GitOpsDeployment',
    metadata: { namespace, name: 'd', uid: randomUUID() },
    spec: {
      source: { repoURL: 'https://github.com/org/repo', path: 'env/dev' },
      type: GitOpsDeploymentType.Manual,
    },
  };
  await insertApiCrMapping(
    testDb.db,
    { uid: cached.metadata.uid!, name: 'd', namespace, namespaceUid: clusterUser.namespace_uid },
    { kind: 'GitOpsDeployment', applicationId: application.id },
  );
  // Older than the wait for the parent's latest spec: the row is taken as it is.
  const syncRun: SyncRunObject = {
    apiVersion: 'managed-gitops.redhat.com/v1alpha1',
    kind: 'GitOpsDeploymentSyncRun',
    metadata: { namespace, name: 'run', uid: randomUUID(), creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: { gitopsDeploymentName: 'd' },
  };
  const deps = {
    db: testDb.db,
    events: { event: async () => {} },
    now: () => new Date(),
    syncRuns: { list: () => [syncRun] },
    deployments: { get: () => cached },
    seen: new Map(),
    follow: () => {},
    namespaceUid: async () => clusterUser.namespace_uid,
    liveDeploymentUid: async () => liveUid(cached.metadata.uid!),
    liveUid: async () => syncRun.metadata.uid,
  } as unknown as SyncRunSteps;
  /**
   * One reconcile. The status write that follows a requested sync needs an API server this test has none of:
   * its failure is left out, what is asserted is the database (the row the request writes first).
   */
  const reconcile = () =>
    reconcileLive(deps, syncRun, { logger, signal: new AbortController().signal, retries: 0 }).catch(
      () => undefined,
    );
  return { reconcile, syncRun };
}

describe('a SyncRun whose parent the cache holds in an earlier incarnation', () => {
  test('the API server holds another GitOpsDeployment of that name: no sync is requested on the cached one’s row', async () => {
    const { reconcile, syncRun } = await given(() => randomUUID());
    const result = await reconcile();
    assert.ok(result && 'requeueAfter' in result && result.requeueAfter !== undefined, 'looked at again');
    assert.equal(await syncOperationOf(testDb.db, syncRun.metadata.uid!), undefined);
  });

  test('the API server holds the cached one: its sync is requested', async () => {
    const { reconcile, syncRun } = await given((cachedUid) => cachedUid);
    await reconcile();
    assert.ok(await syncOperationOf(testDb.db, syncRun.metadata.uid!));
  });
});
