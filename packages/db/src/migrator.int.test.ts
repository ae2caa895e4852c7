import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createDb } from './connection.ts';
import type { Database } from './database.ts';
import {
  MIGRATIONS_DIR,
  MigrationFailedError,
  migrateToLatest,
  pendingMigrations,
  waitForMigrations,
} from './migrator.ts';
import { createTestDatabase, databaseUrl, dropDatabase, type TestDatabase } from './testing/test-database.ts';

const serverUrl = () => {
  const url = process.env.GITOPS_TEST_DATABASE_URL;
  if (!url) throw new Error('GITOPS_TEST_DATABASE_URL is not set');
  return url;
};

/** An empty database (not cloned from the migrated template). */
async function createEmptyDatabase(): Promise<string> {
  const name = `gitops_test_empty_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  return name;
}

/** Whether the database has table `name`. */
async function tableExists(db: Kysely<Database>, name: string): Promise<boolean> {
  const { rows } = await sql<{ exists: boolean }>`select to_regclass(${name}) is not null as exists`.execute(
    db,
  );
  return rows[0]?.exists === true;
}

/** Copies every released migration into `dir` (a build with one more of its own is then written beside them). */
async function copyReleasedMigrations(dir: string): Promise<void> {
  for (const file of (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql'))) {
    await copyFile(join(MIGRATIONS_DIR, file), join(dir, file));
  }
}

/** The advisory lock id Kysely's PostgresAdapter takes around migrations (kysely/dist/dialect/postgres). */
const KYSELY_MIGRATION_LOCK_ID = '3853314791062309107';

async function waitForAdvisoryLockWaiters(client: pg.Client, database: string, count: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { rows } = await client.query<{ waiting: number }>(
      `select count(*)::int as waiting from pg_stat_activity
       where datname = $1 and wait_event_type = 'Lock' and wait_event = 'advisory'`,
      [database],
    );
    if (rows[0]?.waiting === count) return;
    await sleep(50);
  }
  throw new Error(`the migrators never both waited on Kysely's migration advisory lock`);
}

