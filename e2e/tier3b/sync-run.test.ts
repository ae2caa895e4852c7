/**
 * Tier 3b, scenario 5: manual GitOpsDeployments and GitOpsDeploymentSyncRuns with a real Argo CD, and what
 * a SyncRun says about its sync (phase, revision, start and finish, Argo CD's message).
 */
import assert from 'node:assert/strict';
import { type GitRepo, manifest } from '@gitops/local-env';
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
import { CONVERGE_MS, gitSource, useRealSystem } from '../fixture/real-argo-cd.ts';

interface OperationState {
  phase?: string;
  message?: string;
  syncResult?: { revision?: string };
  startedAt?: string;
  finishedAt?: string;
}
type Application = ArgoApplication & {
  status?: { history?: { revision?: string; id?: number }[]; operationState?: OperationState };
};

/** A PreSync hook that never completes: a Job, and no job controller or kubelet ever runs it. */
const neverEndingHook = [
  'apiVersion: batch/v1',
  'kind: Job',
  'metadata:',
  '  name: wait-forever',
  '  annotations:',
  '    argocd.argoproj.io/hook: PreSync',
  'spec:',
  '  template:',
  '    spec:',
  '      restartPolicy: Never',
  '      containers:',
  '        - name: wait',
  '          image: registry.invalid/wait:1',
  '',
].join('\n');

