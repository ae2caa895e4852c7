/**
 * Tier 3a: the API writes the service adds to Argo CD's own, counted for one created deployment and for one
 * change (issue 34's regression guard; the figures under load are the benchmark's, docs/performance.md "On top
 * of Argo CD alone"). Argo CD's states of one sync are played back to back; the states on the way (nothing
 * reported yet, OutOfSync before an automated sync, a sync running, Progressing) are put off by the agent for
 * GITOPS_STATUS_QUEUED_INTERVAL / GITOPS_STATUS_PROGRESS_INTERVAL, here far longer than the test, so none is
 * written to application_state, nor to the GitOpsDeployment, before the settled one whatever the load: a change
 * of the code that adds a write fails here. Every write is seen on a watch (each
 * is a new resourceVersion); the played Argo CD's own writes are known (one per state it reports) and taken
 * off.
 */
import assert from 'node:assert/strict';
import { Label } from '@gitops/api';
import { listen, NOTIFICATION_CHANNELS } from '@gitops/db';
import type { KubeObject } from '@gitops/shared';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type GitOpsDeployment, paths, watchEvents } from '../fixture/kube.ts';
import {
  type DeploymentStatus,
  type PlayedSystem,
  startPlayedArgoCdSystem,
} from '../fixture/played-argo-cd.ts';
import { metricSample } from '../fixture/system.ts';

/**
 * Who wrote what, from the watches: versions of one GitOpsDeployment, of its Application, and its Events; and
 * from the database's NOTIFYs, the agent's application_state writes of that Application (each carries the
 * state to the backend: none should cost it a read, `readBack`).
 */
interface Writes {
  deployment: number;
  application: number;
  events: string[];
  applicationStates?: number;
}

/**
 * The service's own writes among those counted: without the user's one version of the GitOpsDeployment and the
 * `played` Application writes of the test playing Argo CD.
 */
const serviceWrites = (counted: Writes, played: number): Writes => ({
  deployment: counted.deployment - 1,
  application: counted.application - played,
  events: counted.events,
  applicationStates: counted.applicationStates,
});

/**
 * Argo CD's states for one sync of `path` at `revision`, as its application-controller writes them; the first
 * keeps the last sync's `operationState` (`previous`), as Argo CD does until a new one starts.
 */
function argoCdStates(
  path: string,
  revision: string,
  startedAt: string,
  previous?: Record<string, unknown>,
): Record<string, unknown>[] {
  const source = { repoURL: 'https://github.com/org/cost', path, targetRevision: 'HEAD' };
  const comparedTo = { source, destination: {} };
  const operation = { sync: { revision }, initiatedBy: { automated: true } };
  const succeeded = {
    operation,
    phase: 'Succeeded',
    message: 'successfully synced (all tasks run)',
    syncResult: { revision, source, resources: [] },
    startedAt,
    finishedAt: startedAt,
  };
  return [
    {
      sync: { status: 'OutOfSync', revision, comparedTo },
      health: { status: 'Missing' },
      ...(previous ? { operationState: previous } : {}),
    },
    {
      sync: { status: 'OutOfSync', revision, comparedTo },
      health: { status: 'Missing' },
      operationState: { operation, phase: 'Running', message: 'syncing', startedAt },
    },
    {
      sync: { status: 'Synced', revision, comparedTo },
      health: { status: 'Progressing' },
      operationState: succeeded,
    },
    {
      sync: { status: 'Synced', revision, comparedTo },
      health: { status: 'Healthy' },
      operationState: succeeded,
    },
  ];
}

/** What the GitOpsDeployment shows once it mirrors `state`. */
const mirrors = (state: Record<string, unknown>) => (status: DeploymentStatus) => {
  const want = state as { sync: { status: string; revision: string }; health: { status: string } } & {
    operationState?: { phase: string };
  };
  return (
    status.sync?.status === want.sync.status &&
    status.sync?.revision === want.sync.revision &&
    status.health?.status === want.health.status &&
    (status.operationState as { phase?: string } | undefined)?.phase === want.operationState?.phase
  );
};

