import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { type AddressInfo, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { afterEach, describe, test } from 'vitest';
import { applicationStateOfNotification, writeApplicationState } from './application-state.repository.ts';
import { engineInstanceChannel, resourceOfInstanceNotification } from './engine-instance-role.repository.ts';
import {
  backendChannels,
  type Listener,
  listen,
  NOTIFICATION_CHANNELS,
  type Notification,
  notify,
} from './notify.ts';
import { getOperation, insertOperation, operationOfNotification } from './operation.repository.ts';
import { completeOperation, retryOperation, startOperation } from './operation-lifecycle.repository.ts';
import {
  markSyncOperationRequested,
  recordSyncProgress,
  setSyncOperationDesiredState,
  setSyncOperationOutcome,
} from './sync-operation.repository.ts';
import { moveTenant } from './tenant-move.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenSyncOperation,
  givenTenantApplication,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

/** Collects notifications; `next(predicate)` resolves with the first matching one (generous timeout). */
function collector() {
  const received: Notification[] = [];
  const waiters: { predicate: (n: Notification) => boolean; resolve: (n: Notification) => void }[] = [];
  return {
    received,
    push(notification: Notification) {
      received.push(notification);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(notification)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(notification);
        }
      }
    },
    next(predicate: (n: Notification) => boolean, timeoutMs = 30_000): Promise<Notification> {
      const found = received.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('notification did not arrive')), timeoutMs);
        waiters.push({
          predicate,
          resolve: (n) => {
            clearTimeout(timer);
            resolve(n);
          },
        });
      });
    },
  };
}

const listeners: Listener[] = [];
afterEach(async () => {
  await Promise.all(listeners.splice(0).map((l) => l.close()));
});

function startListening(channels: string[], options: Parameters<typeof listen>[3] = {}) {
  const inbox = collector();
  const listener = listen(testDb.url, channels, (n) => inbox.push(n), { minBackoffMs: 10, ...options });
  listeners.push(listener);
  return { inbox, listener };
}