describe('migrateToLatest', () => {
  let testDb: TestDatabase;
  let scratchDir: string;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    scratchDir = await mkdtemp(join(tmpdir(), 'gitops-migrations-'));
  });
  afterAll(async () => {
    await testDb?.destroy();
    await rm(scratchDir, { recursive: true, force: true });
  });

  test('two migrators started at once on a fresh database both succeed and the schema is applied once', async () => {
    const name = await createEmptyDatabase();
    const url = databaseUrl(serverUrl(), name);
    const first = createDb(url, { max: 2 });
    const second = createDb(url, { max: 2 });
    // Hold Kysely's migration lock so both migrators are provably waiting for it at the same time.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query(`select pg_advisory_lock(${KYSELY_MIGRATION_LOCK_ID})`);
      const running = Promise.all([migrateToLatest(first), migrateToLatest(second)]);
      await waitForAdvisoryLockWaiters(holder, name, 2);
      await holder.query(`select pg_advisory_unlock(${KYSELY_MIGRATION_LOCK_ID})`);
      const results = await running;
      const applied = results.map((r) => r.applied).sort((a, b) => b.length - a.length);
      // Every released migration, applied by exactly one of the two.
      const released = (await readdir(MIGRATIONS_DIR))
        .filter((f) => f.endsWith('.sql'))
        .sort()
        .map((f) => f.replace(/\.sql$/, ''));
      assert.deepEqual(applied, [released, []], 'exactly one migrator applied the migrations');
      const migrations = await first
        .selectFrom('kysely_migration' as never)
        .selectAll()
        .execute();
      assert.equal(migrations.length, released.length);
      const { rows } = await sql<{ count: number }>`
        select count(*) as count from information_schema.tables
        where table_schema = 'public' and table_name = 'operation'`.execute(first);
      assert.equal(rows[0]?.count, 1);
    } finally {
      await holder.end();
      await first.destroy();
      await second.destroy();
      await dropDatabase(serverUrl(), name);
    }
  });

  test('pendingMigrations lists every migration of a fresh database, and none once migrated', async () => {
    const name = await createEmptyDatabase();
    const db = createDb(databaseUrl(serverUrl(), name), { max: 1 });
    try {
      const released = (await readdir(MIGRATIONS_DIR))
        .filter((f) => f.endsWith('.sql'))
        .sort()
        .map((f) => f.replace(/\.sql$/, ''));
      assert.deepEqual(await pendingMigrations(db), released);
      await migrateToLatest(db);
      assert.deepEqual(await pendingMigrations(db), []);
    } finally {
      await db.destroy();
      await dropDatabase(serverUrl(), name);
    }
  });

  test('waitForMigrations waits until another process migrated, names what is missing when it gives up, and stops when aborted', async () => {
    const name = await createEmptyDatabase();
    const db = createDb(databaseUrl(serverUrl(), name), { max: 2 });
    try {
      await assert.rejects(
        waitForMigrations(db, { timeoutMs: 0 }),
        /the database still lacks migrations 0001_[a-z0-9_]+, .*is the backend running\?/,
      );
      const aborted = new AbortController();
      aborted.abort();
      await assert.rejects(waitForMigrations(db, { timeoutMs: 60_000, signal: aborted.signal }));
      const saidPending: string[][] = [];
      const waiting = waitForMigrations(db, {
        timeoutMs: 60_000,
        onWaiting: (pending) => saidPending.push(pending),
      });
      let done = false;
      void waiting.then(() => {
        done = true;
      });
      await sleep(700);
      assert.equal(done, false, 'it waits while migrations are missing');
      await migrateToLatest(db);
      await waiting;
      assert.equal(saidPending.length, 1, 'the wait is said once');
      assert.ok(saidPending[0]!.length > 0);
    } finally {
      await db.destroy();
      await dropDatabase(serverUrl(), name);
    }
  });

  test('migrating an up-to-date database applies nothing', async () => {
    assert.deepEqual(await migrateToLatest(testDb.db), { applied: [], newer: [] });
  });

  test('a build older than the schema starts against it (a rolling upgrade or a rollback); a different history is refused', async () => {
    // The newer version's build: every released migration plus one more, applied to a fresh database.
    const name = await createEmptyDatabase();
    const db = createDb(databaseUrl(serverUrl(), name), { max: 1 });
    const newerDir = await mkdtemp(join(tmpdir(), 'gitops-migrations-newer-'));
    try {
      await copyReleasedMigrations(newerDir);
      await writeFile(
        join(newerDir, '9998_newer_column.sql'),
        'ALTER TABLE operation ADD COLUMN later int;\n',
      );
      assert.deepEqual(
        (await migrateToLatest(db, { migrationsDir: newerDir })).applied.at(-1),
        '9998_newer_column',
      );
      // This build (without 9998) finds nothing to apply and says which migrations are newer than it.
      assert.deepEqual(await migrateToLatest(db), { applied: [], newer: ['9998_newer_column'] });
      assert.deepEqual(await pendingMigrations(db), []);

      // An unknown migration before one of ours is not a newer version: refused, nothing applied.
      await sql`insert into kysely_migration (name, timestamp) values ('0002_elsewhere', now())`.execute(db);
      await assert.rejects(migrateToLatest(db), (error: unknown) => {
        assert.ok(error instanceof MigrationFailedError);
        assert.match(error.message, /0002_elsewhere.*a different history/);
        return true;
      });
    } finally {
      await db.destroy();
      await dropDatabase(serverUrl(), name);
      await rm(newerDir, { recursive: true, force: true });
    }
  });

  test('a failing migration is rolled back completely and reported by name', async () => {
    // The released migrations (all applied to testDb) followed by a broken one.
    await copyReleasedMigrations(scratchDir);
    await writeFile(join(scratchDir, '9999_broken.sql'), 'CREATE TABLE half_done (id int);\nSELECT 1 / 0;\n');
    const error = await migrateToLatest(testDb.db, { migrationsDir: scratchDir }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof MigrationFailedError);
    assert.equal(error.migrationName, '9999_broken');
    assert.match(error.message, /division by zero/);
    assert.equal(error.transient, false, 'a migration that fails by itself is not tried again');
    assert.equal(await tableExists(testDb.db, 'half_done'), false);
    await rm(join(scratchDir, '9999_broken.sql'));
  });

  test('a migration whose database session is lost (a restart, a cut connection) fails as transient, with nothing applied', async () => {
    await copyReleasedMigrations(scratchDir);
    // The server ends the session running the migration, as a PostgreSQL restart does.
    await writeFile(
      join(scratchDir, '9999_cut.sql'),
      'CREATE TABLE cut_short (id int);\nSELECT pg_terminate_backend(pg_backend_pid());\n',
    );
    const db = createDb(testDb.url, { max: 1 });
    try {
      const error = await migrateToLatest(db, { migrationsDir: scratchDir }).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof MigrationFailedError);
      assert.equal(error.transient, true, `a process starting up tries again (${error.message})`);
      assert.equal(await tableExists(testDb.db, 'cut_short'), false);
    } finally {
      await db.destroy();
      await rm(join(scratchDir, '9999_cut.sql'));
    }
  });

  test('a migration that deadlocks with a process serving on the old schema is tried again and applied', async () => {
    // Its own database: the extra migration must not stay in testDb's history.
    const own = await createTestDatabase();
    const dir = await mkdtemp(join(tmpdir(), 'gitops-migrations-deadlock-'));
    const serving = new pg.Client({ connectionString: own.url });
    await serving.connect();
    try {
      await copyReleasedMigrations(dir);
      // The schema's tables are taken before a migration starts (the next test); a cycle can still close on
      // other locks its statements take, here two advisory locks.
      await writeFile(
        join(dir, '9999_locks.sql'),
        'SELECT pg_advisory_xact_lock(9001);\nSELECT pg_advisory_xact_lock(9002);\nCREATE TABLE after_locks (id int);\n',
      );
      // A running process holds lock 9002; the migration takes 9001 and waits for 9002; then the process asks
      // for 9001. PostgreSQL ends the cycle by aborting the waiter whose deadlock check fires first, the
      // migration (it waited first; the process's check is put off).
      await serving.query('begin');
      await serving.query(`set local deadlock_timeout = '30s'`);
      await serving.query('select pg_advisory_xact_lock(9002)');
      const migrating = migrateToLatest(own.db, { migrationsDir: dir });
      await waitForLockWait(serving, 'advisory', 'the migration never waited for lock 9002');
      // Granted only because the migration's transaction was aborted as the deadlock's victim.
      await serving.query('select pg_advisory_xact_lock(9001)');
      await serving.query('commit');
      const result = await migrating;
      assert.deepEqual(result, { applied: ['9999_locks'], newer: [] });
      assert.equal(await tableExists(own.db, 'after_locks'), true);
    } finally {
      await serving.end();
      await own.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a migration never makes a process serving on the old schema the victim of a deadlock: it takes every table before it starts', async () => {
    const own = await createTestDatabase();
    const dir = await mkdtemp(join(tmpdir(), 'gitops-migrations-serving-'));
    const serving = new pg.Client({ connectionString: own.url });
    await serving.connect();
    try {
      await copyReleasedMigrations(dir);
      await sql`create table lock_a (id int); create table lock_b (id int)`.execute(own.db);
      await writeFile(
        join(dir, '9999_alter.sql'),
        'ALTER TABLE lock_a ADD COLUMN a int;\nALTER TABLE lock_b ADD COLUMN b int;\n',
      );
      // A process serving on the old schema reads lock_b in a transaction, then lock_a, and its deadlock check
      // fires first: were the migration holding lock_a while waiting for lock_b (statement by statement, as
      // its SQL reads), the process would be aborted ("deadlock detected") and its user would see an error.
      await serving.query('begin');
      await serving.query(`set local deadlock_timeout = '50ms'`);
      await serving.query('select * from lock_b');
      const migrating = migrateToLatest(own.db, { migrationsDir: dir });
      // The migration is in its transaction (Kysely's advisory lock); given time to reach its tables, it waits
      // on none of them (so this wait runs out): it holds none while lock_b is busy.
      await waitForLockWait(serving, 'advisory-held', 'the migration never started');
      await waitForLockWait(serving, 'relation', '', 2_000).catch(() => {});
      await serving.query('select * from lock_a');
      await serving.query('commit');
      assert.deepEqual(await migrating, { applied: ['9999_alter'], newer: [] });
      const { rows } = await sql<{ column: string }>`
        select table_name || '.' || column_name as column from information_schema.columns
        where table_name in ('lock_a', 'lock_b') and column_name in ('a', 'b') order by 1`.execute(own.db);
      assert.deepEqual(
        rows.map((r) => r.column),
        ['lock_a.a', 'lock_b.b'],
      );
    } finally {
      await serving.end();
      await own.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a .sql file that is not named NNNN_name.sql is an error, not silently skipped', async () => {
    await writeFile(join(scratchDir, 'fix-later.sql'), 'SELECT 1;');
    await assert.rejects(migrateToLatest(testDb.db, { migrationsDir: scratchDir }), /fix-later\.sql/);
    await rm(join(scratchDir, 'fix-later.sql'));
  });
});

/**
 * Until another session of the database waits for a lock of `kind` (`relation`, `advisory`), or, for
 * `advisory-held`, holds an advisory lock (a migrator in its transaction); throws `message` after `ms`.
 */
async function waitForLockWait(
  client: pg.Client,
  kind: 'relation' | 'advisory' | 'advisory-held',
  message: string,
  ms = 30_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const { rows } = await client.query<{ found: boolean }>(
      // pg_locks, not pg_stat_activity: the latter is read once per transaction, and `client` is in one.
      `select exists (select 1 from pg_locks l
         where l.database = (select oid from pg_database where datname = current_database())
           and l.pid <> pg_backend_pid() and l.locktype = $1 and l.granted = $2) as found`,
      [kind === 'advisory-held' ? 'advisory' : kind, kind === 'advisory-held'],
    );
    if (rows[0]?.found) return;
    if (Date.now() > deadline) throw new Error(message || `no ${kind} lock wait`);
    await sleep(20);
  }
}
