/**
 * The status path's hold against a real PostgreSQL and API server (the test plays Argo CD, writing the
 * Application's status): the states Argo CD passes through on its way to a settled one are written to
 * application_state only when they last longer than the interval of their stage; the settled one at once.
 * Each write is counted by the NOTIFY it sends the backend.
 */
import assert from 'node:assert/strict';
import {
  type ApplicationRow,
  getApplicationState,
  getOperation,
  listen,
  NOTIFICATION_CHANNELS,
} from '@gitops/db';
import { eventually } from '@gitops/shared/testing';
import { describe, test } from 'vitest';
import { type AgentFixture, useAgentFixture, useAgentWithTenant } from '../testing/agent-fixture.ts';

const operation = { sync: { revision: 'abc123' } };
const running = { operation, phase: 'Running', message: 'syncing', startedAt: '2026-01-01T00:00:00Z' };
const succeeded = { ...running, phase: 'Succeeded', message: 'synced', finishedAt: '2026-01-01T00:00:02Z' };
const status = (sync: string, health: string, operationState?: unknown) => ({
  status: { sync: { status: sync, revision: 'abc123' }, health: { status: health }, operationState },
});
const healthOf = (state: unknown) => (state as { health?: { status?: string } } | undefined)?.health?.status;
const phaseOf = (state: unknown) =>
  (state as { operationState?: { phase?: string } } | undefined)?.operationState?.phase;

/** Each application_state write of `application` from now on, as the health and phase it wrote. */
async function recordWrites(f: AgentFixture, application: ApplicationRow) {
  const writes: string[] = [];
  const reads: Promise<void>[] = [];
  const listener = listen(f.database.url, [NOTIFICATION_CHANNELS.applicationStateChanged], (n) => {
    if (n.payload !== application.id) return;
    reads.push(
      getApplicationState(f.db, application.id).then((row) => {
        writes.push([healthOf(row?.state), phaseOf(row?.state)].filter(Boolean).join('/'));
      }),
    );
  });
  await listener.ready;
  return {
    writes,
    /** Until `count` writes were read. */
    async seen(count: number) {
      await eventually(`${count} application_state writes`, async () => {
        await Promise.all(reads);
        return writes.length >= count ? true : undefined;
      });
    },
    stop: () => listener.close(),
  };
}

function useDeployments(intervals: Record<string, string>) {
  const f = useAgentFixture({ prefix: 'hold' });
  const started = useAgentWithTenant(f, { OPERATION_SWEEP_INTERVAL: '500ms', ...intervals });
  /** A new Application, created by the agent; Argo CD has not looked at it yet (no status). */
  async function deployed(): Promise<ApplicationRow> {
    const { application, operation: created } = await f.givenDeployment(
      started.tenant,
      started.tenantNamespace,
      started.engineInstanceId,
    );
    await eventually(`operation ${created.id} Completed`, async () =>
      (await getOperation(f.db, created.id))?.state === 'Completed' ? true : undefined,
    );
    return application;
  }
  const stateShowing = (application: ApplicationRow, health: string, phase?: string) =>
    eventually(`application_state ${health}/${phase ?? '-'}`, async () => {
      const row = await getApplicationState(f.db, application.id);
      return healthOf(row?.state) === health && phaseOf(row?.state) === phase ? row : undefined;
    });
  /** Plays `states` back to back, Synced/Healthy last: that settled state is the one write `recorded` sees. */
  async function settlesInOneWrite(
    application: ApplicationRow,
    recorded: Awaited<ReturnType<typeof recordWrites>>,
    states: ReturnType<typeof status>[],
  ) {
    for (const state of [...states, status('Synced', 'Healthy', succeeded)]) {
      await f.patchApplication(application.name, state);
    }
    await stateShowing(application, 'Healthy', 'Succeeded');
    await recorded.seen(1);
    assert.deepEqual(recorded.writes, ['Healthy/Succeeded']);
  }
  return { f, deployed, stateShowing, settlesInOneWrite };
}

describe('application_state: the states Argo CD passes through on its way are put off, the settled one written at once', () => {
  // Far longer than the test: no state on the way can be written before the settled one arrives.
  const { f, deployed, stateShowing, settlesInOneWrite } = useDeployments({
    GITOPS_STATUS_QUEUED_INTERVAL: '10m',
    GITOPS_STATUS_PROGRESS_INTERVAL: '10m',
  });

  test("a create's and its sync's states become one write, of the settled one", async () => {
    const application = await deployed();
    const recorded = await recordWrites(f, application);
    try {
      await settlesInOneWrite(application, recorded, [
        status('', 'Unknown'),
        status('OutOfSync', 'Missing', running),
        status('Synced', 'Progressing', succeeded),
      ]);
    } finally {
      await recorded.stop();
    }
  });

  test('a failed sync is settled: written at once', async () => {
    const application = await deployed();
    await f.patchApplication(application.name, status('OutOfSync', 'Missing', running));
    await f.patchApplication(
      application.name,
      status('OutOfSync', 'Missing', { ...running, phase: 'Failed', message: 'one or more objects failed' }),
    );
    await stateShowing(application, 'Missing', 'Failed');
  });
});

describe('application_state: a state on the way that lasts is written when the interval of its stage ends', () => {
  // A create queued in Argo CD waits far longer than the test; a sync's states 1 s.
  const { f, deployed, stateShowing, settlesInOneWrite } = useDeployments({
    GITOPS_STATUS_QUEUED_INTERVAL: '10m',
    GITOPS_STATUS_PROGRESS_INTERVAL: '1s',
  });

  test('a sync still running is written, with nothing after it to wake the status path', async () => {
    const application = await deployed();
    await f.patchApplication(application.name, status('OutOfSync', 'Missing', running));
    await stateShowing(application, 'Missing', 'Running');
  });

  test('a create queued in Argo CD is not written at the progress interval; its sync then starts an interval of its own', async () => {
    const application = await deployed();
    const recorded = await recordWrites(f, application);
    try {
      // Two syncs of other Applications, each written when its 1 s interval ended: the create has waited
      // two progress intervals by then.
      for (let i = 0; i < 2; i++) {
        const other = await deployed();
        await f.patchApplication(other.name, status('OutOfSync', 'Missing', running));
        await stateShowing(other, 'Missing', 'Running');
      }
      assert.deepEqual(recorded.writes, []);
      // Its sync starts and ends within 1 s: one write, of the settled state.
      await settlesInOneWrite(application, recorded, [status('OutOfSync', 'Missing', running)]);
    } finally {
      await recorded.stop();
    }
  });
});

describe('application_state: a create that stays queued in Argo CD is written when the queued interval ends', () => {
  const { deployed, stateShowing } = useDeployments({
    GITOPS_STATUS_QUEUED_INTERVAL: '1s',
    GITOPS_STATUS_PROGRESS_INTERVAL: '10m',
  });

  test('the Application Argo CD has not looked at shows Unknown, with nothing after it to wake the status path', async () => {
    const application = await deployed();
    const row = await stateShowing(application, 'Unknown');
    assert.equal((row.state as { sync?: { status?: string } }).sync?.status, 'Unknown');
  });
});
