/**
 * Integration: the backend's GitOpsDeploymentSyncRun reconcile against the real API server and PostgreSQL
 * (no agent: the test plays the agent by writing the outcome and finishing operations).
 */

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { GitOpsDeploymentSyncRunSpec } from '@gitops/api';
import { API_GROUP_VERSION, Plural } from '@gitops/api';
import { syncRun } from '@gitops/api/testing';
import {
  completeOperation,
  getApplication,
  getSyncOperation,
  markSyncOperationRequested,
  recordSyncProgress,
  SYNC_APPLICATION_DELETED_MESSAGE,
  setSyncOperationOutcome,
} from '@gitops/db';
import { getPathIfExists, HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually, listEvents } from '@gitops/shared/testing';
import { describe, test } from 'vitest';
import { BACKEND_SHARD_LABEL } from '../config.ts';
import { useStartedBackend } from '../testing/backend-fixture.ts';

const MANUAL = {
  source: { repoURL: 'https://github.com/example/repo', path: 'dev', targetRevision: 'main' },
  type: 'manual',
};

describe('GitOpsDeploymentSyncRun reconcile (backend)', () => {
  const { f: fixture, backend, tenant } = useStartedBackend({ GITOPS_RELAY_ENABLED: 'false' }, 'syncrun');

  const runsPath = (name?: string) =>
    `/apis/${API_GROUP_VERSION}/namespaces/${tenant.name}/${Plural.GitOpsDeploymentSyncRun}${name ? `/${name}` : ''}`;
  const createSyncRun = async (name: string, spec: Record<string, unknown>) =>
    (await kubeRequest(fixture.kc, {
      method: HttpMethod.POST,
      path: runsPath(),
      body: syncRun(name, spec as unknown as GitOpsDeploymentSyncRunSpec, {
        labels: { [BACKEND_SHARD_LABEL]: fixture.runLabel },
      }),
    })) as KubeObject;
  const getSyncRun = async (name: string) =>
    (await getPathIfExists(fixture.kc, runsPath(name))) as KubeObject | undefined;
  const deleteSyncRun = (name: string) =>
    kubeRequest(fixture.kc, { method: HttpMethod.DELETE, path: runsPath(name) });
  const conditionOf = async (name: string) => {
    const run = await getSyncRun(name);
    const conditions = (run?.status as { conditions?: Record<string, string>[] } | undefined)?.conditions;
    return conditions;
  };
  const rowsOf = (uid: string) =>
    fixture.db
      .selectFrom('api_cr_mapping')
      .innerJoin('sync_operation', 'sync_operation.id', 'api_cr_mapping.sync_operation_id')
      .selectAll('sync_operation')
      .where('api_cr_mapping.cr_uid', '=', uid)
      .execute();
  interface SyncRunStatus {
    phase?: string;
    revision?: string;
    startedAt?: string;
    finishedAt?: string;
    message?: string;
    conditions?: Record<string, string>[];
  }
  const statusOf = async (name: string) => (await getSyncRun(name))?.status as SyncRunStatus | undefined;
  /** Waits until the SyncRun's status satisfies `check`; says what it was on timeout. */
  const statusWhen = async (name: string, what: string, check: (s: SyncRunStatus) => boolean) => {
    let last: SyncRunStatus | undefined;
    return await eventually(`SyncRun ${name}: ${what}`, async () => {
      last = await statusOf(name);
      return last && check(last) ? last : undefined;
    }).catch((err: unknown) => {
      throw new Error(`${String(err)}; status: ${JSON.stringify(last)}`);
    });
  };
  const eventReasonsOf = (uid: string) => listEvents(fixture.kc, tenant.name, { uid });
  const syncRow = async (uid: string) =>
    (
      await eventually('sync row', async () => {
        const rows = await rowsOf(uid);
        return rows.length > 0 ? rows : undefined;
      })
    )[0]!;
  const operationsOf = (uid: string) =>
    fixture.db
      .selectFrom('operation')
      .selectAll()
      .where('owner_uid', '=', uid)
      .orderBy('created_at')
      .execute();
  /** A manual GitOpsDeployment and a SyncRun of it, once the backend wrote the SyncRun's row. */
  const manualSyncRun = async (deployment: string, name: string, spec: Record<string, unknown> = {}) => {
    const gd = await fixture.createDeployment(tenant.name, deployment, MANUAL);
    const run = await createSyncRun(name, { gitopsDeploymentName: deployment, ...spec });
    const uid = run.metadata.uid as string;
    return { gd, run, uid, row: await syncRow(uid) };
  };
  /** Plays the agent taking an operation (the relay is off in these tests). */
  const takeOperation = (id: string) =>
    fixture.db.updateTable('operation').set({ state: 'In_Progress' }).where('id', '=', id).execute();
  /** The SyncRun's operations once the backend announced a second one (the termination) after the first. */
  const withTerminateOperation = (uid: string) =>
    eventually('terminate operation', async () => {
      const ops = await operationsOf(uid);
      return ops.length === 2 ? ops : undefined;
    });

  test('a SyncRun on a manual deployment writes one sync_operation, mapping and SyncOperation operation; the condition is False', async () => {
    const { gd, uid, row } = await manualSyncRun('manual', 'run-one', { revisionID: 'v1' });
    assert.equal(row.revision, 'v1');
    assert.equal(row.desired_state, 'Running');
    const application = await fixture.db
      .selectFrom('api_cr_mapping')
      .select('application_id')
      .where('cr_uid', '=', gd.metadata.uid as string)
      .executeTakeFirstOrThrow();
    assert.equal(row.application_id, application.application_id);
    const operations = await operationsOf(uid);
    assert.equal(operations.length, 1);
    assert.equal(operations[0]?.resource_type, 'SyncOperation');
    assert.equal(operations[0]?.resource_id, row.id);
    assert.equal(operations[0]?.owner_kind, 'GitOpsDeploymentSyncRun');
    assert.equal(operations[0]?.owner_name, 'run-one');
    // The SyncRun may have reached the backend's cache before its parent did: then a first reconcile wrote
    // "parent not found" (True), and the False condition comes with the reconcile that created the row.
    const conditions = await eventually('condition False', async () => {
      const c = await conditionOf('run-one');
      return c?.[0]?.status === 'False' ? c : undefined;
    });
    assert.equal(conditions.length, 1);
    assert.deepEqual(
      {
        type: conditions[0]?.type,
        status: conditions[0]?.status,
        reason: conditions[0]?.reason,
        message: conditions[0]?.message,
      },
      { type: 'ErrorOccurred', status: 'False', reason: '', message: '' },
    );
    assert.equal((await statusOf('run-one'))?.phase, 'Pending');

    // Updating the SyncRun never creates a second sync.
    await kubeRequest(fixture.kc, {
      method: HttpMethod.PATCH,
      path: runsPath('run-one'),
      body: { metadata: { labels: { touched: 'yes' } } },
      contentType: 'application/merge-patch+json',
    });
    // A reconcile that has seen the patch ran to the end before the count (not a fixed pause).
    await eventually('the patch in the backend cache', () =>
      backend.syncRuns.informer.get(tenant.name, 'run-one')?.metadata.labels?.touched === 'yes'
        ? true
        : undefined,
    );
    backend.syncRuns.queue.add(`${tenant.name}/run-one`);
    await backend.syncRuns.queue.whenIdle();
    assert.equal((await rowsOf(uid)).length, 1);
    assert.equal((await operationsOf(uid)).length, 1);
  });

  test("a SyncRun is requested only once its parent's latest spec is in the application row (it syncs the new spec, not the old)", async () => {
    const gd = await fixture.createDeployment(tenant.name, 'changing', MANUAL);
    const { application_id: applicationId } = await eventually('application row', () =>
      fixture.db
        .selectFrom('api_cr_mapping')
        .select('application_id')
        .where('cr_uid', '=', gd.metadata.uid as string)
        .executeTakeFirst(),
    );
    // The user changed the deployment and its reconcile has not written the change yet: the row still holds
    // the spec before the change (played by putting an older spec into the row).
    const current = (await getApplication(fixture.db, applicationId!))?.spec as {
      source: Record<string, unknown>;
    };
    const before = { ...current, source: { ...current.source, path: 'before-the-change' } };
    await fixture.db
      .updateTable('application')
      .set({ spec: JSON.stringify(before) })
      .where('id', '=', applicationId!)
      .execute();
    const run = await createSyncRun('after-a-change', { gitopsDeploymentName: 'changing' });
    // The backend looks again every second while it waits: a few looks find the row still old.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    assert.deepEqual(await rowsOf(run.metadata.uid as string), [], 'no sync of the old spec is requested');
    // The user's next change reaches the row (the parent's reconcile writes it): now the sync goes ahead, of it.
    await kubeRequest(fixture.kc, {
      method: HttpMethod.PATCH,
      path: `/apis/${API_GROUP_VERSION}/namespaces/${tenant.name}/${Plural.GitOpsDeployment}/changing`,
      body: { spec: { source: { path: 'dev2' } } },
      contentType: 'application/merge-patch+json',
    });
    const row = await syncRow(run.metadata.uid as string);
    assert.equal(row.application_id, applicationId);
    const latest = (await getApplication(fixture.db, applicationId!))?.spec as { source: { path?: string } };
    assert.equal(latest.source.path, 'dev2', 'the row holds the latest spec when the sync is requested');
  });

  test('a failed sync outcome is reported in the message', async () => {
    const { uid, row } = await manualSyncRun('manual-failing', 'run-failing');
    const [operation] = await operationsOf(uid);
    await setSyncOperationOutcome(fixture.db, row.id, 'Failed', 'the manifests are invalid');
    await takeOperation(operation!.id);
    await completeOperation(fixture.db, operation!.id, 'sync Failed');
    const conditions = await eventually('failure reported', async () => {
      const c = await conditionOf('run-failing');
      return c?.[0]?.status === 'True' ? c : undefined;
    });
    assert.equal(conditions[0]?.reason, 'ErrorOccurred');
    assert.equal(conditions[0]?.message, 'the sync ended with phase Failed: the manifests are invalid');
    const status = await statusWhen('run-failing', 'Failed', (s) => s.phase === 'Failed');
    assert.equal(status.message, 'the manifests are invalid');
  });

  test('a deployment deleted while its SyncRun waits ends the sync: Failed, saying why, with no agent needed', async () => {
    // No engine instance may be left to end it: once the application row is gone, the instance told about
    // the sync sees it only through the tenant, and a tenant that moves takes along only the syncs of its
    // applications (chaos seed 463140204: the SyncRun stayed Pending for good).
    const { row } = await manualSyncRun('deleted-under-sync', 'run-deleted-under');
    assert.equal(row.outcome, null);
    await fixture.deleteDeployment(tenant.name, 'deleted-under-sync');
    const status = await statusWhen('run-deleted-under', 'Failed', (s) => s.phase === 'Failed');
    assert.equal(status.message, SYNC_APPLICATION_DELETED_MESSAGE);
    const ended = await getSyncOperation(fixture.db, row.id);
    assert.equal(ended?.outcome, 'Error');
    assert.equal(ended?.application_id, null);
  });

  test('the status follows the sync: Pending, Running (start, message), Succeeded (revision, finish); only the row changes wake it', async () => {
    const { uid, row } = await manualSyncRun('manual-progress', 'run-progress');
    await statusWhen('run-progress', 'Pending', (s) => s.phase === 'Pending');
    // The agent requested it, then reports what Argo CD says. No operation changes state meanwhile: the
    // row's own notification is what wakes the SyncRun.
    await markSyncOperationRequested(fixture.db, row.id, randomUUID());
    const startedAt = new Date('2026-01-01T10:00:00Z');
    await recordSyncProgress(fixture.db, row.id, {
      argocdPhase: 'Running',
      syncedRevision: '',
      startedAt,
      finishedAt: null,
      argocdMessage: 'waiting for completion of hook batch/Job/migrate',
    });
    const running = await statusWhen('run-progress', 'Running', (s) => s.phase === 'Running');
    assert.equal(running.startedAt, '2026-01-01T10:00:00Z');
    assert.equal(running.message, 'waiting for completion of hook batch/Job/migrate');
    assert.equal(running.finishedAt, undefined);
    assert.equal(running.revision, undefined);

    await setSyncOperationOutcome(fixture.db, row.id, 'Succeeded', 'successfully synced (all tasks run)', {
      argocdPhase: 'Succeeded',
      syncedRevision: '0123456789abcdef0123456789abcdef01234567',
      startedAt,
      finishedAt: new Date('2026-01-01T10:00:07Z'),
      argocdMessage: 'successfully synced (all tasks run)',
    });
    const done = await statusWhen('run-progress', 'Succeeded', (s) => s.phase === 'Succeeded');
    assert.deepEqual(
      {
        revision: done.revision,
        startedAt: done.startedAt,
        finishedAt: done.finishedAt,
        message: done.message,
      },
      {
        revision: '0123456789abcdef0123456789abcdef01234567',
        startedAt: '2026-01-01T10:00:00Z',
        finishedAt: '2026-01-01T10:00:07Z',
        message: 'successfully synced (all tasks run)',
      },
    );
    // ErrorOccurred stays as it was: False, "", "".
    const condition = done.conditions?.find((c) => c.type === 'ErrorOccurred');
    assert.deepEqual([condition?.status, condition?.reason, condition?.message], ['False', '', '']);
    const reasons = await eventually('SyncSucceeded Event', async () => {
      const r = (await eventReasonsOf(uid)).map((e) => e.reason);
      return r.includes('SyncSucceeded') ? r : undefined;
    });
    assert.ok(reasons.includes('SyncStarted'));
  });

  test('spec.terminate terminates a running sync (the SyncRun stays, Terminated); one set before anything was requested never syncs', async () => {
    const { uid, row } = await manualSyncRun('manual-stop', 'run-stop');
    const [first] = await operationsOf(uid);
    await takeOperation(first!.id);
    await markSyncOperationRequested(fixture.db, row.id, randomUUID());
    await kubeRequest(fixture.kc, {
      method: HttpMethod.PATCH,
      path: runsPath('run-stop'),
      body: { spec: { terminate: true } },
      contentType: 'application/merge-patch+json',
    });
    const operations = await withTerminateOperation(uid);
    assert.equal(operations[1]?.resource_id, row.id);
    const asked = await rowsOf(uid);
    assert.equal(asked[0]?.desired_state, 'Terminated');
    // The agent terminates it in Argo CD (which ends it Failed, "Operation terminated") and records it.
    await setSyncOperationOutcome(fixture.db, row.id, 'Terminated', 'Operation terminated', {
      argocdPhase: 'Failed',
      syncedRevision: '',
      startedAt: new Date('2026-01-01T11:00:00Z'),
      finishedAt: new Date('2026-01-01T11:00:30Z'),
      argocdMessage: 'Operation terminated',
    });
    const status = await statusWhen('run-stop', 'Terminated', (s) => s.phase === 'Terminated');
    assert.equal(status.message, 'Operation terminated');
    assert.equal(status.finishedAt, '2026-01-01T11:00:30Z');
    assert.equal((await rowsOf(uid)).length, 1, 'the SyncRun and its row stay');

    // Terminated before its parent even exists: no row, ever, and the SyncRun says so.
    const early = await createSyncRun('run-stop-early', { gitopsDeploymentName: 'not-yet', terminate: true });
    const earlyStatus = await statusWhen('run-stop-early', 'Terminated', (s) => s.phase === 'Terminated');
    assert.equal(earlyStatus.message, 'terminated before the sync was requested');
    await fixture.createDeployment(tenant.name, 'not-yet', MANUAL);
    // Once the backend sees the parent, a reconcile of the SyncRun runs to the end before the count (not a
    // fixed pause, which could end before the reconcile did and pass without checking anything).
    await eventually('the parent in the backend cache', () =>
      backend.deployments.informer.get(tenant.name, 'not-yet') ? true : undefined,
    );
    backend.syncRuns.queue.add(`${tenant.name}/run-stop-early`);
    await backend.syncRuns.queue.whenIdle();
    assert.equal((await rowsOf(early.metadata.uid as string)).length, 0);
  });

  test('deleting a SyncRun whose sync still runs asks for termination; its rows go once the agent finished', async () => {
    const { uid, row } = await manualSyncRun('manual-term', 'run-term');
    // The agent holds the first operation In_Progress while Argo CD runs the sync.
    const [first] = await operationsOf(uid);
    await takeOperation(first!.id);
    await fixture.db
      .updateTable('sync_operation')
      .set({ requested_at: new Date() })
      .where('id', '=', row.id)
      .execute();
    await deleteSyncRun('run-term');
    const operations = await withTerminateOperation(uid);
    assert.equal(operations[1]?.resource_id, row.id);
    assert.equal((await getSyncOperation(fixture.db, row.id))?.desired_state, 'Terminated');
    // The agent terminates it in Argo CD and records the outcome.
    await setSyncOperationOutcome(fixture.db, row.id, 'Terminated', 'terminated');
    await takeOperation(operations[1]!.id);
    await completeOperation(fixture.db, operations[1]!.id);
    await eventually('rows collected', async () => (await rowsOf(uid)).length === 0);
    assert.equal(await getSyncOperation(fixture.db, row.id), undefined);
  });

  test('deleting a finished SyncRun only deletes its rows (no operation for Argo CD)', async () => {
    const { uid, row } = await manualSyncRun('manual-done', 'run-done');
    await setSyncOperationOutcome(fixture.db, row.id, 'Succeeded', 'ok');
    await deleteSyncRun('run-done');
    await eventually('rows deleted', async () => (await getSyncOperation(fixture.db, row.id)) === undefined);
    assert.equal((await operationsOf(uid)).length, 1);
  });

  test('a missing parent is reported and the SyncRun proceeds once it exists; an automated parent is refused', async () => {
    const run = await createSyncRun('run-early', { gitopsDeploymentName: 'later' });
    await eventually('parent missing', async () => {
      const c = await conditionOf('run-early');
      return (
        c?.[0]?.message ===
          "Unable to retrieve GitOpsDeployment 'later' referenced by the GitOpsDeploymentSyncRun" &&
        c[0]?.status === 'True' &&
        c[0]?.reason === 'ErrorOccurred'
      );
    });
    assert.equal((await rowsOf(run.metadata.uid as string)).length, 0);
    assert.equal((await statusOf('run-early'))?.phase, 'Pending');
    await fixture.createDeployment(tenant.name, 'later', MANUAL);
    await eventually('sync row', async () => (await rowsOf(run.metadata.uid as string)).length === 1);
    await eventually('resolved', async () => (await conditionOf('run-early'))?.[0]?.status === 'False');

    await fixture.createDeployment(tenant.name, 'auto', { ...MANUAL, type: 'automated' });
    const auto = await createSyncRun('run-auto', { gitopsDeploymentName: 'auto' });
    await eventually('automated refused', async () => {
      const c = await conditionOf('run-auto');
      return (
        c?.[0]?.message ===
        "invalid GitOpsDeploymentSyncRun 'run-auto'. Syncing a GitOpsDeployment with Automated sync policy is not allowed"
      );
    });
    assert.equal((await rowsOf(auto.metadata.uid as string)).length, 0);
  });
});
