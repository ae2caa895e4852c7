import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { connectionConfig, createDb } from '../connection.ts';
import type { Database } from '../database.ts';
import { migrateToLatest } from '../migrator.ts';

/**
 * Test databases: the test run's global setup (packages/test-support) migrates one template database per
 * run (prepareTemplateDatabase), and every test file clones it (createTestDatabase): `CREATE DATABASE ...
 * TEMPLATE` copies files, which is much faster than migrating each time, and gives each file an isolated
 * database.
 */

const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function quoteDatabaseName(name: string): string {
  if (!DATABASE_NAME.test(name)) {
    throw new Error(`invalid database name ${JSON.stringify(name)} (expected ${DATABASE_NAME})`);
  }
  return `"${name}"`;
}

/** The same server URL pointing at another database. */
export function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

async function withAdminClient<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(connectionConfig(adminUrl, 'gitops-test-admin'));
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * (Re)creates database `templateName` on the server of `adminUrl` (a superuser URL) and migrates it to the
 * latest schema. Run once per test run, before any createTestDatabase(). All its connections are closed
 * on return, as `CREATE DATABASE ... TEMPLATE` requires.
 */
export async function prepareTemplateDatabase(adminUrl: string, templateName: string): Promise<void> {
  const quoted = quoteDatabaseName(templateName);
  await withAdminClient(adminUrl, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${quoted} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${quoted}`);
  });
  const db = createDb(databaseUrl(adminUrl, templateName), { max: 1, applicationName: 'gitops-migrate' });
  try {
    await migrateToLatest(db);
  } finally {
    await db.destroy();
  }
}

/**
 * Drops a database, disconnecting whoever is still connected. No error if it does not exist.
 *
 * First it gives sessions that are already closing a moment to go: pg-pool's `end()` resolves once it has
 * asked its clients to end, before the server has seen them go, and a session the FORCE terminates in that
 * window gets `terminating connection due to administrator command`, which a pool without an 'error'
 * listener (kysely-codegen's, in schema-types.int.test.ts) raises as an uncaught exception in the test run.
 */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const quoted = quoteDatabaseName(name);
  await withAdminClient(adminUrl, async (client) => {
    for (let waited = 0; waited < 2_000; waited += 50) {
      const { rows } = await client.query<{ n: number }>(
        'select count(*)::int as n from pg_stat_activity where datname = $1',
        [name],
      );
      if ((rows[0]?.n ?? 0) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await client.query(`DROP DATABASE IF EXISTS ${quoted} WITH (FORCE)`);
  });
}

/**
 * Creates database `target` as a file-level copy of `source` (`CREATE DATABASE ... TEMPLATE`), which needs
 * `source` free of sessions: one that is still closing (a process just stopped, a pool just ended) is waited
 * for, a little, as in createTestDatabase.
 */
async function copyDatabase(client: pg.Client, source: string, target: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query(
        `CREATE DATABASE ${quoteDatabaseName(target)} TEMPLATE ${quoteDatabaseName(source)}`,
      );
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== OBJECT_IN_USE || attempt >= 20) throw error;
      await sleep(50 * attempt);
    }
  }
}

export interface TestDatabase {
  /** Database name, `gitops_test_<random>`. */
  name: string;
  /** Superuser URL of this database (for extra connections, LISTEN, kysely-codegen). */
  url: string;
  /** The test's pool (a new one after `backup()` and `restore()`: read it when used, do not keep it). */
  readonly db: Kysely<Database>;
  /**
   * A backup of the database as it is now: a file-level copy into a new database (what a base backup holds;
   * roles are the server's, not the database's, so they are neither copied nor restored). Nobody may be
   * connected meanwhile: stop every service first; the test's own pool is closed for the copy and opened
   * again after. Returns the backup's name, for `restore()`.
   */
  backup(): Promise<string>;
  /**
   * Restores `backup`: the database is dropped, whoever is still connected disconnected (`WITH (FORCE)`), and
   * created again as a copy of the backup (which is kept); `db` is a new pool after. Stop the services first.
   */
  restore(backup: string): Promise<void>;
  /** Closes `db` and drops the database (and its backups). Safe to call twice. */
  destroy(): Promise<void>;
}

function requireEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') {
    throw new Error(`${name} is not set: run integration tests through \`pnpm test\` (scripts/test.ts)`);
  }
  return value;
}

/** PostgreSQL error "source database is being accessed by other users". */
const OBJECT_IN_USE = '55006';

/**
 * Clones the migrated template into a fresh database for one test file. Reads `GITOPS_TEST_DATABASE_URL`
 * (superuser URL) and `GITOPS_TEST_TEMPLATE_DATABASE` (template name), both set by the test run's global setup.
 */
export async function createTestDatabase(options: { max?: number } = {}): Promise<TestDatabase> {
  const serverUrl = requireEnv('GITOPS_TEST_DATABASE_URL');
  const template = quoteDatabaseName(requireEnv('GITOPS_TEST_TEMPLATE_DATABASE'));
  const name = `gitops_test_${randomBytes(8).toString('hex')}`;
  await withAdminClient(serverUrl, async (client) => {
    // A clone fails while anyone is connected to the template (e.g. a slow disconnect of the migrator).
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE ${quoteDatabaseName(name)} TEMPLATE ${template}`);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== OBJECT_IN_USE || attempt >= 20) throw error;
        await sleep(50 * attempt);
      }
    }
  });
  const url = databaseUrl(serverUrl, name);
  const connect = () => createDb(url, { max: options.max ?? 5, applicationName: 'gitops-test' });
  let db = connect();
  const backups: string[] = [];
  let destroyed: Promise<void> | undefined;
  return {
    name,
    url,
    get db() {
      return db;
    },
    async backup() {
      const backup = `${name}_backup_${backups.length + 1}`;
      await db.destroy();
      try {
        await withAdminClient(serverUrl, (client) => copyDatabase(client, name, backup));
        backups.push(backup);
      } finally {
        db = connect();
      }
      return backup;
    },
    async restore(backup) {
      if (!backups.includes(backup)) throw new Error(`${backup} is no backup of ${name}`);
      await db.destroy();
      try {
        await withAdminClient(serverUrl, async (client) => {
          await client.query(`DROP DATABASE ${quoteDatabaseName(name)} WITH (FORCE)`);
          await copyDatabase(client, backup, name);
        });
      } finally {
        db = connect();
      }
    },
    destroy() {
      destroyed ??= (async () => {
        await db.destroy();
        await dropDatabase(serverUrl, name);
        for (const backup of backups) await dropDatabase(serverUrl, backup);
      })();
      return destroyed;
    },
  };
}
