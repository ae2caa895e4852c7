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
      await sql`create table lock_a (id int); create table lock_b (id int)`.execute(own.db);
      await writeFile(
        join(dir, '9999_locks.sql'),
        'LOCK TABLE lock_a IN ACCESS EXCLUSIVE MODE;\nLOCK TABLE lock_b IN ACCESS EXCLUSIVE MODE;\nCREATE TABLE after_locks (id int);\n',
      );
      // A running process holds lock_b; the migration takes lock_a and waits for lock_b; then the process asks
      // for lock_a. PostgreSQL ends the cycle by aborting the waiter whose deadlock check fires first, the
      // migration (it waited first; the process's check is put off).
      await serving.query('begin');
      await serving.query(`set local deadlock_timeout = '30s'`);
      await serving.query('lock table lock_b in access exclusive mode');
      const migrating = migrateToLatest(own.db, { migrationsDir: dir });
      for (let i = 0; ; i++) {
        const { rows } = await serving.query<{ waiting: number }>(
          `select count(*)::int as waiting from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'relation'`,
        );
        if (rows[0]?.waiting === 1) break;
        if (i > 600) throw new Error('the migration never waited for lock_b');
        await sleep(50);
      }
      // Granted only because the migration's transaction was aborted as the deadlock's victim.
      await serving.query('lock table lock_a in access exclusive mode');
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

  test('a .sql file that is not named NNNN_name.sql is an error, not silently skipped', async () => {
    await writeFile(join(scratchDir, 'fix-later.sql'), 'SELECT 1;');
    await assert.rejects(migrateToLatest(testDb.db, { migrationsDir: scratchDir }), /fix-later\.sql/);
    await rm(join(scratchDir, 'fix-later.sql'));
  });
});
