import assert from 'node:assert/strict';
import type { GitOpsDeploymentStatus } from '@gitops/api';
import { writeApplicationState } from '@gitops/db';
import {
  createInformer,
  createMetricsRegistry,
  createSilentLogger,
  HttpMethod,
  jsonEqual,
  type KubeObject,
  kubeRequest,
  kubeTime,
} from '@gitops/shared';
import { eventually, listEvents } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { describe, test } from 'vitest';
import { GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import { type BackendFixture, useStartedBackend } from '../testing/backend-fixture.ts';
import { RESOURCES_LIMIT, RESOURCES_TRUNCATED_CONDITION } from './deployment-status.ts';

const spec = {
  source: { repoURL: 'https://github.com/org/repo', path: 'env/dev', targetRevision: 'main' },
  type: 'automated',
};

const operationState = {
  operation: { sync: { revision: 'abc123' } },
  phase: 'Succeeded',
  message: 'successfully synced (all tasks run)',
  syncResult: { revision: 'abc123', resources: [] },
  startedAt: '2026-01-01T00:00:00Z',
  finishedAt: '2026-01-01T00:00:05Z',
};

/** GitOpsDeployment `name` of `spec` in `namespace` and its application row, once the backend wrote it. */
async function deploymentWithApplication(f: BackendFixture, namespace: string, name: string) {
  const cr = await f.createDeployment(namespace, name, spec);
  const application = await f.applicationOf(cr);
  return { cr, application };
}

describe('status path', () => {
  const { f, backend, tenant } = useStartedBackend();

  const statusWhen = async (
    name: string,
    what: string,
    check: (status: GitOpsDeploymentStatus, o: GitOpsDeploymentObject) => boolean,
  ) =>
    await eventually(what, async () => {
      const object = await f.getDeployment(tenant.name, name);
      return object && check(object.status ?? {}, object) ? object : undefined;
    });

  /** Another writer (not the backend) sets the deployment's health to Degraded. */
  const degradedBySomeoneElse = (name: string) =>
    kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant.name}/gitopsdeployments/${name}/status`,
      body: { status: { health: { status: 'Degraded', message: 'written by someone else' } } },
      contentType: 'application/merge-patch+json',
      query: { fieldManager: 'someone-else' },
    });

  test('the agent’s application_state appears on the GitOpsDeployment, and a dropped Argo CD condition becomes Resolved', async () => {
    const { application } = await deploymentWithApplication(f, tenant.name, 'observed');
    // ErrorOccurred set by the reconciler must survive the status path's writes.
    await f.applyDeployment(tenant.name, 'observed', { ...spec, destination: { environment: 'nope' } });
    await statusWhen('observed', 'ErrorOccurred', (_s, o) =>
      (o.status?.conditions ?? []).some((c) => c.type === 'ErrorOccurred' && c.status === 'True'),
    );

    const resources = [
      {
        group: 'apps',
        version: 'v1',
        kind: 'Deployment',
        namespace: tenant.name,
        name: 'web',
        status: 'OutOfSync',
        health: { status: 'Progressing' },
      },
      {
        group: '',
        version: 'v1',
        kind: 'ConfigMap',
        namespace: tenant.name,
        name: 'config',
        status: 'Synced',
      },
    ];
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'OutOfSync', revision: 'abc123' },
      health: { status: 'Progressing', message: 'waiting for rollout' },
      resources,
      reconciledState: {
        source: { repoURL: spec.source.repoURL, path: 'env/dev', targetRevision: 'main' },
        destination: { name: 'in-cluster', namespace: tenant.name },
      },
      operationState,
      conditions: [
        { type: 'ComparisonError', message: 'rpc error: repository not found' },
        { type: 'SyncError', message: 'one or more objects failed to apply' },
      ],
    });
    const object = await statusWhen('observed', 'status from application_state', (s) => s.sync !== undefined);
    const status = object.status ?? {};
    assert.deepEqual(status.sync, { status: 'OutOfSync', revision: 'abc123' });
    assert.deepEqual(status.health, { status: 'Progressing', message: 'waiting for rollout' });
    assert.equal(
      status.engineInstance,
      backend.engineInstance().name,
      'the tenant sees its Argo CD instance',
    );
    assert.deepEqual(status.resources, resources, 'the resources are copied as they are');
    assert.deepEqual(status.reconciledState, {
      source: { repoURL: spec.source.repoURL, path: 'env/dev', branch: 'main' },
      destination: { name: '', namespace: tenant.name },
    });
    assert.deepEqual(status.operationState, operationState);
    const conditions = object.status?.conditions ?? [];
    const comparison = conditions.find((c) => c.type === 'ComparisonError');
    assert.equal(comparison?.status, 'True');
    assert.equal(comparison?.reason, 'ComparisonError');
    assert.equal(comparison?.message, 'rpc error: repository not found');
    assert.equal(conditions.find((c) => c.type === 'SyncError')?.status, 'True');
    const errorOccurred = conditions.find((c) => c.type === 'ErrorOccurred');
    assert.equal(errorOccurred?.status, 'True', 'the status path leaves ErrorOccurred alone');

    // Argo CD drops ComparisonError and its operation state; health becomes Healthy.
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: 'Healthy' },
      resources: [],
      reconciledState: {
        source: { repoURL: spec.source.repoURL, path: 'env/dev', targetRevision: 'main' },
        destination: { name: 'in-cluster', namespace: tenant.name },
      },
      conditions: [{ type: 'SyncError', message: 'one or more objects failed to apply' }],
    });
    const healed = await statusWhen(
      'observed',
      'Synced',
      (s) => (s.sync as { status?: string }).status === 'Synced',
    );
    const healedStatus = healed.status ?? {};
    assert.deepEqual(healedStatus.health, { status: 'Healthy' });
    assert.equal(healedStatus.operationState, undefined);
    const resolved = (healed.status?.conditions ?? []).find((c) => c.type === 'ComparisonError');
    assert.equal(resolved?.status, 'False');
    assert.equal(resolved?.reason, 'ComparisonErrorResolved');
    assert.equal(resolved?.message, '');
    const syncError = (healed.status?.conditions ?? []).find((c) => c.type === 'SyncError');
    assert.equal(syncError?.status, 'True');
    assert.equal(
      syncError?.lastTransitionTime,
      conditions.find((c) => c.type === 'SyncError')?.lastTransitionTime,
    );
    assert.equal((healed.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred')?.status, 'True');

    // Writing the same projection again changes nothing on the object.
    await backend.status.queue.whenIdle();
    const before = await f.getDeployment(tenant.name, 'observed');
    backend.status.enqueueAll();
    await backend.status.queue.whenIdle();
    const afterward = await f.getDeployment(tenant.name, 'observed');
    assert.equal(afterward?.metadata.resourceVersion, before?.metadata.resourceVersion);
  });

  test('a failed sync is a Warning Event; a sync starting or succeeding is in the status only', async () => {
    const { application } = await deploymentWithApplication(f, tenant.name, 'runs');
    const run = (startedAt: string, phase: string, message: string) => ({
      operation: { sync: { revision: 'abc123' } },
      phase,
      message,
      syncResult: { revision: 'abc123', resources: [] },
      startedAt,
    });
    // Each state reaches the status before the next is written, as Argo CD's come seconds apart.
    for (const operationState of [
      run('2026-01-01T00:00:00Z', 'Running', 'syncing'),
      run('2026-01-01T00:00:00Z', 'Succeeded', 'successfully synced (all tasks run)'),
      run('2026-01-01T00:01:00Z', 'Running', 'syncing'),
      run('2026-01-01T00:01:00Z', 'Failed', 'one or more objects failed to apply'),
    ]) {
      await writeApplicationState(f.db, application.id, { sync: { status: 'Synced' }, operationState });
      await statusWhen('runs', `operationState ${operationState.phase}`, (s) => {
        const state = s.operationState as { phase?: string; startedAt?: string } | undefined;
        return state?.phase === operationState.phase && state.startedAt === operationState.startedAt;
      });
    }
    const syncEvents = await eventually('the SyncFailed Event', async () => {
      const events = await listEvents(f.kc, tenant.name, { name: 'runs' });
      const ofRuns = events.filter((e) => e.reason.startsWith('Sync'));
      return ofRuns.some((e) => e.reason === 'SyncFailed') ? ofRuns : undefined;
    });
    assert.deepEqual(
      syncEvents.map((e) => [e.type, e.reason, e.message]),
      [
        [
          'Warning',
          'SyncFailed',
          'Argo CD sync failed at revision abc123: one or more objects failed to apply',
        ],
      ],
      'the runs that started and the one that succeeded wrote no Event',
    );
  });

  test(`more than ${RESOURCES_LIMIT} resources are truncated and a condition says so`, async () => {
    const { application } = await deploymentWithApplication(f, tenant.name, 'many-resources');
    const resources = Array.from({ length: RESOURCES_LIMIT + 20 }, (_, i) => ({
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      namespace: tenant.name,
      name: `cm-${i}`,
      status: 'Synced',
    }));
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Synced', revision: 'r' },
      resources,
    });
    const object = await statusWhen('many-resources', 'truncated resources', (s) =>
      Array.isArray(s.resources),
    );
    assert.equal(object.status?.resources?.length, RESOURCES_LIMIT);
    const truncated = (object.status?.conditions ?? []).find((c) => c.type === RESOURCES_TRUNCATED_CONDITION);
    assert.equal(truncated?.status, 'True');
    assert.equal(
      truncated?.message,
      `status.resources lists the first ${RESOURCES_LIMIT} of ${RESOURCES_LIMIT + 20} resources`,
    );

    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Synced', revision: 'r' },
      resources: resources.slice(0, 3),
    });
    const fits = await statusWhen(
      'many-resources',
      'list fits again',
      (s) => (s.resources as unknown[]).length === 3,
    );
    const resolved = (fits.status?.conditions ?? []).find((c) => c.type === RESOURCES_TRUNCATED_CONDITION);
    assert.equal(resolved?.status, 'False');
    assert.equal(resolved?.reason, `${RESOURCES_TRUNCATED_CONDITION}Resolved`);
  });

  test('lastProbeTime says when a condition was last written; lastTransitionTime moves only with its status', async () => {
    const { application } = await deploymentWithApplication(f, tenant.name, 'probed');
    const comparisonError = (o: GitOpsDeploymentObject) =>
      (o.status?.conditions ?? []).find((c) => c.type === 'ComparisonError');
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Unknown' },
      conditions: [{ type: 'ComparisonError', message: 'rpc error: repository not found' }],
    });
    const first = comparisonError(
      await statusWhen('probed', 'ComparisonError', (_s, o) => comparisonError(o) !== undefined),
    );
    assert.equal(first?.lastProbeTime, first?.lastTransitionTime);
    // Times are whole seconds: let the clock pass the first write's second before the next verdict.
    await eventually('the next second', () =>
      kubeTime(new Date()) > String(first?.lastProbeTime) ? true : undefined,
    );

    // Argo CD's message changes, the condition stays True: a new verdict, not a transition.
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Unknown' },
      conditions: [{ type: 'ComparisonError', message: 'rpc error: authentication required' }],
    });
    const reworded = comparisonError(
      await statusWhen('probed', 'the new message', (_s, o) =>
        (comparisonError(o)?.message ?? '').includes('authentication'),
      ),
    );
    assert.equal(reworded?.status, 'True');
    assert.equal(reworded?.lastTransitionTime, first?.lastTransitionTime);
    assert.ok(
      String(reworded?.lastProbeTime) > String(first?.lastProbeTime),
      `lastProbeTime ${reworded?.lastProbeTime} moved past ${first?.lastProbeTime}`,
    );

    // Argo CD drops it: the status changes, so both times move.
    await writeApplicationState(f.db, application.id, { sync: { status: 'Synced' } });
    const resolved = comparisonError(
      await statusWhen(
        'probed',
        'ComparisonError resolved',
        (_s, o) => comparisonError(o)?.status === 'False',
      ),
    );
    assert.equal(resolved?.lastTransitionTime, resolved?.lastProbeTime);
    assert.ok(String(resolved?.lastTransitionTime) >= String(reworded?.lastProbeTime));

    // The same verdict again is no write at all (no status write at idle, so no newer lastProbeTime either).
    await backend.status.queue.whenIdle();
    const before = await f.getDeployment(tenant.name, 'probed');
    backend.status.enqueueAll();
    await backend.status.queue.whenIdle();
    assert.equal(
      (await f.getDeployment(tenant.name, 'probed'))?.metadata.resourceVersion,
      before?.metadata.resourceVersion,
    );
  });

  test('a status another writer changes after ours is written back from the projection', async () => {
    const { cr, application } = await deploymentWithApplication(f, tenant.name, 'overwritten');
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: 'Healthy' },
    });
    const ours = await statusWhen('overwritten', 'health from the projection', (s) => s.health !== undefined);
    assert.deepEqual(ours.status?.health, { status: 'Healthy' });
    // Someone else's write right after ours (the status path ignores only the echo of its own).
    await degradedBySomeoneElse(cr.metadata.name);
    const restored = await statusWhen(
      'overwritten',
      'health written back',
      (s, o) =>
        o.metadata.resourceVersion !== ours.metadata.resourceVersion &&
        (s.health as { status?: string } | undefined)?.status === 'Healthy',
    );
    assert.deepEqual(restored.status?.health, { status: 'Healthy' });
  });

  test('the echo of its own status write wakes the status queue no second time; another writer does', async () => {
    /** Reconciles the status queue has run so far. */
    const reconciles = async () => {
      const metric = backend.registry.getSingleMetric('controller_runtime_reconcile_total');
      const values = metric ? (await metric.get()).values : [];
      return values
        .filter((v) => v.labels.controller === backend.status.queue.name)
        .reduce((sum, v) => sum + v.value, 0);
    };
    /** The API server's latest version of the deployment is in the cache, and the queue has nothing to do. */
    const settled = async (object: KubeObject) => {
      await eventually('the latest version in the cache', async () => {
        const live = await f.getDeployment(tenant.name, object.metadata.name);
        const cached = backend.deployments.informer.get(tenant.name, object.metadata.name);
        return live !== undefined && cached?.metadata.resourceVersion === live.metadata.resourceVersion;
      });
      await backend.status.queue.whenIdle();
    };
    const healthIs = (status: string) => (s: GitOpsDeploymentStatus) => s.health?.status === status;
    const { cr, application } = await deploymentWithApplication(f, tenant.name, 'echo');
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: 'Healthy' },
    });
    await settled(await statusWhen('echo', 'health from the projection', healthIs('Healthy')));
    const before = await reconciles();

    // A change of Argo CD's state (a settled one: written at once): one reconcile and one status write, whose
    // echo wakes nothing.
    await writeApplicationState(f.db, application.id, {
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: 'Suspended' },
    });
    const ours = await statusWhen('echo', 'the new health', healthIs('Suspended'));
    await settled(ours);
    assert.equal((await reconciles()) - before, 1);

    // Someone else's status write is a change of the object: it wakes the queue, which writes the health back.
    await degradedBySomeoneElse(cr.metadata.name);
    const restored = await statusWhen(
      'echo',
      'health written back',
      (s, o) => o.metadata.resourceVersion !== ours.metadata.resourceVersion && healthIs('Suspended')(s),
    );
    await settled(restored);
    assert.equal((await reconciles()) - before, 2);
  });

  test('a state the notification carried is shown without reading it back; a large one and one missed while LISTEN was down are read', async () => {
    /** The states the status path used so far, by where it took them. */
    const used = async () => {
      const metric = backend.registry.getSingleMetric('gitops_status_application_states_total');
      const values = metric ? (await metric.get()).values : [];
      const of = (source: string) => values.find((v) => v.labels.source === source)?.value ?? 0;
      return { notification: of('notification'), database: of('database') };
    };
    const healthIs = (status: string) => (s: GitOpsDeploymentStatus) => s.health?.status === status;
    const settled = () => backend.status.queue.whenIdle();
    const { application } = await deploymentWithApplication(f, tenant.name, 'carried');
    const state = (health: string, message?: string) => ({
      sync: { status: 'Synced', revision: 'abc123' },
      health: { status: health, ...(message ? { message } : {}) },
    });
    await writeApplicationState(f.db, application.id, state('Progressing'));
    await statusWhen('carried', 'the first state', healthIs('Progressing'));
    await settled();

    // A change: the state and the instance's name came with the notification.
    let before = await used();
    await writeApplicationState(f.db, application.id, state('Healthy'));
    const shown = await statusWhen('carried', 'the carried state', healthIs('Healthy'));
    assert.equal(shown.status?.engineInstance, backend.engineInstance().name);
    await settled();
    let after = await used();
    assert.deepEqual(
      { notification: after.notification - before.notification, database: after.database - before.database },
      { notification: 1, database: 0 },
    );

    // Too large for a payload: the notification has the id, the row is read back.
    before = after;
    await writeApplicationState(f.db, application.id, state('Degraded', 'x'.repeat(8000)));
    await statusWhen('carried', 'the large state', healthIs('Degraded'));
    await settled();
    after = await used();
    assert.equal(after.notification - before.notification, 0);
    assert.ok(after.database - before.database >= 1, 'the large state was read back');

    // Written while the LISTEN connection is down: its notification is lost, the resync after the reconnect
    // reads every object's row.
    before = after;
    await sql`select pg_terminate_backend(pid) from pg_stat_activity
              where application_name = 'gitops-backend-listen' and datname = current_database()`.execute(
      f.db,
    );
    await writeApplicationState(f.db, application.id, state('Suspended'));
    await statusWhen('carried', 'the state written meanwhile', healthIs('Suspended'));
    after = await used();
    assert.ok(after.database - before.database >= 1, 'read after the reconnect');
  });

  test('a malformed application_state never breaks the status path', async () => {
    const { application } = await deploymentWithApplication(f, tenant.name, 'malformed-state');
    await writeApplicationState(f.db, application.id, {
      sync: 'not an object',
      health: { status: 'Healthy' },
      resources: [42, { kind: 'ConfigMap', name: 'ok' }],
      conditions: [{ message: 'no type' }],
    });
    const object = await statusWhen('malformed-state', 'health', (s) => s.health !== undefined);
    assert.deepEqual(object.status?.health, { status: 'Healthy' });
    assert.deepEqual(object.status?.resources, [{ kind: 'ConfigMap', name: 'ok' }]);
    assert.equal(object.status?.sync, undefined);
  });
});

/**
 * Every status write of deployment `name` in `namespace`, as the health it showed, from a watch started now;
 * `stop` ends it.
 */
async function recordStatusWrites(
  f: BackendFixture,
  namespace: string,
  name: string,
): Promise<{
  writes: string[];
  seen: (resourceVersion: string | undefined) => Promise<void>;
  stop: () => Promise<void>;
}> {
  const writes: string[] = [];
  const informer = createInformer<GitOpsDeploymentObject>({
    kubeConfig: f.kc,
    resource: GitOpsDeploymentCr.resource,
    parse: GitOpsDeploymentCr.parse,
    namespace,
    registry: createMetricsRegistry({ defaultMetrics: false }),
    logger: createSilentLogger(),
  });
  informer.onUpdate((old, object) => {
    const health = object.status?.health?.status;
    const phase = object.status?.operationState?.phase as string | undefined;
    if (object.metadata.name === name && !jsonEqual(old.status ?? {}, object.status ?? {}))
      writes.push([health ?? 'none', phase].filter(Boolean).join('/'));
  });
  informer.start();
  await informer.waitForSync();
  return {
    writes,
    // The informer has seen a written version once it is at least as new as what was read.
    seen: async (resourceVersion) => {
      await eventually('the write seen by the watch', async () =>
        informer.get(namespace, name)?.metadata.resourceVersion === resourceVersion ? true : undefined,
      );
    },
    stop: () => informer.stop(),
  };
}

/** The deployment once its status health is `health` (and, given, its operationState phase `phase`). */
async function deploymentShowing(
  f: BackendFixture,
  namespace: string,
  name: string,
  health: string,
  phase?: string,
): Promise<KubeObject> {
  return eventually(`${health}${phase ? `/${phase}` : ''} on the GitOpsDeployment`, async () => {
    const o = await f.getDeployment(namespace, name);
    const status = o ? (o.status ?? {}) : {};
    return (status.health as { status?: string } | undefined)?.status === health &&
      (phase === undefined || (status.operationState as { phase?: string } | undefined)?.phase === phase)
      ? o
      : undefined;
  });
}

describe('status path: the states Argo CD passes through within the coalescing window', () => {
  // Long enough that the three states below always land inside one window.
  const { f, tenant } = useStartedBackend({ GITOPS_STATUS_COALESCE_WINDOW: '3s' });

  test('three states reported back to back become one status write, of the last', async () => {
    const { application } = await deploymentWithApplication(f, tenant.name, 'coalesced');
    const watch = await recordStatusWrites(f, tenant.name, 'coalesced');
    try {
      for (const [sync, health] of [
        ['OutOfSync', 'Missing'],
        ['Synced', 'Progressing'],
        ['Synced', 'Healthy'],
      ]) {
        await writeApplicationState(f.db, application.id, {
          sync: { status: sync, revision: 'abc123' },
          health: { status: health },
        });
      }
      const object = await deploymentShowing(f, tenant.name, 'coalesced', 'Healthy');
      await watch.seen(object.metadata.resourceVersion);
      assert.deepEqual(watch.writes, ['Healthy']);
    } finally {
      await watch.stop();
    }
  });
});
