import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { describe, test } from 'vitest';
import { getClusterUser } from './cluster-user.repository.ts';
import type { EngineInstanceRow } from './database.ts';
import {
  ensureEngineInstance,
  getEngineInstanceByName,
  getPlacedTenant,
  listEngineInstanceOverviews,
  type Placement,
  placeTenant,
  setEngineInstanceCordoned,
} from './engine-instance.repository.ts';
import { ensureWorkspaceEnvironment } from './managed-environment.repository.ts';
import { isAgentListening } from './operation-relay.repository.ts';
import { moveTenant } from './tenant-move.repository.ts';
import { openTransaction } from './testing/interleaving.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenApplications,
  givenClusterUser,
  givenEngineInstance,
  givenListeningAgentSession,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

const place = (clusterUserId: string, requested?: string): Promise<Placement> =>
  testDb.db.transaction().execute((trx) => placeTenant(trx, clusterUserId, requested));
const placedName = (placement: Placement) => ('placed' in placement ? placement.placed.name : undefined);

// One database for the file: each test cordons what it does not want to be chosen, so earlier tests' instances
// never take its tenants.
async function cordonAllBut(...names: string[]) {
  for (const instance of await listEngineInstanceOverviews(testDb.db)) {
    await setEngineInstanceCordoned(testDb.db, instance.name, !names.includes(instance.name));
  }
}

/** Two new engine instances of these names, the only ones not cordoned. */
async function onlySchedulable(...names: [string, string]): Promise<[EngineInstanceRow, EngineInstanceRow]> {
  const instances: [EngineInstanceRow, EngineInstanceRow] = [
    await givenEngineInstance(testDb.db, names[0]),
    await givenEngineInstance(testDb.db, names[1]),
  ];
  await cordonAllBut(...names);
  return instances;
}

describe('tenant placement', () => {
  test('without a label a new tenant goes to the uncordoned instance with the fewest applications, and stays there', async () => {
    // Empty, but cordoned: never chosen.
    await givenEngineInstance(testDb.db, 'place-a-cordoned');
    const [busy, quiet] = await onlySchedulable('place-a-busy', 'place-a-quiet');
    const other = await givenClusterUser(testDb.db);
    await givenApplications(testDb.db, 2, { clusterUser: other, engineInstance: busy });
    await givenApplication(testDb.db, { clusterUser: other, engineInstance: quiet });

    const tenant = await givenClusterUser(testDb.db);
    assert.equal(placedName(await place(tenant.id)), quiet.name);
    assert.equal((await getClusterUser(testDb.db, tenant.id))?.engine_instance_id, quiet.id);

    // The quiet instance becomes the busiest, is cordoned, and a label names another: the tenant stays.
    await givenApplications(testDb.db, 3, { clusterUser: other, engineInstance: quiet });
    await setEngineInstanceCordoned(testDb.db, quiet.name, true);
    assert.equal(
      placedName(await place(tenant.id, busy.name)),
      quiet.name,
      'placement never changes by itself',
    );
    assert.equal(placedName(await place(tenant.id)), quiet.name);
  });

  test('a label names the instance; an unknown or cordoned one is refused and nothing is placed', async () => {
    const [named, _loaded] = await onlySchedulable('place-b-named', 'place-b-other');
    const other = await givenClusterUser(testDb.db);
    await givenApplications(testDb.db, 3, { clusterUser: other, engineInstance: named });

    const tenant = await givenClusterUser(testDb.db);
    assert.deepEqual(await place(tenant.id, 'place-b-nowhere'), {
      refused: { reason: 'UnknownEngineInstance', instance: 'place-b-nowhere' },
    });
    await setEngineInstanceCordoned(testDb.db, named.name, true);
    assert.deepEqual(await place(tenant.id, named.name), {
      refused: { reason: 'EngineInstanceCordoned', instance: named.name },
    });
    assert.equal((await getClusterUser(testDb.db, tenant.id))?.engine_instance_id, null, 'nothing placed');
    await setEngineInstanceCordoned(testDb.db, named.name, false);
    assert.equal(placedName(await place(tenant.id, named.name)), named.name, 'the label wins over load');
  });

  test('an instance whose agent listens is preferred: one whose agents are away takes no new tenant while another can', async () => {
    const [away, heard] = await onlySchedulable('place-e-away', 'place-e-heard');
    const other = await givenClusterUser(testDb.db);
    // `away` is the less loaded one: only its absent agent keeps the tenant off it.
    await givenApplications(testDb.db, 2, { clusterUser: other, engineInstance: heard });
    const agent = await givenListeningAgentSession(testDb.url, heard.id);
    try {
      const tenant = await givenClusterUser(testDb.db);
      assert.equal(placedName(await place(tenant.id)), heard.name);
    } finally {
      await agent.end();
    }
    // No agent listens anywhere (all restarting, say): load decides again.
    await eventually('the lock released', async () => !(await isAgentListening(testDb.db, heard.id)));
    const later = await givenClusterUser(testDb.db);
    assert.equal(placedName(await place(later.id)), away.name);
  });

  test('with every instance cordoned a new tenant is refused', async () => {
    await givenEngineInstance(testDb.db, 'place-c-only');
    await cordonAllBut();
    const tenant = await givenClusterUser(testDb.db);
    assert.deepEqual(await place(tenant.id), { refused: { reason: 'NoSchedulableEngineInstance' } });
  });

  test('concurrent first reconciles of one tenant place it once', async () => {
    const [a, b] = await onlySchedulable('place-d-a', 'place-d-b');
    const tenant = await givenClusterUser(testDb.db);
    const results = await Promise.all(Array.from({ length: 8 }, () => place(tenant.id)));
    assert.equal(new Set(results.map(placedName)).size, 1);
    const loads = await listEngineInstanceOverviews(testDb.db);
    assert.equal(
      loads.filter((l) => l.name === a.name || l.name === b.name).reduce((n, l) => n + l.tenants, 0),
      1,
    );
  });
});

