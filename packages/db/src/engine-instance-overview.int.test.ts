/**
 * What operators see of an engine instance (its load and whether its agents are there) and retiring it: the
 * row goes only once nothing refers to it.
 */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import pg from 'pg';
import { describe, test } from 'vitest';
import { AGENT_ACTIVE_LOCK_CLASS } from './active-lock.ts';
import {
  deleteEngineInstanceIfUnused,
  getEngineInstanceByName,
  listEngineInstanceOverviews,
  placeTenant,
} from './engine-instance.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenApplications,
  givenClusterUser,
  givenEngineInstance,
  givenListeningAgentSession,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

const overviewOf = async (name: string) => {
  const [overview] = await listEngineInstanceOverviews(testDb.db, { name });
  assert.ok(overview, `overview of ${name}`);
  return overview;
};

/** Plays an agent process holding (or, as a standby, waiting for) the active-agent lock of the instance. */
async function givenAgentProcess(engineInstanceId: string) {
  const session = new pg.Client({ connectionString: testDb.url });
  await session.connect();
  session.on('error', () => {});
  const held = await session.query<{ held: boolean }>(
    'select pg_try_advisory_lock($1::int, hashtext($2::text)) as held',
    [AGENT_ACTIVE_LOCK_CLASS, engineInstanceId],
  );
  // A standby blocks inside PostgreSQL on the lock (as holdActiveLock does); its query ends with the session.
  if (!held.rows[0]?.held)
    void session
      .query('select pg_advisory_lock($1::int, hashtext($2::text))', [
        AGENT_ACTIVE_LOCK_CLASS,
        engineInstanceId,
      ])
      .catch(() => {});
  return { end: () => session.end().catch(() => {}) };
}

describe('engine instance overview', () => {
  test('counts its tenants and applications, and its agents: the active one, its standby, or one that listens', async () => {
    const instance = await givenEngineInstance(testDb.db, 'overview-a');
    const other = await givenEngineInstance(testDb.db, 'overview-b');
    const tenant = await givenClusterUser(testDb.db);
    await testDb.db.transaction().execute((trx) => placeTenant(trx, tenant.id, instance.name));
    await givenApplications(testDb.db, 2, { clusterUser: tenant, engineInstance: instance });

    let overview = await overviewOf(instance.name);
    assert.deepEqual(
      [overview.tenants, overview.applications, overview.agents, overview.listening],
      [1, 2, 0, false],
    );
    assert.equal(overview.namespace_name, instance.namespace_name);
    assert.equal(overview.cluster_identity, 'test-cluster');

    const listening = await givenListeningAgentSession(testDb.url, instance.id);
    const active = await givenAgentProcess(instance.id);
    const standby = await givenAgentProcess(instance.id);
    try {
      // The standby's lock request reaches PostgreSQL a moment after the call returns.
      overview = await eventually('the active agent and its standby', async () => {
        const current = await overviewOf(instance.name);
        return current.agents === 2 ? current : undefined;
      });
      assert.equal(overview.listening, true);
      const untouched = await overviewOf(other.name);
      assert.deepEqual([untouched.agents, untouched.listening, untouched.tenants], [0, false, 0]);
    } finally {
      await standby.end();
      await active.end();
    }
    // A closed session's locks go when PostgreSQL ends its backend, a moment after the client's end() returns.
    const agentsBecome = (count: number, what: string) =>
      eventually(what, async () => ((await overviewOf(instance.name)).agents === count ? true : undefined));
    await agentsBecome(1, 'a listening session counts as an agent');
    await listening.end();
    await agentsBecome(0, 'no agent once the listening session ended');
    const all = await listEngineInstanceOverviews(testDb.db);
    assert.ok(all.some((o) => o.name === other.name) && all.some((o) => o.name === instance.name));
  });
});

describe('deleting an engine instance', () => {
  test('is refused while a tenant or an application is on it; with nothing left the row goes', async () => {
    const instance = await givenEngineInstance(testDb.db, 'retire-a');
    const tenant = await givenClusterUser(testDb.db);
    await testDb.db.transaction().execute((trx) => placeTenant(trx, tenant.id, instance.name));
    assert.equal(await deleteEngineInstanceIfUnused(testDb.db, instance.name), 'inUse');

    // The tenant leaves (as a move will do), but an application of another tenant is still on the instance.
    await testDb.db
      .updateTable('cluster_user')
      .set({ engine_instance_id: null })
      .where('id', '=', tenant.id)
      .execute();
    const application = await givenApplication(testDb.db, { clusterUser: tenant, engineInstance: instance });
    assert.equal(await deleteEngineInstanceIfUnused(testDb.db, instance.name), 'inUse');
    assert.ok(await getEngineInstanceByName(testDb.db, instance.name));

    await testDb.db.deleteFrom('application').where('id', '=', application.id).execute();
    assert.equal(await deleteEngineInstanceIfUnused(testDb.db, instance.name), 'deleted');
    assert.equal(await getEngineInstanceByName(testDb.db, instance.name), undefined);
    assert.equal(await deleteEngineInstanceIfUnused(testDb.db, instance.name), 'absent');
  });

  test("takes the instance's operation rows with it, and the name can be registered again", async () => {
    const instance = await givenEngineInstance(testDb.db, 'retire-b');
    await testDb.db
      .insertInto('operation')
      .values({ engine_instance_id: instance.id, resource_type: 'Application', resource_id: instance.id })
      .execute();
    assert.equal(await deleteEngineInstanceIfUnused(testDb.db, instance.name), 'deleted');
    const left = await testDb.db
      .selectFrom('operation')
      .select('id')
      .where('engine_instance_id', '=', instance.id)
      .execute();
    assert.deepEqual(left, []);
    const again = await givenEngineInstance(testDb.db, 'retire-b');
    assert.notEqual(again.id, instance.id);
    assert.equal((await overviewOf('retire-b')).tenants, 0);
  });
});