describe('API writes per created deployment and per change (tier 3a)', () => {
  let f: PlayedSystem;
  let tenant: string;
  const stops: Array<() => void> = [];
  let counting: Writes = { deployment: 0, application: 0, events: [] };
  let gd: GitOpsDeployment | undefined;
  /** The application ids of the application_state NOTIFYs since the count began. */
  let stateWrites: string[] = [];
  /** The application_state rows the backend's status path has read back so far (its notifications carry them). */
  const statusReads = async () =>
    metricSample(await f.system.metrics('backend'), 'gitops_status_application_states_total', {
      source: 'database',
    }) ?? Number.NaN;
  /** What the last `count` saw the backend's status path read, this deployment's and the later one's. */
  let readBack = Number.NaN;

  beforeAll(async () => {
    f = await startPlayedArgoCdSystem({
      env: {
        'cluster-agent': { GITOPS_STATUS_QUEUED_INTERVAL: '10m', GITOPS_STATUS_PROGRESS_INTERVAL: '10m' },
      },
    });
    tenant = await f.given.tenant('cost');
    // Watches from before the create: every version of the deployment named `web`, of Applications (matched to
    // it by its uid once known) and of Events about it.
    const named = (object: KubeObject) => object.metadata.name === 'web';
    const listener = listen(f.system.database.url, [NOTIFICATION_CHANNELS.applicationStateChanged], (n) => {
      stateWrites.push(n.payload);
    });
    await listener.ready;
    stops.push(() => void listener.close());
    stops.push(
      (
        await watchEvents(f.system.kc, paths.gitopsDeployments(tenant), (type, object) => {
          if (named(object) && (type === 'ADDED' || type === 'MODIFIED')) counting.deployment++;
        })
      ).stop,
      (
        await watchEvents(f.system.kc, paths.applications(f.system.argoCdNamespace), (type, object) => {
          if (gd && object.metadata.name === `gitopsdepl-${gd.metadata.uid}` && type !== 'DELETED')
            counting.application++;
        })
      ).stop,
      (
        await watchEvents(f.system.kc, `/api/v1/namespaces/${tenant}/events`, (type, object) => {
          const event = object as KubeObject & { reason?: string; involvedObject?: { name?: string } };
          if (event.involvedObject?.name === 'web' && type !== 'DELETED')
            counting.events.push(event.reason ?? '');
        })
      ).stop,
    );
  });
  afterAll(async () => {
    for (const stop of stops) stop();
    await f?.stop();
  });

  /** Counts what happens from now until `run` is over and a later deployment converged after it. */
  async function count(label: string, run: () => Promise<void>): Promise<Writes> {
    counting = { deployment: 0, application: 0, events: [] };
    stateWrites = [];
    const readsBefore = await statusReads();
    await run();
    // A barrier instead of a sleep: a deployment created after the run, Synced and Healthy, went through the
    // same queues after everything the run caused.
    const later = await f.when.deployed(tenant, `after-${label}`, {
      repoURL: 'https://github.com/org/cost',
      path: 'later',
    });
    const app = await f.expect.application(later);
    const [state] = argoCdStates('later', 'b'.repeat(40), new Date().toISOString()).slice(-1);
    await f.argoCd.reportStatus(app.metadata.name, state!);
    await f.expect.deployment(later).is('the later deployment Synced and Healthy', mirrors(state!));
    readBack = (await statusReads()) - readsBefore;
    const applicationId = gd && (await f.expect.application(gd)).metadata.labels?.[Label.DatabaseId];
    return { ...counting, applicationStates: stateWrites.filter((id) => id === applicationId).length };
  }

  /** Plays Argo CD's states of one sync back to back, until the deployment mirrors the last. */
  async function playSync(deployment: GitOpsDeployment, path: string, revision: string): Promise<number> {
    const app = await f.expect.application(
      deployment,
      (a) => (a.spec as { source?: { path?: string } }).source?.path === path,
    );
    const previous = (app as { status?: { operationState?: Record<string, unknown> } }).status
      ?.operationState;
    const states = argoCdStates(path, revision, new Date().toISOString(), previous);
    for (const state of states) await f.argoCd.reportStatus(app.metadata.name, state);
    await f.expect.deployment(deployment).is(`Argo CD's last state of ${path}`, mirrors(states.at(-1)!));
    return states.length;
  }

  it("a created deployment: its Application written once, its status once (Argo CD's settled state), no Event", async () => {
    let played = 0;
    const created = await count('create', async () => {
      gd = await f.when.deployed(tenant, 'web', { repoURL: 'https://github.com/org/cost', path: 'dev' });
      played = await playSync(gd, 'dev', 'a'.repeat(40));
    });
    // The user's create is one version; the backend's writes are the rest.
    assert.deepEqual(
      serviceWrites(created, played),
      { deployment: 1, application: 1, events: [], applicationStates: 1 },
      "backend writes: one status, of Argo CD's settled state (the engine instance and conditions with it); the agent creates the Application once and writes one application_state, of the settled state",
    );
    // The settled state (this deployment's and the later one's) reached the backend in its notification.
    assert.equal(readBack, 0, 'application_state rows the backend read back');
  });

  it("a change made Synced/Healthy: the Application written once, its status once (Argo CD's settled state), no Event", async () => {
    assert.ok(gd, 'the created deployment of the test before');
    const deployment = gd;
    let played = 0;
    const changed = await count('change', async () => {
      await f.when.edited(deployment, {
        source: { repoURL: 'https://github.com/org/cost', path: 'prod' },
      });
      played = await playSync(deployment, 'prod', 'c'.repeat(40));
    });
    assert.deepEqual(
      serviceWrites(changed, played),
      { deployment: 1, application: 1, events: [], applicationStates: 1 },
      "backend writes: one status, of Argo CD's settled state; the agent applies the new spec once and writes one application_state",
    );
    // The user's edit wakes the status path, which reads the row once (none when the settled state's
    // notification reached it first); the settled states came with their notifications.
    assert.ok(readBack <= 1, `application_state rows the backend read back: ${readBack}, at most 1`);
  });
});
