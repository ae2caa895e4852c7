/**
 * The cluster-agent's SyncOperation handling against a real PostgreSQL and API server. Rows are written as
 * the backend writes them (one transaction with the operation), Operation CRs as the relay creates them, and
 * the test plays Argo CD (takes `operation`, reports `status.operationState`).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  type ApplicationRow,
  getOperation,
  getSyncOperation,
  insertSyncOperation,
  setSyncOperationDesiredState,
} from '@gitops/db';
import { givenNotDueOperation, givenOperation, givenOwnedOperation } from '@gitops/db/testing';
import { deleteIfExists, type KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import { PENDING_NOTE_AFTER_MS, pendingOperationMessage } from '../operation/operation.processor.ts';
import { useAgentFixture, useAgentWithTenant } from '../testing/agent-fixture.ts';

const kubeTime = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('cluster-agent SyncOperation', () => {
  const f = useAgentFixture({ prefix: 'sync' });
  const started = useAgentWithTenant(f, { OPERATION_SWEEP_INTERVAL: '500ms' });

  const getApp = (name: string) => f.getApplication(name);
  const patchApp = (name: string, body: unknown) => f.patchApplication(name, body);

  /** A manual deployment's application, applied by the agent. */
  async function manualApplication(): Promise<ApplicationRow> {
    const { application, operation } = await f.givenDeployment(
      started.tenant,
      started.tenantNamespace,
      started.engineInstanceId,
    );
    await f.relay(operation);
    await eventually('Application applied', () => getApp(application.name));
    return application;
  }

  /** Once the agent is idle: the sync is not requested, neither on the Application nor in its row. */
  async function assertNotRequested(application: ApplicationRow, syncOperationId: string, why: string) {
    await started.agent.whenIdle();
    assert.equal((await getApp(application.name))?.operation, undefined, why);
    assert.equal((await getSyncOperation(f.db, syncOperationId))?.requested_at, null);
  }

  /** What the backend writes for a SyncRun. */
  async function syncRun(application: ApplicationRow, revision = '') {
    const uid = randomUUID();
    const { syncOperation, operation } = await f.db.transaction().execute(async (trx) => {
      const syncOperation = await insertSyncOperation(trx, {
        clusterUserId: started.tenant.id,
        applicationId: application.id,
        deploymentName: 'd',
        revision,
      });
      const operation = await givenOwnedOperation(trx, {
        tenant: started.tenant,
        engineInstanceId: started.engineInstanceId,
        cr: { uid, name: `run-${uid.slice(0, 8)}`, namespace: started.tenantNamespace },
        row: { kind: 'GitOpsDeploymentSyncRun', syncOperationId: syncOperation.id },
      });
      return { syncOperation, operation };
    });
    await f.relay(operation);
    return { syncOperation, operation, owner: { uid, name: `run-${uid.slice(0, 8)}` } };
  }

  /** Plays Argo CD: takes the requested operation and reports it Running. */
  async function take(name: string) {
    const app = await eventually('sync request', async () => {
      const a = await getApp(name);
      return a?.operation ? a : undefined;
    });
    await patchApp(name, {
      operation: null,
      status: {
        operationState: {
          operation: app.operation,
          phase: 'Running',
          startedAt: kubeTime(),
          finishedAt: null,
        },
      },
    });
    return app as KubeObject & { operation: { sync: { revision: string }; initiatedBy: unknown } };
  }
  const finish = (name: string, phase: string, message = '', extra: Record<string, unknown> = {}) =>
    patchApp(name, { status: { operationState: { phase, message, finishedAt: kubeTime(), ...extra } } });
  /** Deletes an Application; Argo CD's resources finalizer keeps it, with a deletionTimestamp, until `gone`. */
  async function startDeleting(name: string) {
    await deleteIfExists(f.kc, {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      name,
      namespace: f.argoCdNamespace,
    });
    const deleting = await eventually('the Application is being deleted', async () => {
      const app = await getApp(name);
      return app?.metadata.deletionTimestamp ? app : undefined;
    });
    return {
      deleting,
      /** Plays Argo CD finishing the deletion (it removes its finalizer once the resources are pruned). */
      gone: () => patchApp(name, { metadata: { finalizers: null } }),
    };
  }
  /** The Application of `name` once the agent has re-created it (a uid other than `oldUid`). */
  const recreated = (name: string, oldUid: string | undefined) =>
    eventually('the agent re-created the Application', async () => {
      const app = await getApp(name);
      return app && app.metadata.uid !== oldUid && !app.metadata.deletionTimestamp ? app : undefined;
    });
  const outcome = (id: string) =>
    eventually('sync outcome', async () => {
      const row = await getSyncOperation(f.db, id);
      return row?.outcome ? row : undefined;
    });

  it('refreshes, requests the sync once as gitops-service, and completes the operation with the Argo CD result', async () => {
    const application = await manualApplication();
    const { syncOperation, operation } = await syncRun(application, 'v2');
    const app = await take(application.name);
    assert.equal(app.metadata.annotations?.['argocd.argoproj.io/refresh'], 'normal');
    assert.deepEqual(app.operation.initiatedBy, { username: 'gitops-service' });
    assert.equal(app.operation.sync.revision, 'v2');
    assert.equal((await getOperation(f.db, operation.id))?.state, 'In_Progress');
    // While it runs, the row carries what Argo CD reports about this sync (credentials in URLs scrubbed)
    await patchApp(application.name, {
      status: {
        operationState: {
          message: 'fetching https://git:hunter2-secret@git.example/repo.git',
          syncResult: { revision: 'abc123' },
        },
      },
    });
    const running = await eventually('the running sync reported on the row', async () => {
      const r = await getSyncOperation(f.db, syncOperation.id);
      return r?.synced_revision === 'abc123' ? r : undefined;
    });
    assert.equal(running.argocd_phase, 'Running');
    assert.ok(running.started_at);
    assert.equal(running.finished_at, null);
    assert.doesNotMatch(running.argocd_message, /hunter2-secret/);
    assert.match(running.argocd_message, /git\.example\/repo\.git/);
    assert.equal(running.outcome, null);

    await finish(application.name, 'Succeeded', 'successfully synced');
    const row = await outcome(syncOperation.id);
    assert.equal(row.outcome, 'Succeeded');
    assert.equal(row.outcome_message, 'successfully synced');
    assert.equal(row.argocd_phase, 'Succeeded');
    assert.equal(row.synced_revision, 'abc123');
    assert.ok(row.started_at && row.finished_at && row.started_at <= row.finished_at);
    await eventually('operation completed', async () =>
      (await getOperation(f.db, operation.id))?.state === 'Completed' ? true : undefined,
    );
    assert.equal((await getApp(application.name))?.operation, undefined, 'requested exactly once');
  });

  it('runs the syncs of one application one after another, in creation order', async () => {
    const application = await manualApplication();
    const first = await syncRun(application, 'r1');
    const second = await syncRun(application, 'r2');
    assert.equal((await take(application.name)).operation.sync.revision, 'r1');
    // The agent has taken r2's operation and handled it to the end (a fixed pause could end before it did).
    await eventually('the agent took the r2 operation', async () =>
      (await getOperation(f.db, second.operation.id))?.state === 'In_Progress' ? true : undefined,
    );
    await started.agent.whenIdle();
    assert.equal((await getApp(application.name))?.operation, undefined, 'r2 waits while r1 runs');
    assert.equal((await getSyncOperation(f.db, second.syncOperation.id))?.requested_at, null);
    await finish(application.name, 'Failed', 'boom');
    assert.equal((await outcome(first.syncOperation.id)).outcome, 'Failed');
    assert.equal((await take(application.name)).operation.sync.revision, 'r2');
    await finish(application.name, 'Succeeded');
    assert.equal((await outcome(second.syncOperation.id)).outcome, 'Succeeded');
  });

  it('a sync queued behind a running one says so on its operation once it has waited a while', async () => {
    const application = await manualApplication();
    await syncRun(application, 'r1');
    const queued = await syncRun(application, 'r2');
    await take(application.name);
    // Taken at once (In_Progress, no message: most pending operations end within PENDING_NOTE_AFTER_MS)…
    const taken = await eventually('the agent took the r2 operation', async () => {
      const operation = await getOperation(f.db, queued.operation.id);
      return operation?.state === 'In_Progress' ? operation : undefined;
    });
    assert.equal(taken.message, '');
    // …and once it has waited longer, the operation says what for (kubectl gitops operations shows it).
    const noted = await eventually('the r2 operation says why it waits', async () => {
      const operation = await getOperation(f.db, queued.operation.id);
      return operation?.message ? operation : undefined;
    });
    assert.equal(noted.state, 'In_Progress');
    assert.equal(noted.message, pendingOperationMessage('an earlier sync of the application runs'));
    assert.ok(Date.now() - taken.last_attempt_at!.getTime() >= PENDING_NOTE_AFTER_MS);
  });

  it('terminates a running sync (phase Terminating; Argo CD then ends it Failed: Terminated); a queued one ends without touching Argo CD', async () => {
    const application = await manualApplication();
    const running = await syncRun(application, 'r1');
    const queued = await syncRun(application, 'r2');
    await take(application.name);
    await eventually('requested', async () =>
      (await getSyncOperation(f.db, running.syncOperation.id))?.requested_at ? true : undefined,
    );
    for (const s of [queued, running]) {
      const operation = await givenOperation(
        f.db,
        {
          engineInstanceId: started.engineInstanceId,
          resourceType: 'SyncOperation',
          resourceId: s.syncOperation.id,
          ownerUserId: started.tenant.id,
        },
        (trx) => setSyncOperationDesiredState(trx, s.syncOperation.id, 'Terminated'),
      );
      await f.relay(operation);
    }
    assert.equal((await outcome(queued.syncOperation.id)).outcome, 'Terminated');
    await eventually('Terminating', async () => {
      const app = await getApp(application.name);
      return (app?.status as { operationState?: { phase?: string } })?.operationState?.phase === 'Terminating'
        ? app
        : undefined;
    });
    // Argo CD has no phase of its own for a terminated sync: it ends Failed, "Operation terminated"
    await finish(application.name, 'Failed', 'Operation terminated');
    const terminated = await outcome(running.syncOperation.id);
    assert.equal(terminated.outcome, 'Terminated');
    assert.equal(terminated.outcome_message, 'Operation terminated');
    assert.equal(terminated.argocd_phase, 'Failed');
    assert.ok(terminated.finished_at);
    const neverRequested = await getSyncOperation(f.db, queued.syncOperation.id);
    assert.equal(neverRequested?.started_at, null);
    assert.ok(neverRequested?.finished_at, 'ended by the agent, without Argo CD');
    assert.equal((await getApp(application.name))?.operation, undefined, 'r2 was never requested');
  });

  it('never requests a sync on an Application that is being deleted: it asks the one the agent re-creates', async () => {
    const application = await manualApplication();
    const { deleting, gone } = await startDeleting(application.name);
    const { syncOperation } = await syncRun(application, 'v3');
    await assertNotRequested(application, syncOperation.id, 'no sync on the Application being deleted');
    await gone();
    await recreated(application.name, deleting.metadata.uid);
    assert.equal((await take(application.name)).operation.sync.revision, 'v3');
    await finish(application.name, 'Succeeded');
    assert.equal((await outcome(syncOperation.id)).outcome, 'Succeeded');
  });

  it('a sync whose Application is deleted while it runs is not reported from it, and is requested again on the re-created one', async () => {
    const application = await manualApplication();
    const { syncOperation } = await syncRun(application, 'v4');
    const first = await take(application.name);
    await eventually('requested', async () =>
      (await getSyncOperation(f.db, syncOperation.id))?.requested_at ? true : undefined,
    );
    const { gone } = await startDeleting(application.name);
    // Argo CD carries the sync out on the Application being deleted (and then prunes what it synced).
    await finish(application.name, 'Succeeded', 'successfully synced');
    await started.agent.whenIdle();
    const meanwhile = await getSyncOperation(f.db, syncOperation.id);
    assert.equal(meanwhile?.outcome, null, 'the old Application does not report this sync');
    await gone();
    const second = await recreated(application.name, first.metadata.uid);
    const asked = await take(application.name);
    assert.equal(asked.metadata.uid, second.metadata.uid);
    assert.equal(asked.operation.sync.revision, 'v4', 'the sync is requested again on the new Application');
    await finish(application.name, 'Failed', 'boom on the new one');
    const row = await outcome(syncOperation.id);
    assert.equal(row.outcome, 'Failed');
    assert.equal(row.outcome_message, 'boom on the new one');
    assert.equal(row.requested_application_uid, second.metadata.uid);
  });

  it('a sync waits while a change of its Application is still on its way, then syncs the changed Application', async () => {
    const application = await manualApplication();
    // A change of the Application is committed but not applied yet (played: its operation is not due).
    const change = await givenNotDueOperation(f.db, {
      engineInstanceId: started.engineInstanceId,
      resourceType: 'Application',
      resourceId: application.id,
      ownerUserId: started.tenant.id,
    });
    const { syncOperation } = await syncRun(application, 'v5');
    await assertNotRequested(application, syncOperation.id, 'not requested while the change waits');
    // The change becomes due and is applied: then the sync is requested.
    await f.db
      .updateTable('operation')
      .set({ next_attempt_at: new Date() })
      .where('id', '=', change.id)
      .execute();
    await f.relay(change);
    assert.equal((await take(application.name)).operation.sync.revision, 'v5');
    await eventually('the change applied first', async () =>
      (await getOperation(f.db, change.id))?.state === 'Completed' ? true : undefined,
    );
  });
});
