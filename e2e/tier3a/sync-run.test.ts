/**
 * Tier 3a: GitOpsDeploymentSyncRun → one Argo CD sync, with backend and cluster-agent running as separate
 * processes and the test playing Argo CD the way the real one behaves (checked in tier 3b): it sees the
 * Application's `operation` and starts it (reports `status.operationState` Running with a copy of the
 * operation, and keeps `operation` while it runs), then finishes it (final phase, and `operation` cleared).
 */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import {
  type ArgoApplication,
  type GitOpsDeployment,
  get,
  mergePatch,
  paths,
  remove,
  type SyncRun,
  type SyncRunStatus,
} from '../fixture/kube.ts';
import { exampleSource, usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

/** The backend's SyncRun controller (its work queue's name in /metrics). */
const SYNC_RUN_CONTROLLER = 'gitopsdeploymentsyncrun';

/** RFC 3339 in whole seconds, as Argo CD writes metav1.Time. */
const kubeTime = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('GitOpsDeploymentSyncRun (tier 3a)', () => {
  const f = usePlayedArgoCdSystem();
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant();
  });

  const manualDeployment = (name: string, type: 'manual' | 'automated' = 'manual') =>
    f.when.deployed(tenant, name, exampleSource('environments/dev', 'main'), { type });
  const appPath = (gd: GitOpsDeployment) =>
    paths.application(f.system.argoCdNamespace, `gitopsdepl-${gd.metadata.uid}`);
  const application = (gd: GitOpsDeployment) => get<ArgoApplication>(f.system.kc, appPath(gd));

  /** Waits for a sync request on the Application and starts it, as Argo CD does: operation → operationState. */
  async function takeOperation(gd: GitOpsDeployment) {
    const app = await eventually(`a sync request on ${gd.metadata.name}`, async () => {
      const a = await application(gd);
      return a?.operation ? a : undefined;
    });
    const operation = app.operation as Record<string, unknown>;
    await mergePatch(f.system.kc, appPath(gd), {
      status: {
        operationState: {
          operation,
          phase: 'Running',
          message: 'one or more tasks are running',
          startedAt: kubeTime(),
          finishedAt: null,
        },
      },
    });
    return operation;
  }
  async function finishOperation(gd: GitOpsDeployment, phase: string, message = 'successfully synced') {
    await mergePatch(f.system.kc, appPath(gd), {
      operation: null,
      status: { operationState: { phase, message, finishedAt: kubeTime() } },
    });
  }
  const revisionOf = (operation: Record<string, unknown>) =>
    (operation.sync as { revision?: string } | undefined)?.revision;

  const errorCondition = (
    ns: string,
    name: string,
    expect: (c: { status: string; reason?: string; message?: string }) => boolean,
  ) =>
    eventually(`ErrorOccurred on SyncRun ${name}`, async () => {
      const run = await get<SyncRun>(f.system.kc, paths.syncRun(ns, name));
      const conditions = run?.status?.conditions ?? [];
      const c = conditions.find((x) => x.type === 'ErrorOccurred');
      return c && expect(c) ? { run: run as SyncRun, conditions } : undefined;
    });
  /**
   * Waits until the backend has handled every SyncRun event so far, before a check that one of them did NOT
   * cause something: a SyncRun created now, of a deployment that does not exist, reports that, so the backend's
   * one watch of SyncRuns has delivered every earlier event (in order); then its SyncRun queue is idle, so a
   * reconcile any of them asked for has run.
   */
  async function backendHandledSyncRunEvents(marker: string) {
    await f.system.createSyncRun(tenant, marker, { gitopsDeploymentName: `${marker}-missing` });
    await errorCondition(tenant, marker, (c) => c.status === 'True');
    await f.system.idle('backend', SYNC_RUN_CONTROLLER);
    await remove(f.system.kc, paths.syncRun(tenant, marker));
  }
  const syncRowsOf = (uid: string) =>
    f.system.db
      .selectFrom('api_cr_mapping')
      .innerJoin('sync_operation', 'sync_operation.id', 'api_cr_mapping.sync_operation_id')
      .selectAll('sync_operation')
      .where('api_cr_mapping.cr_uid', '=', uid)
      .execute();

  it('a SyncRun on a manual deployment requests one sync (refresh first, revision, gitops-service) and succeeds', async () => {
    const gd = await manualDeployment('manual-one');
    await eventually('Application', () => application(gd));
    const run = await f.system.createSyncRun(tenant, 'sync-one', {
      gitopsDeploymentName: 'manual-one',
      revisionID: 'v1.2.3',
    });

    const requested = await eventually('sync request', async () => {
      const a = await application(gd);
      return a?.operation ? a : undefined;
    });
    assert.equal(requested.metadata.annotations?.['argocd.argoproj.io/refresh'], 'normal');
    assert.deepEqual(requested.operation?.initiatedBy, { username: 'gitops-service' });
    assert.equal(revisionOf(requested.operation as Record<string, unknown>), 'v1.2.3');

    await takeOperation(gd);
    await finishOperation(gd, 'Succeeded');
    const { conditions } = await errorCondition(tenant, 'sync-one', (c) => c.status === 'False');
    assert.equal(conditions.length, 1);
    assert.equal(conditions[0]?.reason, '');
    assert.equal(conditions[0]?.message, '');
    // The condition is False from the request on, so it does not mean done: wait for the recorded outcome.
    const rows = await eventually('the sync outcome', async () => {
      const found = await syncRowsOf(run.metadata.uid as string);
      return found.some((row) => row.outcome) ? found : undefined;
    });
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.outcome, 'Succeeded');

    // Updating the SyncRun (a label) never triggers a second sync.
    await mergePatch(f.system.kc, paths.syncRun(tenant, 'sync-one'), {
      metadata: { labels: { touched: 'yes' } },
    });
    await backendHandledSyncRunEvents('sync-one-after-label');
    assert.equal((await application(gd))?.operation, undefined);
    assert.equal((await syncRowsOf(run.metadata.uid as string)).length, 1);
    const syncOperations = await f.system.db
      .selectFrom('operation')
      .select('id')
      .where('owner_uid', '=', run.metadata.uid as string)
      .execute();
    assert.equal(syncOperations.length, 1);
  });

  it("status.health and status.syncStatus are the Application's for this SyncRun's sync: from its start, also after it ended, until a later sync starts", async () => {
    const gd = await manualDeployment('manual-health');
    await eventually('Application', () => application(gd));
    const appName = `gitopsdepl-${gd.metadata.uid}`;
    const statusOf = (name: string, what: string, check: (s: SyncRunStatus) => boolean) =>
      eventually(`SyncRun ${name}: ${what}`, async () => {
        const run = await get<SyncRun>(f.system.kc, paths.syncRun(tenant, name));
        return run?.status && check(run.status) ? run.status : undefined;
      });
    // What Argo CD shows before anything was synced.
    await f.argoCd.reportStatus(appName, { sync: { status: 'OutOfSync' }, health: { status: 'Missing' } });

    await f.system.createSyncRun(tenant, 'health-1', { gitopsDeploymentName: 'manual-health' });
    await eventually('sync request', async () => ((await application(gd))?.operation ? true : undefined));
    const requested = await statusOf('health-1', 'Pending', (s) => s.phase === 'Pending');
    // Not started in Argo CD yet: the Application's state says nothing about this sync.
    assert.equal(requested.health, undefined);
    assert.equal(requested.syncStatus, undefined);

    await takeOperation(gd);
    await f.argoCd.reportStatus(appName, {
      sync: { status: 'OutOfSync' },
      health: { status: 'Progressing' },
    });
    const running = await statusOf(
      'health-1',
      'Running and Progressing',
      (s) => s.phase === 'Running' && s.health === 'Progressing',
    );
    assert.equal(running.syncStatus, 'OutOfSync');

    // Argo CD ends the sync, then compares again and sees the resources become healthy.
    await finishOperation(gd, 'Succeeded');
    await statusOf('health-1', 'Succeeded', (s) => s.phase === 'Succeeded');
    await f.argoCd.reportStatus(appName, { sync: { status: 'Synced' }, health: { status: 'Healthy' } });
    const synced = await statusOf('health-1', 'Healthy', (s) => s.health === 'Healthy');
    assert.deepEqual([synced.phase, synced.syncStatus], ['Succeeded', 'Synced']);

    // A later SyncRun's sync: it shows the Application from then on; the first keeps what it showed.
    await f.system.createSyncRun(tenant, 'health-2', { gitopsDeploymentName: 'manual-health' });
    await takeOperation(gd);
    await f.argoCd.reportStatus(appName, { sync: { status: 'OutOfSync' }, health: { status: 'Degraded' } });
    const second = await statusOf(
      'health-2',
      'Running and Degraded',
      (s) => s.phase === 'Running' && s.health === 'Degraded',
    );
    assert.equal(second.syncStatus, 'OutOfSync');
    // The Application's change woke every SyncRun that shows it at once: health-2 has shown it, so once the
    // backend's SyncRun queue is idle, health-1 has been reconciled after it too.
    await f.system.idle('backend', SYNC_RUN_CONTROLLER);
    const first = (await get<SyncRun>(f.system.kc, paths.syncRun(tenant, 'health-1')))?.status;
    assert.deepEqual([first?.phase, first?.health, first?.syncStatus], ['Succeeded', 'Healthy', 'Synced']);
    await finishOperation(gd, 'Succeeded');
  });

  it('changing revisionID is rejected at admission', async () => {
    await f.system.createSyncRun(tenant, 'immutable', {
      gitopsDeploymentName: 'manual-one',
      revisionID: 'a',
    });
    await assert.rejects(
      mergePatch(f.system.kc, paths.syncRun(tenant, 'immutable'), { spec: { revisionID: 'b' } }),
    );
  });

  it('a failed sync is reported in the SyncRun condition', async () => {
    const gd = await manualDeployment('manual-fail');
    await eventually('Application', () => application(gd));
    await f.system.createSyncRun(tenant, 'sync-fail', { gitopsDeploymentName: 'manual-fail' });
    const operation = await takeOperation(gd);
    assert.equal(revisionOf(operation), 'main', 'without revisionID the targetRevision is synced');
    await finishOperation(gd, 'Failed', 'one or more objects failed to apply');
    const { conditions } = await errorCondition(tenant, 'sync-fail', (c) => c.status === 'True');
    assert.equal(conditions[0]?.reason, 'ErrorOccurred');
    assert.match(conditions[0]?.message ?? '', /Failed.*one or more objects failed to apply/);
  });

  it('three SyncRuns run one after another in creation order', async () => {
    const gd = await manualDeployment('manual-three');
    await eventually('Application', () => application(gd));
    const runs: { metadata: { uid?: string } }[] = [];
    for (const n of [1, 2, 3]) {
      runs.push(
        await f.system.createSyncRun(tenant, `sync-three-${n}`, {
          gitopsDeploymentName: 'manual-three',
          revisionID: `r${n}`,
        }),
      );
    }
    /**
     * Waits until the agent, after this point, has looked at the sync of run `n` and held it back behind an
     * earlier one (its debug line; tier 3a logs at debug): the positive signal before "not requested".
     */
    const heldBack = async (n: number) => {
      const run = runs[n - 1];
      if (!run) return;
      const [row] = await eventually(`the sync row of sync-three-${n}`, async () => {
        const rows = await syncRowsOf(run.metadata.uid as string);
        return rows.length > 0 ? rows : undefined;
      });
      const from = f.system.logs.length;
      await eventually(`the agent holding back the sync of sync-three-${n}`, () =>
        f.system.logs
          .slice(from)
          .some(
            (line) =>
              line.startsWith('[cluster-agent]') &&
              line.includes(`"key":"SyncOperation/${row?.id}"`) &&
              line.includes('an earlier sync of the application runs'),
          )
          ? true
          : undefined,
      );
    };
    for (const n of [1, 2, 3]) {
      const requested = await eventually(`sync request r${n}`, async () => {
        const a = await application(gd);
        return a?.operation ? a : undefined;
      });
      assert.equal(revisionOf(requested.operation as Record<string, unknown>), `r${n}`);
      // The next one is not requested while this one is still waiting or running (checked once the agent
      // has looked at it since).
      await heldBack(n + 1);
      assert.equal(revisionOf((await application(gd))?.operation as Record<string, unknown>), `r${n}`);
      await takeOperation(gd);
      await heldBack(n + 1);
      assert.equal(
        revisionOf((await application(gd))?.operation as Record<string, unknown>),
        `r${n}`,
        'no other request while a sync runs',
      );
      await finishOperation(gd, 'Succeeded');
      await errorCondition(tenant, `sync-three-${n}`, (c) => c.status === 'False');
    }
  });

  it('deleting a SyncRun whose sync runs terminates it; deleting a finished one changes nothing', async () => {
    const gd = await manualDeployment('manual-delete');
    await eventually('Application', () => application(gd));
    const running = await f.system.createSyncRun(tenant, 'sync-running', {
      gitopsDeploymentName: 'manual-delete',
    });
    await takeOperation(gd);
    await eventually('the agent sees the running sync', async () => {
      const rows = await syncRowsOf(running.metadata.uid as string);
      return rows[0]?.requested_at ? rows : undefined;
    });
    await remove(f.system.kc, paths.syncRun(tenant, 'sync-running'));
    await eventually('operationState Terminating', async () => {
      const a = await application(gd);
      const state = a?.status?.operationState as { phase?: string } | undefined;
      return state?.phase === 'Terminating' ? a : undefined;
    });
    await finishOperation(gd, 'Terminated', 'terminated');
    await eventually('the terminated sync rows are collected', async () =>
      (await syncRowsOf(running.metadata.uid as string)).length === 0 ? true : undefined,
    );

    const finished = await f.system.createSyncRun(tenant, 'sync-finished', {
      gitopsDeploymentName: 'manual-delete',
    });
    await takeOperation(gd);
    await finishOperation(gd, 'Succeeded');
    await errorCondition(tenant, 'sync-finished', (c) => c.status === 'False');
    const before = await application(gd);
    await remove(f.system.kc, paths.syncRun(tenant, 'sync-finished'));
    await eventually('the finished sync rows are collected', async () =>
      (await syncRowsOf(finished.metadata.uid as string)).length === 0 ? true : undefined,
    );
    const afterDelete = await application(gd);
    assert.equal(afterDelete?.operation, undefined);
    assert.deepEqual(afterDelete?.status?.operationState, before?.status?.operationState);
  });

  it('a SyncRun for an automated deployment is rejected with the documented error', async () => {
    await manualDeployment('automated-one', 'automated');
    await f.system.createSyncRun(tenant, 'sync-automated', { gitopsDeploymentName: 'automated-one' });
    const { conditions } = await errorCondition(tenant, 'sync-automated', (c) => c.status === 'True');
    assert.equal(conditions[0]?.reason, 'ErrorOccurred');
    assert.equal(
      conditions[0]?.message,
      "invalid GitOpsDeploymentSyncRun 'sync-automated'. Syncing a GitOpsDeployment with Automated sync policy is not allowed",
    );
  });

  it('a SyncRun whose deployment is missing reports it, and proceeds once the deployment exists', async () => {
    await f.system.createSyncRun(tenant, 'sync-early', {
      gitopsDeploymentName: 'late-depl',
      revisionID: 'v9',
    });
    const { conditions } = await errorCondition(tenant, 'sync-early', (c) => c.status === 'True');
    assert.equal(
      conditions[0]?.message,
      "Unable to retrieve GitOpsDeployment 'late-depl' referenced by the GitOpsDeploymentSyncRun",
    );
    const gd = await manualDeployment('late-depl');
    const operation = await takeOperation(gd);
    assert.equal(revisionOf(operation), 'v9');
    await finishOperation(gd, 'Succeeded');
    const resolved = await errorCondition(tenant, 'sync-early', (c) => c.status === 'False');
    assert.equal(resolved.conditions.length, 1);
  });
});
