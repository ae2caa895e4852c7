/**
 * A backend replica whose SyncRun cache is behind (its watch has not delivered a delete or a re-create yet)
 * neither ends the sync of the name's current SyncRun nor requests another sync for a SyncRun that is gone.
 * Replica B's cache is made to lag by stopping its watch once it holds the SyncRun; replica A sees everything.
 * No agent runs: the test writes a sync's outcome as the agent would.
 */
import assert from 'node:assert/strict';
import { API_GROUP_VERSION, type GitOpsDeploymentSyncRunSpec, Plural } from '@gitops/api';
import { syncRun } from '@gitops/api/testing';
import { setSyncOperationOutcome } from '@gitops/db';
import { getPathIfExists, HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, test } from 'vitest';
import type { Backend } from '../app.ts';
import { BACKEND_SHARD_LABEL } from '../config.ts';
import { useStartedBackend } from '../testing/backend-fixture.ts';
import { syncOperationOf } from './sync-run.store.ts';

const MANUAL = {
  source: { repoURL: 'https://github.com/example/repo', path: 'dev', targetRevision: 'main' },
  type: 'manual',
};

describe('a backend replica whose SyncRun cache is behind', () => {
  // Replica A; each test starts its B (the fixture's cleanup stops any left running).
  const { f, tenant } = useStartedBackend({ GITOPS_RELAY_ENABLED: 'false' }, 'syncrun');

  const runsPath = (name?: string) =>
    `/apis/${API_GROUP_VERSION}/namespaces/${tenant.name}/${Plural.GitOpsDeploymentSyncRun}${name ? `/${name}` : ''}`;
  const createSyncRun = async (name: string, gitopsDeploymentName: string) =>
    (await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: runsPath(),
      body: syncRun(name, { gitopsDeploymentName } as GitOpsDeploymentSyncRunSpec, {
        labels: { [BACKEND_SHARD_LABEL]: f.runLabel },
      }),
    })) as KubeObject;
  const deleteSyncRun = async (name: string) => {
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: runsPath(name) });
    await eventually(`SyncRun ${name} gone`, async () =>
      (await getPathIfExists(f.kc, runsPath(name))) ? undefined : true,
    );
  };
  const syncRowOf = (run: KubeObject) =>
    eventually(`the sync row of ${run.metadata.name}`, () => syncOperationOf(f.db, run.metadata.uid!));
  const operationsOwnedBy = (uid: string) =>
    f.db.selectFrom('operation').select('id').where('owner_uid', '=', uid).execute();

  /** Replica B, once its SyncRun cache holds `name`: then its watch stops, so nothing newer reaches it. */
  async function replicaBehind(name: string): Promise<Backend> {
    const b = await f.startBackend({ GITOPS_RELAY_ENABLED: 'false' });
    await eventually(`replica B caches SyncRun ${name}`, () =>
      b.syncRuns.informer.get(tenant.name, name) ? true : undefined,
    );
    await b.syncRuns.informer.stop();
    await b.syncRuns.queue.whenIdle();
    return b;
  }

  /** B reconciles every SyncRun its cache holds, to the end; then it stops. */
  async function reconcileEverything(b: Backend) {
    b.syncRuns.enqueueAll();
    await b.syncRuns.queue.whenIdle();
    await f.stopBackend(b);
  }

  test("the name's next SyncRun keeps its running sync", async () => {
    await f.createDeployment(tenant.name, 'manual-next', MANUAL);
    const first = await createSyncRun('run-next', 'manual-next');
    await syncRowOf(first);
    const b = await replicaBehind('run-next');
    await deleteSyncRun('run-next');
    const second = await createSyncRun('run-next', 'manual-next');
    const running = await syncRowOf(second);
    const announced = await operationsOwnedBy(second.metadata.uid!);

    await reconcileEverything(b);
    assert.deepEqual(
      await syncOperationOf(f.db, second.metadata.uid!),
      running,
      "B ended the current SyncRun's sync",
    );
    assert.equal(running.desired_state, 'Running');
    assert.deepEqual(await operationsOwnedBy(second.metadata.uid!), announced, 'B announced a change of it');
  });

  test('a SyncRun deleted after its sync ended gets no other sync', async () => {
    await f.createDeployment(tenant.name, 'manual-ended', MANUAL);
    const run = await createSyncRun('run-ended', 'manual-ended');
    const row = await syncRowOf(run);
    const b = await replicaBehind('run-ended');
    assert.ok(await setSyncOperationOutcome(f.db, row.id, 'Succeeded', ''));
    await deleteSyncRun('run-ended');
    await eventually('A deleted the ended sync row', async () =>
      (await f.db.selectFrom('sync_operation').select('id').where('id', '=', row.id).executeTakeFirst())
        ? undefined
        : true,
    );

    await reconcileEverything(b);
    assert.equal(
      await syncOperationOf(f.db, run.metadata.uid!),
      undefined,
      'B requested a sync for a deleted SyncRun',
    );
  });
});