describe('notify and listen', () => {
  test('a notification sent in a committed transaction arrives; one in a rolled-back transaction never does', async () => {
    const channel = `test_${randomBytes(4).toString('hex')}`;
    const { inbox, listener } = startListening([channel]);
    await listener.ready;
    await assert.rejects(
      testDb.db.transaction().execute(async (trx) => {
        await notify(trx, channel, 'rolled-back');
        throw new Error('abort');
      }),
      /abort/,
    );
    await testDb.db.transaction().execute((trx) => notify(trx, channel, 'committed'));
    // Notifications arrive in commit order, so once 'committed' is here a delivered 'rolled-back' would be too.
    await inbox.next((n) => n.payload === 'committed');
    assert.deepEqual(inbox.received, [{ channel, payload: 'committed' }]);
  });

  test('a notification is delivered only when its transaction commits', async () => {
    const channel = `test_${randomBytes(4).toString('hex')}`;
    const { inbox, listener } = startListening([channel]);
    await listener.ready;
    const trx = await testDb.db.startTransaction().execute();
    await notify(trx, channel, 'pending');
    await testDb.db.transaction().execute((other) => notify(other, channel, 'marker'));
    await inbox.next((n) => n.payload === 'marker');
    assert.deepEqual(
      inbox.received.map((n) => n.payload),
      ['marker'],
      'not delivered before commit',
    );
    await trx.commit().execute();
    await inbox.next((n) => n.payload === 'pending');
  });

  test('after its connection is terminated the listener reconnects, LISTENs again and keeps receiving', async () => {
    const channel = `test_${randomBytes(4).toString('hex')}`;
    const applicationName = `gitops-listen-test-${randomBytes(4).toString('hex')}`;
    const connects: boolean[] = [];
    const { promise: reconnectedOnce, resolve: reconnected } = Promise.withResolvers<void>();
    const errors: Error[] = [];
    const { inbox, listener } = startListening([channel], {
      applicationName,
      onConnected: ({ reconnected: again }) => {
        connects.push(again);
        if (again) reconnected();
      },
      onError: (error) => errors.push(error),
    });
    await listener.ready;
    await testDb.db.transaction().execute((trx) => notify(trx, channel, 'before'));
    await inbox.next((n) => n.payload === 'before');

    const { rows } = await sql<{ terminated: boolean }>`
      select pg_terminate_backend(pid) as terminated from pg_stat_activity
      where application_name = ${applicationName}`.execute(testDb.db);
    assert.deepEqual(
      rows.map((r) => r.terminated),
      [true],
    );
    await reconnectedOnce;
    assert.deepEqual(connects, [false, true]);
    assert.ok(errors.length >= 1, 'the connection loss is reported');

    await testDb.db.transaction().execute((trx) => notify(trx, channel, 'after'));
    await inbox.next((n) => n.payload === 'after');
  });

  test('close() stops the listener for good', async () => {
    const channel = `test_${randomBytes(4).toString('hex')}`;
    const applicationName = `gitops-listen-test-${randomBytes(4).toString('hex')}`;
    const { listener } = startListening([channel], { applicationName });
    await listener.ready;
    await listener.close();
    for (let i = 0; i < 600; i++) {
      const { rows } = await sql<{ count: number }>`
        select count(*) as count from pg_stat_activity where application_name = ${applicationName}`.execute(
        testDb.db,
      );
      if (rows[0]?.count === 0) return;
      await sleep(50);
    }
    assert.fail('the listener connection is still open after close()');
  });

  test('a listener that cannot connect keeps retrying until closed', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const url = new URL(testDb.url);
    url.port = String(closedPort);
    let failures = 0;
    const { promise: retriedTwice, resolve: retried } = Promise.withResolvers<void>();
    const listener = listen(url.toString(), ['test_unreachable'], () => {}, {
      minBackoffMs: 1,
      maxBackoffMs: 20,
      onError: () => {
        if (++failures === 2) retried();
      },
    });
    await retriedTwice;
    await listener.close();
    await assert.rejects(listener.ready, /listener closed/);
  });

  test('notify refuses payloads PostgreSQL would reject', async () => {
    await assert.rejects(
      testDb.db.transaction().execute((trx) => notify(trx, 'test_big', 'x'.repeat(8000))),
      RangeError,
    );
  });
});

