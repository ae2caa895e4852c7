/**
 * Tier 3b: PostgreSQL restored from a backup (issue 37; the procedure is docs/backup-and-restore.md). The
 * database goes back to a copy taken before deployments were created, changed, deleted and synced; the
 * GitOpsDeployment CRs are the truth, so the service rebuilds what the copy lacks from them, and nothing Argo CD
 * deployed meanwhile is pruned or re-created on the way: the deployed objects keep their uids.
 *
 * The backup is a file-level copy of the database (`CREATE DATABASE ... TEMPLATE`, with every service
 * stopped), which is what restoring a base backup or failing over to a replica that missed the last commits
 * gives: the database as it was at an earlier point, and the server's roles as they are.
 */
import assert from 'node:assert/strict';
import { Label } from '@gitops/api';
import { manifest } from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { type GitOpsDeployment, watchEvents } from '../fixture/kube.ts';
import { CONVERGE_MS, gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

interface OperationState {
  phase?: string;
  syncResult?: { revision?: string };
}

describe('tier 3b: PostgreSQL restored from a backup, with a real Argo CD', () => {
  const f = useRealSystem();
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant('restore');
  });

  /** The services stopped, as the procedure stops them before a backup or a restore (Argo CD runs on). */
  async function stopServices() {
    await f.system.kill('cluster-agent');
    await f.system.kill('backend');
  }
  async function startServices() {
    await f.system.start('backend');
    await f.system.start('cluster-agent');
  }

  /**
   * After a restore: the backend alone, until it says that every GitOpsDeployment and SyncRun was reconciled
   * once since its start (the rows say what the CRs say); then the agent.
   */
  async function startBackendThenAgent() {
    const from = f.logs.length;
    await f.system.start('backend');
    for (const kind of ['GitOpsDeployment', 'GitOpsDeploymentSyncRun'])
      await eventually(
        `the backend to have reconciled every ${kind} once`,
        async () =>
          f.logs
            .slice(from)
            .some((line) => line.startsWith('[backend]') && line.includes(`every ${kind} reconciled once`))
            ? true
            : undefined,
        CONVERGE_MS,
      );
    await f.system.start('cluster-agent');
  }

  /** The revisions and ids of Argo CD's sync history of the GitOpsDeployment's Application. */
  const historyOf = async (gd: GitOpsDeployment) =>
    (
      (await f.expect.application(gd)).status as
        | { history?: { id?: number; revision?: string }[] }
        | undefined
    )?.history?.map((h) => `${h.id} ${h.revision}`) ?? [];

  const uidOf = async (name: string) => (await f.expect.object(tenant, 'ConfigMap', name)).metadata.uid;

  /** The application rows the database maps to the GitOpsDeployment now. */
  const applicationRowsOf = async (gd: GitOpsDeployment) =>
    (
      await f.system.db
        .selectFrom('api_cr_mapping')
        .select('application_id')
        .where('cr_kind', '=', 'GitOpsDeployment')
        .where('cr_uid', '=', gd.metadata.uid ?? '')
        .execute()
    ).map((r) => r.application_id);

  it('rebuilds what changed since the backup from the CRs; nothing deployed is pruned or re-created, and a SyncRun keeps its true outcome', async () => {
    // Given, before the backup: A deploying path one (a ConfigMap kept by the later change, and one that the
    // change removes), C, and a manual M synced to its first commit by a SyncRun
    const shared = manifest.configMap('restore-a-shared', { kept: 'across the change' });
    const repoA = await f.given.repository('restore-a', {
      'one/shared.yaml': shared,
      'one/first.yaml': manifest.configMap('restore-a-first', { path: 'one' }),
      'two/shared.yaml': shared,
      'two/second.yaml': manifest.configMap('restore-a-second', { path: 'two' }),
    });
    const repoB = await f.given.repository('restore-b', {
      'dev/config.yaml': manifest.configMap('restore-b', { created: 'after the backup' }),
    });
    const repoC = await f.given.repository('restore-c', {
      'dev/config.yaml': manifest.configMap('restore-c', { deleted: 'after the backup' }),
    });
    const repoM = await f.given.repository('restore-m', {
      'dev/config.yaml': manifest.configMap('restore-m', { release: 'first' }),
    });
    const mFirst = await repoM.head();
    const a = await f.when.deployed(tenant, 'restore-a', gitSource(repoA, 'one'));
    const c = await f.when.deployed(tenant, 'restore-c', gitSource(repoC, 'dev'));
    const m = await f.when.deployed(tenant, 'restore-m', gitSource(repoM, 'dev'), { type: 'manual' });
    await f.system.createSyncRun(tenant, 'restore-m-1', {
      gitopsDeploymentName: 'restore-m',
      revisionID: mFirst,
    });
    await f.expect.deployment(a).is('Synced/Healthy', syncedAndHealthy);
    await f.expect.deployment(c).is('Synced/Healthy', syncedAndHealthy);
    await f.expect.syncRunPhase(tenant, 'restore-m-1', 'Succeeded');
    await f.expect.object(tenant, 'ConfigMap', 'restore-a-first');
    await f.expect.object(tenant, 'ConfigMap', 'restore-c');
    const sharedUid = await uidOf('restore-a-shared');

    // When PostgreSQL is backed up (the services stopped, as for a base backup), and the services run again
    await stopServices();
    const backup = await f.system.database.backup();
    await startServices();

    // and after the backup B is created, A's path changes, C is deleted and M is synced to a new commit
    const b = await f.when.deployed(tenant, 'restore-b', gitSource(repoB, 'dev'));
    await f.when.edited(a, { source: gitSource(repoA, 'two') });
    await f.when.deleted(c);
    const mSecond = await repoM.commit({
      'dev/config.yaml': manifest.configMap('restore-m', { release: 'second' }),
    });
    const m2Run = await f.system.createSyncRun(tenant, 'restore-m-2', {
      gitopsDeploymentName: 'restore-m',
      revisionID: mSecond,
    });
    await f.expect
      .deployment(a)
      .is(
        'Synced/Healthy at path two',
        (s) => syncedAndHealthy(s) && s.reconciledState?.source?.path === 'two',
      );
    await f.expect.deployment(b).is('Synced/Healthy', syncedAndHealthy);
    await f.expect.deployment(c).gone();
    await f.expect.noObject(tenant, 'ConfigMap', 'restore-a-first');
    await f.expect.noObject(tenant, 'ConfigMap', 'restore-c');
    const m2 = await f.expect.syncRunPhase(tenant, 'restore-m-2', 'Succeeded');
    assert.equal(m2.revision, mSecond);
    const mHistory = await historyOf(m);
    await f.expect.object(tenant, 'ConfigMap', 'restore-m', (cm) => cm.data?.release === 'second');
    const uids = {
      'restore-a-shared': await uidOf('restore-a-shared'),
      'restore-a-second': await uidOf('restore-a-second'),
      'restore-b': await uidOf('restore-b'),
      'restore-m': await uidOf('restore-m'),
    };
    assert.equal(uids['restore-a-shared'], sharedUid, 'the change of path kept the shared ConfigMap');

    // When the database is restored to the backup, with the services stopped, and they start again; from
    // now on every ConfigMap created or deleted in the tenant's namespace is recorded
    const createdOrDeleted: string[] = [];
    const watch = await watchEvents(
      f.system.kc,
      `/api/v1/namespaces/${tenant}/configmaps`,
      (type, object) => {
        if (type === 'ADDED' || type === 'DELETED') createdOrDeleted.push(`${type} ${object.metadata.name}`);
      },
    );
    try {
      await stopServices();
      await f.system.database.restore(backup);
      // (the backend first, and the agent once the backend has rebuilt the rows from the CRs, as the
      // procedure says: an agent that ran before would make Argo CD match the restored, older rows)
      await startBackendThenAgent();

      // Then A deploys what its CR says now (path two), through the Application it had
      await f.expect.application(a, (app) => app.spec.source.path === 'two');
      await f.expect
        .deployment(a)
        .is(
          'Synced/Healthy at path two',
          (s) => syncedAndHealthy(s) && s.reconciledState?.source?.path === 'two',
        );
      // and B, which the backup did not know, has a rebuilt row that took its Application over
      const bRow = await eventually(
        'a rebuilt application row of B',
        async () => (await applicationRowsOf(b))[0] ?? undefined,
        CONVERGE_MS,
      );
      await f.expect.application(b, (app) => app.metadata.labels?.[Label.DatabaseId] === bRow);
      await f.expect.deployment(b).is('Synced/Healthy', syncedAndHealthy);
      // and C, deleted since the backup, has no row left (the backend found it gone)
      await eventually(
        'no application row of C',
        async () => ((await applicationRowsOf(c)).length === 0 ? true : undefined),
        CONVERGE_MS,
      );
      // and M still shows the outcome of its last sync, and that SyncRun still says Succeeded at its commit
      await f.expect.deployment(m).is(`a Succeeded sync to ${mSecond}`, (s) => {
        const state = s.operationState as OperationState | undefined;
        return state?.phase === 'Succeeded' && state.syncResult?.revision === mSecond;
      });
      // and the SyncRun whose sync ended after the backup is not run again: the backend, which reconciled every
      // SyncRun before the agent started, asked for no sync of it
      const m2Rows = await f.system.db
        .selectFrom('api_cr_mapping')
        .select('sync_operation_id')
        .where('cr_uid', '=', m2Run.metadata.uid ?? '')
        .execute();
      assert.deepEqual(m2Rows, []);
      // and the SyncRun still reports the sync it ran, not another: same phase, revision and times
      const after = await f.expect.syncRunPhase(tenant, 'restore-m-2', 'Succeeded');
      assert.deepEqual(
        {
          phase: after.phase,
          revision: after.revision,
          startedAt: after.startedAt,
          finishedAt: after.finishedAt,
        },
        { phase: m2.phase, revision: m2.revision, startedAt: m2.startedAt, finishedAt: m2.finishedAt },
      );
      assert.notEqual(
        after.conditions?.find((x) => x.type === 'ErrorOccurred')?.status,
        'True',
        JSON.stringify(after),
      );
      assert.equal((await f.expect.syncRunPhase(tenant, 'restore-m-1', 'Succeeded')).revision, mFirst);
      // and Argo CD ran no sync of M again
      assert.deepEqual(await historyOf(m), mHistory);
      // and no delete is left held by the deletion guard
      await eventually(
        'no held delete',
        async () => {
          const held = await f.system.db
            .selectFrom('application_deletion_hold')
            .select(['application_name', 'reason'])
            .execute();
          return held.length === 0 ? true : undefined;
        },
        CONVERGE_MS,
      );
      for (const gd of [a, b]) await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    } finally {
      watch.stop();
    }

    // and nothing deployed was pruned or re-created on the way: the same objects, the same uids, nothing of
    // C's or of A's old path back
    for (const [name, uid] of Object.entries(uids)) {
      assert.equal((await f.expect.readObject(tenant, 'ConfigMap', name))?.metadata.uid, uid, name);
    }
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'restore-a-first'), undefined);
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'restore-c'), undefined);
    assert.deepEqual(createdOrDeleted, []);
    assert.deepEqual(f.system.crashes, []);
  });
});
