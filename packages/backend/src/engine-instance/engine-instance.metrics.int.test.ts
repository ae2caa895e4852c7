import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createDb, failOperation, insertOperation, startOperation } from '@gitops/db';
import { givenEngineInstance, givenListeningAgentSession, useTestDatabase } from '@gitops/db/testing';
import { createLogger, createMetricsRegistry, type Registry } from '@gitops/shared';
import { describe, test } from 'vitest';
import { registerEngineInstanceMetrics } from './engine-instance.registration.ts';

const testDb = useTestDatabase();

const logger = createLogger({ name: 'test', level: 'silent' });

/** The value of one series of the registry's text, or undefined. */
async function sample(registry: Registry, name: string, labels: Record<string, string> = {}) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = (await registry.metrics())
    .split('\n')
    .find((l) =>
      l.startsWith(`${name}{`) || l.startsWith(`${name} `) ? want.every((w) => l.includes(w)) : false,
    );
  return line?.split(' ').at(-1);
}

describe('engine instance metrics read at scrape time', () => {
  test('agent listening, operations per state with the oldest one, database up', async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    registerEngineInstanceMetrics(registry, testDb.db, logger);
    const instance = await givenEngineInstance(testDb.db);
    const name = instance.name;

    assert.equal(
      await sample(registry, 'gitops_engine_instance_agent_listening', { engine_instance: name }),
      '0',
    );
    assert.equal(
      await sample(registry, 'gitops_operations', { engine_instance: name, state: 'Waiting' }),
      '0',
    );
    assert.equal(await sample(registry, 'gitops_database_up'), '1');

    const agent = await givenListeningAgentSession(testDb.url, instance.id);
    assert.ok(agent.held);
    try {
      assert.equal(
        await sample(registry, 'gitops_engine_instance_agent_listening', { engine_instance: name }),
        '1',
      );
    } finally {
      await agent.end();
    }

    const announce = () =>
      testDb.db.transaction().execute((trx) =>
        insertOperation(trx, {
          engineInstanceId: instance.id,
          resourceType: 'Application',
          resourceId: randomUUID(),
        }),
      );
    await announce();
    await announce();
    const failing = (await announce()).operation;
    assert.equal((await startOperation(testDb.db, failing.id)).status, 'started');
    await failOperation(testDb.db, failing.id, 'boom');
    await testDb.db
      .updateTable('operation')
      .set({ created_at: new Date(Date.now() - 600_000) })
      .where('engine_instance_id', '=', instance.id)
      .where('state', '=', 'Waiting')
      .execute();

    assert.equal(
      await sample(registry, 'gitops_operations', { engine_instance: name, state: 'Waiting' }),
      '2',
    );
    assert.equal(
      await sample(registry, 'gitops_operations', { engine_instance: name, state: 'Failed' }),
      '1',
    );
    assert.equal(
      await sample(registry, 'gitops_operations', { engine_instance: name, state: 'In_Progress' }),
      '0',
    );
    const oldest = Number(
      await sample(registry, 'gitops_operations_oldest_seconds', { engine_instance: name, state: 'Waiting' }),
    );
    assert.ok(oldest >= 600 && oldest < 900, `oldest Waiting ${oldest} s`);
  });

  test('a database that does not answer: gitops_database_up is 0', async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    const unreachable = createDb('postgres://gitops@127.0.0.1:1/gitops');
    try {
      registerEngineInstanceMetrics(registry, unreachable, logger);
      assert.equal(await sample(registry, 'gitops_database_up'), '0');
    } finally {
      await unreachable.destroy();
    }
  });
});