describe('notifications sent by the schema triggers', () => {
  test("an operation is announced by ids only: its id to the backend, its resource on its own instance's channel", async () => {
    const instance = await givenEngineInstance(testDb.db);
    const other = await givenEngineInstance(testDb.db);
    const { inbox, listener } = startListening([
      NOTIFICATION_CHANNELS.operationCreated,
      NOTIFICATION_CHANNELS.operationStateChanged,
      engineInstanceChannel(instance.id),
      engineInstanceChannel(other.id),
      (await backendChannels(testDb.db)).operationStateChanged,
    ]);
    await listener.ready;
    const resourceId = randomUUID();
    const { operation } = await testDb.db.transaction().execute((trx) =>
      insertOperation(trx, {
        engineInstanceId: instance.id,
        resourceType: 'AppProject',
        resourceId,
        ownerCr: { kind: 'GitOpsDeployment', namespace: 'tenant-secret-name', name: 'd', uid: randomUUID() },
      }),
    );
    const created = await inbox.next(
      (n) => n.channel === NOTIFICATION_CHANNELS.operationCreated && n.payload === operation.id,
    );
    const forAgent = await inbox.next((n) => n.channel === engineInstanceChannel(instance.id));
    assert.equal(forAgent.payload, `AppProject/${resourceId}`);
    assert.deepEqual(resourceOfInstanceNotification(forAgent.payload), {
      type: 'AppProject',
      id: resourceId,
    });
    // Read through the reader's own role: the row as it is.
    assert.deepEqual(await operationOfNotification(testDb.db, created.payload), operation);

    // Its start (the agent's claim) is not announced (0019); every later change of state is.
    await startOperation(testDb.db, operation.id);
    await retryOperation(testDb.db, operation.id, { retryAfterMs: 0, message: 'cluster unreachable' });
    const retried = await inbox.next(
      (n) => n.channel === NOTIFICATION_CHANNELS.operationStateChanged && n.payload === operation.id,
    );
    assert.equal((await operationOfNotification(testDb.db, retried.payload))?.state, 'Waiting');
    // The backend's own channel has the row itself (no read): only its role can name that channel.
    const backend = (await backendChannels(testDb.db)).operationStateChanged;
    const withRow = await inbox.next((n) => n.channel === backend && n.payload.includes(operation.id));
    assert.equal(JSON.parse(withRow.payload).state, 'Waiting');
    assert.deepEqual(
      await operationOfNotification(testDb.db, withRow.payload),
      await getOperation(testDb.db, operation.id),
    );
    await startOperation(testDb.db, operation.id);
    await completeOperation(testDb.db, operation.id);
    const completed = await inbox.next((n) => n.channel === backend && n.payload.includes('Completed'));
    assert.equal(JSON.parse(completed.payload).id, operation.id);
    const states = inbox.received
      .filter((n) => n.channel === backend)
      .map((n) => (JSON.parse(n.payload) as { state: string }).state);
    assert.deepEqual(states, ['Waiting', 'Completed'], 'no In_Progress announced');
    // Nothing of the owner (a tenant's namespace) in any payload, and nothing on another instance's channel.
    assert.ok(
      inbox.received.every((n) => n.channel === backend || !n.payload.includes('tenant-secret-name')),
    );
    assert.ok(inbox.received.every((n) => n.channel !== engineInstanceChannel(other.id)));
  });

  test('a payload that is neither an operation row nor an id announces no operation', async () => {
    for (const payload of ['', 'not-an-id', '{"id":1}', '{"id":"x"', '[1]', `{"id":"${randomUUID()}"}`]) {
      assert.equal(await operationOfNotification(testDb.db, payload), undefined, payload);
    }
    // An id of no row: nothing either.
    assert.equal(await operationOfNotification(testDb.db, randomUUID()), undefined);
  });

  test("an application_state change reaches the backend's state channel with the state and its instance's name; the id alone when too large or when only the instance changed", async () => {
    const channel = (await backendChannels(testDb.db)).applicationStateChanged;
    const { inbox, listener } = startListening([channel, NOTIFICATION_CHANNELS.applicationStateChanged]);
    await listener.ready;
    const engineInstance = await givenEngineInstance(testDb.db);
    const clusterUser = await givenClusterUser(testDb.db, { placedOn: engineInstance });
    const application = await givenApplication(testDb.db, { clusterUser, engineInstance });
    const onChannel = (id: string) => (n: Notification) =>
      n.channel === channel && applicationStateOfNotification(n.payload)?.applicationId === id;

    const state = { health: { status: 'Healthy' }, sync: { status: 'Synced', revision: 'abc' } };
    await writeApplicationState(testDb.db, application.id, state);
    const carried = await inbox.next(onChannel(application.id));
    assert.deepEqual(applicationStateOfNotification(carried.payload), {
      applicationId: application.id,
      carried: { state, engine_instance_name: engineInstance.name },
    });
    // The public channel still has the id (a backend of the previous version reads the row back).
    await inbox.next((n) => n.channel === NOTIFICATION_CHANNELS.applicationStateChanged);

    // A state too large for a payload: the id alone, the backend reads the row.
    inbox.received.length = 0;
    const large = { ...state, health: { status: 'Degraded', message: 'x'.repeat(8000) } };
    await writeApplicationState(testDb.db, application.id, large);
    const announced = await inbox.next(onChannel(application.id));
    assert.deepEqual(applicationStateOfNotification(announced.payload), { applicationId: application.id });

    // The tenant moves: the state is the same, the instance shown changed; the id alone on both channels.
    inbox.received.length = 0;
    const to = await givenEngineInstance(testDb.db);
    await testDb.db.transaction().execute((trx) => moveTenant(trx, clusterUser.id, to.id));
    const moved = await inbox.next(onChannel(application.id));
    assert.deepEqual(applicationStateOfNotification(moved.payload), { applicationId: application.id });
    await inbox.next(
      (n) => n.channel === NOTIFICATION_CHANNELS.applicationStateChanged && n.payload === application.id,
    );
  });

  test('a payload that is neither an application id nor a state change announces no application_state change', () => {
    const id = randomUUID();
    assert.deepEqual(applicationStateOfNotification(id), { applicationId: id });
    for (const payload of ['', 'x', '{', '[1]', 'null', '{"application_id":1}', '{"application_id":"x"}']) {
      assert.equal(applicationStateOfNotification(payload), undefined, payload);
    }
    // A state without its instance's name is not carried: the row is read.
    assert.deepEqual(applicationStateOfNotification(JSON.stringify({ application_id: id, state: {} })), {
      applicationId: id,
    });
  });

  test('application_state notifies when the projection changes, not when an identical one is written', async () => {
    const { inbox, listener } = startListening([NOTIFICATION_CHANNELS.applicationStateChanged]);
    await listener.ready;
    const { clusterUser, engineInstance, application: unchanged } = await givenTenantApplication(testDb.db);
    const changed = await givenApplication(testDb.db, { clusterUser, engineInstance });
    const state = { health: { status: 'Healthy' }, sync: { status: 'Synced', revision: 'abc' } };

    assert.equal(await writeApplicationState(testDb.db, unchanged.id, state), 'changed');
    await inbox.next((n) => n.payload === unchanged.id);
    inbox.received.length = 0;

    // Same content with another key order: jsonb equality, so no write and no notification.
    const reordered = { sync: { revision: 'abc', status: 'Synced' }, health: { status: 'Healthy' } };
    assert.equal(await writeApplicationState(testDb.db, unchanged.id, reordered), 'unchanged');
    assert.equal(await writeApplicationState(testDb.db, changed.id, state), 'changed');
    await inbox.next((n) => n.payload === changed.id);
    assert.deepEqual(
      inbox.received.map((n) => n.payload),
      [changed.id],
    );
  });

  test('a sync_operation notifies when what its SyncRun shows changes: requested, Argo CD report, outcome', async () => {
    const { inbox, listener } = startListening([NOTIFICATION_CHANNELS.syncOperationChanged]);
    await listener.ready;
    const { clusterUser, application } = await givenTenantApplication(testDb.db);
    const row = await givenSyncOperation(testDb.db, { clusterUser, application });
    const count = () => inbox.received.filter((n) => n.payload === row.id).length;

    await markSyncOperationRequested(testDb.db, row.id, randomUUID());
    await inbox.next((n) => n.payload === row.id);
    const running = {
      argocdPhase: 'Running',
      syncedRevision: 'abc',
      startedAt: new Date('2026-01-01T10:00:00Z'),
      finishedAt: null,
      argocdMessage: 'waiting for completion of hook batch/Job/x',
    };
    await recordSyncProgress(testDb.db, row.id, running);
    await inbox.next((n) => n.payload === row.id && count() === 2);
    // The same report again and a change of desired_state alone (the agent's business) send nothing:
    await recordSyncProgress(testDb.db, row.id, running);
    await setSyncOperationDesiredState(testDb.db, row.id, 'Terminated');
    await setSyncOperationOutcome(testDb.db, row.id, 'Terminated', 'Operation terminated', {
      ...running,
      argocdPhase: 'Failed',
      finishedAt: new Date('2026-01-01T10:00:09Z'),
    });
    // Notifications arrive in commit order: once a later row's arrives, the count is final.
    const later = await givenSyncOperation(testDb.db, { clusterUser, application });
    await markSyncOperationRequested(testDb.db, later.id, randomUUID());
    await inbox.next((n) => n.payload === later.id);
    assert.equal(count(), 3);
    // A finished row keeps its report.
    assert.equal(
      await recordSyncProgress(testDb.db, row.id, { ...running, argocdMessage: 'late' }),
      undefined,
    );
  });
});