describe('engine instance registration', () => {
  test('one name is one Argo CD namespace on one cluster: another namespace or cluster under it is refused at start', async () => {
    const name = `register-${Date.now()}`;
    const here = async () => 'cluster-a';
    const first = await ensureEngineInstance(
      testDb.db,
      { name, namespaceName: 'argocd', namespaceUid: 'u1' },
      here,
    );
    assert.equal(first.cluster_identity, 'cluster-a');
    // The same namespace re-created (a new uid): the row follows it.
    const recreated = await ensureEngineInstance(
      testDb.db,
      { name, namespaceName: 'argocd', namespaceUid: 'u2' },
      here,
    );
    assert.equal(recreated.id, first.id);
    assert.equal(recreated.namespace_uid, 'u2');
    await assert.rejects(
      ensureEngineInstance(
        testDb.db,
        { name, namespaceName: 'argocd', namespaceUid: 'u3' },
        async () => 'cluster-b',
      ),
      /registered for Argo CD namespace "argocd" on cluster cluster-a; this process serves namespace "argocd" on cluster cluster-b/,
    );
    await assert.rejects(
      ensureEngineInstance(testDb.db, { name, namespaceName: 'argocd-2', namespaceUid: 'u4' }, here),
      /give this one a name of its own/,
    );
    const row = await getEngineInstanceByName(testDb.db, name);
    assert.equal(row?.namespace_uid, 'u2', 'a refused registration changes nothing');
  });

  test('a placed tenant with its Workspace is read in one statement; an unplaced one, or one a move changes meanwhile, is not', async () => {
    const home = await givenEngineInstance(testDb.db, 'placed-read-home');
    const away = await givenEngineInstance(testDb.db, 'placed-read-away');
    await cordonAllBut(home.name);
    const tenant = await givenClusterUser(testDb.db);
    const read = () => testDb.db.transaction().execute((trx) => getPlacedTenant(trx, tenant.namespace_uid));
    assert.equal(await read(), undefined, 'not placed yet');
    assert.equal(placedName(await place(tenant.id)), home.name);
    assert.equal(await read(), undefined, 'no Workspace environment yet');
    const environment = await ensureWorkspaceEnvironment(testDb.db, {
      id: tenant.id,
      namespaceName: tenant.namespace_name,
    });
    const placed = await read();
    assert.deepEqual(placed?.clusterUser, await getClusterUser(testDb.db, tenant.id));
    assert.deepEqual(placed?.instance, await getEngineInstanceByName(testDb.db, home.name));
    assert.equal(placed?.workspaceEnvironmentId, environment.id);

    // A move holds the tenant row: the read waits for it, then answers undefined (placeTenant's path decides).
    const move = openTransaction(testDb.db, (trx) => moveTenant(trx, tenant.id, away.id));
    await move.ready;
    let readerPid: number | undefined;
    const during = testDb.db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      readerPid = rows[0]?.pid;
      return await getPlacedTenant(trx, tenant.namespace_uid);
    });
    await eventually('the read to wait for the move', async () => {
      if (readerPid === undefined) return undefined;
      const { rows } = await sql<{ wait: string | null }>`
        select wait_event_type as wait from pg_stat_activity where pid = ${readerPid}`.execute(testDb.db);
      return rows[0]?.wait === 'Lock' ? true : undefined;
    });
    move.release();
    await move.done;
    assert.equal(await during, undefined);
    assert.equal((await read())?.instance.name, away.name);
  });
});
