import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { getOperation, insertOperation, isAgentListening, upsertEngineInstance } from '@gitops/db';
import { givenListeningAgentSession } from '@gitops/db/testing';
import { clusterIdentity, createMetricsRegistry, createSilentLogger, loadKubeConfig } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { describe, test } from 'vitest';
import { useBackendFixture } from '../testing/backend-fixture.ts';
import { createOperationRelay } from './operation-relay.ts';

describe('outbox relay', () => {
  const f = useBackendFixture();

  /** What a backend commits for a change of a new resource of `engineInstanceId`: one operation. */
  const announce = async (engineInstanceId: string) =>
    (
      await f.db
        .transaction()
        .execute((trx) =>
          insertOperation(trx, { engineInstanceId, resourceType: 'Application', resourceId: randomUUID() }),
        )
    ).operation;
  /** The identity of the test's cluster: the relay writes Operation CRs only for instances on it. */
  const thisCluster = () => clusterIdentity(loadKubeConfig(process.env.KUBECONFIG));
  /** A relay of its own (registry, silent logger), its sweep far away: the test drives it. */
  const newRelay = () =>
    createOperationRelay({
      db: f.db,
      kc: loadKubeConfig(process.env.KUBECONFIG),
      registry: createMetricsRegistry({ defaultMetrics: false }),
      logger: createSilentLogger(),
      sweepIntervalMs: 60_000,
    });

  test('two relays running at once create exactly one Operation CR per operation and mark each delivered', async () => {
    const engine = await upsertEngineInstance(f.db, {
      name: `relay-${randomUUID()}`,
      namespaceName: f.argoCdNamespace,
      namespaceUid: randomUUID(),
      clusterIdentity: await thisCluster(),
    });
    const ids = await f.db.transaction().execute(async (trx) => {
      const created: string[] = [];
      for (let i = 0; i < 60; i++) {
        const { operation } = await insertOperation(trx, {
          engineInstanceId: engine.id,
          resourceType: 'Application',
          resourceId: randomUUID(),
        });
        created.push(operation.id);
      }
      return created;
    });
    const registries = [
      createMetricsRegistry({ defaultMetrics: false }),
      createMetricsRegistry({ defaultMetrics: false }),
    ];
    const kc = loadKubeConfig(process.env.KUBECONFIG);
    const relays = registries.map((registry) =>
      createOperationRelay({
        db: f.db,
        kc,
        registry,
        logger: createSilentLogger(),
        sweepIntervalMs: 60_000,
        batchSize: 7,
      }),
    );
    const delivered = await Promise.all(relays.map((r) => r.drain()));
    assert.equal(delivered[0]! + delivered[1]!, ids.length);

    const rows = await f.db.selectFrom('operation').selectAll().where('id', 'in', ids).execute();
    assert.ok(rows.every((r) => r.delivered_at !== null && r.delivery_attempts === 0));
    const crs = await f.listOperationCrs();
    const names = new Set(crs.map((cr) => cr.metadata.name));
    for (const id of ids) assert.ok(names.has(`operation-${id}`), `Operation CR of ${id}`);
    for (const cr of crs) {
      const id = (cr.spec as { operationID: string }).operationID;
      assert.equal(cr.metadata.name, `operation-${id}`);
    }
    // Exactly once: no relay ever ran into a CR the other one had created.
    let created = 0;
    let alreadyExisted = 0;
    for (const registry of registries) {
      const metric = await registry.getSingleMetric('gitops_relay_operation_crs_total')?.get();
      for (const v of metric?.values ?? []) {
        if (v.labels.result === 'created') created += v.value;
        if (v.labels.result === 'already_existed') alreadyExisted += v.value;
      }
    }
    assert.equal(created, ids.length);
    assert.equal(alreadyExisted, 0);
  });

  test('operations committed while the relay was disabled are delivered once a backend with the relay starts', async () => {
    const tenant = await f.createNamespace();
    const withoutRelay = await f.startBackend({ GITOPS_RELAY_ENABLED: 'false' });
    const cr = await f.createDeployment(tenant.name, 'undelivered', {
      source: { repoURL: 'https://github.com/org/repo', path: 'env/dev' },
      type: 'automated',
    });
    const application = await f.applicationOf(cr);
    const [operation] = await f.operationsOf(application.id);
    assert.ok(operation, 'the application is announced');
    await withoutRelay.deployments.queue.whenIdle();
    // "Killed after the commit, before the CR exists."
    await f.stopBackend(withoutRelay);
    assert.equal(operation.delivered_at, null);
    assert.equal(await f.getOperationCr(operation.id), undefined);

    const withRelay = await f.startBackend();
    const operationCr = await eventually('Operation CR', () => f.getOperationCr(operation.id));
    assert.deepEqual(operationCr.spec, { operationID: operation.id });
    await f.deliveredOperation(operation.id);
    await f.stopBackend(withRelay);
  });

  test('creates no Operation CR while an agent of the engine instance listens, and delivers once it stops', async () => {
    const engine = await upsertEngineInstance(f.db, {
      name: `relay-listening-${randomUUID()}`,
      namespaceName: f.argoCdNamespace,
      namespaceUid: randomUUID(),
      clusterIdentity: await thisCluster(),
    });
    // Plays the agent's LISTEN connection: a session of its own holding the agent-listening lock.
    const agent = await givenListeningAgentSession(f.database.url, engine.id);
    const relay = newRelay();
    let operationId: string;
    try {
      assert.equal(agent.held, true);
      operationId = (await announce(engine.id)).id;
      assert.equal(await relay.drain(), 0, 'the listening agent heard the commit: no CR');
      assert.equal(await f.getOperationCr(operationId), undefined);
    } finally {
      await agent.end();
    }
    // The agent is gone and the operation is still Waiting: the relay delivers it as a CR.
    await eventually('the lock released', async () => !(await isAgentListening(f.db, engine.id)));
    assert.equal(await relay.drain(), 1);
    assert.ok(await f.getOperationCr(operationId));
    await relay.stop();
  });

  test('creates no Operation CR for an engine instance registered from another cluster', async () => {
    // Its Argo CD namespace has the same name as one here: only the cluster identity tells them apart.
    const engine = await upsertEngineInstance(f.db, {
      name: `relay-elsewhere-${randomUUID()}`,
      namespaceName: f.argoCdNamespace,
      namespaceUid: randomUUID(),
      clusterIdentity: `another-cluster-${randomUUID()}`,
    });
    const operation = await announce(engine.id);
    const relay = newRelay();
    assert.equal(await relay.drain(), 0);
    assert.equal(
      await f.getOperationCr(operation.id),
      undefined,
      'its agent hears it through PostgreSQL alone',
    );
    const row = await getOperation(f.db, operation.id);
    assert.ok(row);
    assert.equal(row.delivered_at, null);
    assert.equal(row.state, 'Waiting', 'it waits for its agent');
    await relay.stop();
  });

  test('a failed creation backs off that operation only', async () => {
    const missingNamespace = `missing-${randomUUID().slice(0, 8)}`;
    const engine = await upsertEngineInstance(f.db, {
      name: `relay-missing-${randomUUID()}`,
      namespaceName: missingNamespace,
      namespaceUid: randomUUID(),
      clusterIdentity: await thisCluster(),
    });
    const operation = await announce(engine.id);
    const relay = newRelay();
    // The database's clock, as next_delivery_at is computed with it.
    const { rows: clock } = await sql<{ now: Date }>`select now() as now`.execute(f.db);
    const attemptedAfter = clock[0]!.now;
    await relay.drain();
    const row = await getOperation(f.db, operation.id);
    assert.ok(row);
    assert.equal(row.delivered_at, null);
    assert.equal(row.delivery_attempts, 1);
    // At least the first backoff (1 s, jitter down to 0.8 s) after the attempt; compared with the database's
    // clock before the attempt, not with the time this check happens to run.
    assert.ok(
      row.next_delivery_at.getTime() >= attemptedAfter.getTime() + 800,
      'retry scheduled in the future',
    );
    await relay.stop();
  });

  test('an operation committed while the LISTEN connection is down is delivered after it reconnects', async () => {
    // A long sweep interval: only NOTIFY or the sweep after reconnecting can deliver it.
    const backend = await f.startBackend({ GITOPS_RELAY_SWEEP_INTERVAL: '10m' });
    await sql`select pg_terminate_backend(pid) from pg_stat_activity
              where application_name = 'gitops-backend-listen' and datname = current_database()`.execute(
      f.db,
    );
    const { operation } = await f.db.transaction().execute(async (trx) =>
      insertOperation(trx, {
        engineInstanceId: backend.engineInstance().id,
        resourceType: 'Application',
        resourceId: randomUUID(),
      }),
    );
    await eventually('Operation CR', () => f.getOperationCr(operation.id));
    await f.stopBackend(backend);
  });
});