describe('tier 3b: manual GitOpsDeployments and SyncRuns with a real Argo CD', () => {
  const f = useRealSystem();
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant('syncrun');
  });

  const application = (gd: GitOpsDeployment) => f.expect.readApplication<Application>(gd);
  /** The user deploys `dev/` of `repo` with a manual policy; Argo CD compares it and syncs nothing: OutOfSync. */
  async function manualDeployment(name: string, repo: GitRepo) {
    const gd = await f.when.deployed(tenant, name, gitSource(repo, 'dev'), { type: 'manual' });
    await f.expect.deployment(gd).is('OutOfSync', (s) => s.sync?.status === 'OutOfSync');
    return gd;
  }
  /** A manual deployment of a PreSync hook that never completes and a ConfigMap `<name>-config` after it. */
  const manualDeploymentWaitingOnHook = async (name: string) =>
    manualDeployment(
      name,
      await f.given.repository(name, {
        'dev/hook.yaml': neverEndingHook,
        'dev/config.yaml': manifest.configMap(`${name}-config`, { a: 'b' }),
      }),
    );
  /** Waits until Argo CD's operation on the deployment's Application is in `phase`. */
  const operationPhase = (gd: GitOpsDeployment, phase: string) =>
    f.expect.application<Application>(gd, (app) => app.status?.operationState?.phase === phase);
  /**
   * The SyncRun reports no error. (Its single ErrorOccurred condition is False from the moment the sync is
   * requested, so it says "no error so far", not "done": the outcome is in the GitOpsDeployment's
   * status.operationState, copied from Argo CD — see syncedTo.)
   */
  const syncRunWithoutError = (name: string) =>
    eventually(
      `SyncRun ${name} without error`,
      async () => {
        const run = await get<SyncRun>(f.system.kc, paths.syncRun(tenant, name));
        const c = run?.status?.conditions?.find((x) => x.type === 'ErrorOccurred');
        if (c?.status === 'True') throw new Error(`SyncRun ${name} failed: ${c.message}`);
        return c?.status === 'False' ? run : undefined;
      },
      CONVERGE_MS,
    );

  const errorOccurred = (status: SyncRunStatus) => status.conditions?.find((c) => c.type === 'ErrorOccurred');

  /** Waits until the GitOpsDeployment shows Argo CD's operation Succeeded at `revision`. */
  const syncedTo = (gd: GitOpsDeployment, revision: string) =>
    f.expect.deployment(gd).is(`a Succeeded sync to ${revision}`, (s) => {
      const state = s.operationState as OperationState | undefined;
      return state?.phase === 'Succeeded' && state.syncResult?.revision === revision;
    });

  it('a manual GitOpsDeployment is OutOfSync/Missing; a SyncRun to a given commit deploys that commit', async () => {
    // Given a repository with two commits
    const repo = await f.given.repository('manual', {
      'dev/config.yaml': manifest.configMap('manual-config', { release: 'first' }),
    });
    const first = await repo.head();
    const second = await repo.commit({
      'dev/config.yaml': manifest.configMap('manual-config', { release: 'second' }),
    });
    // When a manual GitOpsDeployment is created
    const gd = await manualDeployment('manual', repo);
    // Then nothing is deployed: Argo CD reports OutOfSync and Missing
    await f.expect
      .deployment(gd)
      .is('OutOfSync/Missing', (s) => s.sync?.status === 'OutOfSync' && s.health?.status === 'Missing');
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'manual-config'), undefined);

    // When a SyncRun asks for the first commit
    await f.system.createSyncRun(tenant, 'to-first', { gitopsDeploymentName: 'manual', revisionID: first });
    // Then that commit is deployed (not the head of main)
    await syncRunWithoutError('to-first');
    // and the SyncRun itself says the sync finished: Succeeded at that commit, with Argo CD's times and message
    const status = await f.expect.syncRunPhase(tenant, 'to-first', 'Succeeded');
    assert.equal(status.revision, first);
    assert.ok(status.startedAt && status.finishedAt, JSON.stringify(status));
    assert.ok(Date.parse(status.startedAt) <= Date.parse(status.finishedAt), JSON.stringify(status));
    assert.match(status.message ?? '', /successfully synced/);
    assert.equal(errorOccurred(status)?.status, 'False');
    await syncedTo(gd, first);
    const cm = await f.expect.object(tenant, 'ConfigMap', 'manual-config');
    assert.equal(cm.data?.release, 'first');
    const app = await application(gd);
    assert.equal(app?.status?.operationState?.phase, 'Succeeded');
    assert.equal(app?.status?.operationState?.syncResult?.revision, first);
    assert.equal(status.startedAt, app?.status?.operationState?.startedAt);
    assert.equal(status.finishedAt, app?.status?.operationState?.finishedAt);
    // and the GitOpsDeployment still compares against main, whose head differs: OutOfSync
    await f.expect
      .deployment(gd)
      .is(
        'OutOfSync against the head of main',
        (s) => s.sync?.status === 'OutOfSync' && s.sync?.revision === second,
      );
  });

  it('three SyncRuns appear in Argo CD’s history in order', async () => {
    // Given a manual deployment of a repository with three commits
    const repo = await f.given.repository('history', {
      'dev/config.yaml': manifest.configMap('history-config', { step: '1' }),
    });
    const shas = [await repo.head()];
    shas.push(await repo.commit({ 'dev/config.yaml': manifest.configMap('history-config', { step: '2' }) }));
    shas.push(await repo.commit({ 'dev/config.yaml': manifest.configMap('history-config', { step: '3' }) }));
    const gd = await manualDeployment('history', repo);
    // When three SyncRuns are created at once, one per commit
    for (const [i, sha] of shas.entries()) {
      await f.system.createSyncRun(tenant, `history-${i + 1}`, {
        gitopsDeploymentName: 'history',
        revisionID: sha,
      });
    }
    // Then none reports an error, and Argo CD's history lists the three commits in creation order
    for (const i of [1, 2, 3]) await syncRunWithoutError(`history-${i}`);
    // (Argo CD writes its history in a patch of its own next to the operation's result.)
    const app = await eventually(
      'three entries in Argo CD’s history',
      async () => {
        const a = await application(gd);
        return (a?.status?.history?.length ?? 0) >= 3 ? a : undefined;
      },
      CONVERGE_MS,
    ).catch(async (error: unknown) => {
      const a = await application(gd);
      throw new Error(`${String(error)}; history: ${JSON.stringify(a?.status?.history)}`);
    });
    const revisions = (app.status?.history ?? []).map((h) => h.revision);
    assert.deepEqual(revisions.slice(-3), shas);
    // and the last one is what is deployed
    await syncedTo(gd, shas[2] ?? '');
    const cm = await f.expect.object(tenant, 'ConfigMap', 'history-config');
    assert.equal(cm.data?.step, '3');
  });

  it('deleting a SyncRun while its sync waits on a hook terminates the operation: Failed, Operation terminated', async () => {
    // Given a manual deployment whose sync waits on a PreSync hook that never completes
    const gd = await manualDeploymentWaitingOnHook('hook');
    await f.system.createSyncRun(tenant, 'hook-run', { gitopsDeploymentName: 'hook' });
    // (the sync Running, waiting on the hook)
    await operationPhase(gd, 'Running');
    // When the SyncRun is deleted
    await remove(f.system.kc, paths.syncRun(tenant, 'hook-run'));
    // Then Argo CD terminates the operation: it ends Failed with "Operation terminated"
    const app = await operationPhase(gd, 'Failed');
    assert.match(app.status?.operationState?.message ?? '', /Operation terminated/);
    // and the ConfigMap after the hook was never applied
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'hook-config'), undefined);
  });

  it('a sync whose manifest the API server refuses ends Failed, with Argo CD’s message on the SyncRun', async () => {
    // Given a manual deployment of a ConfigMap whose name the API server refuses (no capitals or "_")
    const repo = await f.given.repository('refused', {
      'dev/config.yaml': manifest.configMap('Refused_Name', { a: 'b' }),
    });
    const gd = await manualDeployment('refused', repo);
    // When a SyncRun syncs it
    await f.system.createSyncRun(tenant, 'refused-run', { gitopsDeploymentName: 'refused' });
    // Then the SyncRun ends Failed with Argo CD's own message, and says so in ErrorOccurred
    const status = await f.expect.syncRunPhase(tenant, 'refused-run', 'Failed');
    const app = await application(gd);
    const argo = app?.status?.operationState;
    assert.equal(argo?.phase, 'Failed');
    assert.ok(status.message, JSON.stringify(status));
    assert.equal(status.message, argo?.message);
    assert.match(status.message ?? '', /Refused_Name/);
    assert.equal(status.revision, await repo.head());
    assert.ok(
      status.startedAt && status.finishedAt && Date.parse(status.startedAt) <= Date.parse(status.finishedAt),
    );
    const condition = await eventually(
      'ErrorOccurred True',
      async () => {
        const run = await get<SyncRun>(f.system.kc, paths.syncRun(tenant, 'refused-run'));
        const c = run?.status ? errorOccurred(run.status) : undefined;
        return c?.status === 'True' ? c : undefined;
      },
      CONVERGE_MS,
    );
    assert.equal(condition.message, `the sync ended with phase Failed: ${status.message}`);
  });

  it('spec.terminate stops a sync that hangs on a hook: the SyncRun goes Running, then Terminated, and stays', async () => {
    // Given a manual deployment whose sync waits on a PreSync hook that never completes
    const gd = await manualDeploymentWaitingOnHook('stop');
    await f.system.createSyncRun(tenant, 'stop-run', { gitopsDeploymentName: 'stop' });
    // Then the SyncRun says its sync runs, since when, and what Argo CD waits for
    const running = await f.expect.syncRunPhase(tenant, 'stop-run', 'Running');
    assert.ok(running.startedAt, JSON.stringify(running));
    assert.equal(running.finishedAt, undefined);
    // When the user terminates it
    await mergePatch(f.system.kc, paths.syncRun(tenant, 'stop-run'), { spec: { terminate: true } });
    // Then Argo CD terminates the operation and the SyncRun, still there, says Terminated
    const status = await f.expect.syncRunPhase(tenant, 'stop-run', 'Terminated');
    assert.match(status.message ?? '', /Operation terminated/);
    assert.equal(status.startedAt, running.startedAt);
    assert.ok(status.finishedAt && Date.parse(running.startedAt) <= Date.parse(status.finishedAt));
    const app = await application(gd);
    assert.equal(app?.status?.operationState?.phase, 'Failed');
    assert.match(app?.status?.operationState?.message ?? '', /Operation terminated/);
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'stop-config'), undefined);
    const run = await get<SyncRun>(f.system.kc, paths.syncRun(tenant, 'stop-run'));
    assert.equal(run?.status?.phase, 'Terminated');
  });
});
