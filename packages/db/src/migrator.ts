import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isTransientError } from '@gitops/shared';
import { type Kysely, sql } from 'kysely';
import { type Migration, type MigrationProvider, Migrator } from 'kysely/migration';
import type { Database } from './database.ts';

/** `db/migrations/` at the repository root. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../../db/migrations/', import.meta.url));

const MIGRATION_FILE = /^(\d{4}_[a-z0-9_]+)\.sql$/;

/**
 * Reads `NNNN_name.sql` files from a folder; each becomes a migration named `NNNN_name` whose `up` runs the
 * whole file as one multi-statement query (pg's simple protocol, since it has no parameters). Any other
 * `.sql` file name is an error, so a misnamed file cannot be skipped or applied out of order silently.
 */
export class SqlFileMigrationProvider implements MigrationProvider {
  readonly #dir: string;

  constructor(dir: string = MIGRATIONS_DIR) {
    this.#dir = dir;
  }

  async getMigrations(): Promise<Record<string, Migration>> {
    const files = (await readdir(this.#dir)).filter((file) => file.endsWith('.sql')).sort();
    const migrations: Record<string, Migration> = {};
    for (const file of files) {
      const match = MIGRATION_FILE.exec(file);
      if (!match) {
        throw new Error(`migration file name ${file} does not match NNNN_snake_case_name.sql`);
      }
      const text = await readFile(join(this.#dir, file), 'utf8');
      migrations[match[1]!] = {
        up: async (db) => {
          await lockSchema(db);
          await sql.raw(text).execute(db);
        },
      };
    }
    return migrations;
  }
}

/** How long a migration tries to lock the schema's tables before it fails (transient: tried again). */
const LOCK_SCHEMA_MS = 20_000;

/**
 * Before a migration's statements, every table of the schema (Kysely's own two aside) locked
 * ACCESS EXCLUSIVE in one statement with NOWAIT, tried again under a savepoint until they are all free at once.
 * A migration that waited for one table while holding another could close a wait cycle with a process still
 * serving on the old schema during a rolling upgrade, and PostgreSQL aborts whichever waiter checks first:
 * often the serving process, whose user then reads an error on their object (tier 4's rolling upgrade saw
 * it). Holding everything before its first statement, the migration never waits on a table while holding
 * one, so it closes no cycle: serving processes wait for it (milliseconds) instead of failing. Locking again
 * in the same transaction (the next pending migration) finds the locks already held.
 */
async function lockSchema(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ relation: string }>`
    select format('%I.%I', n.nspname, c.relname) as relation
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = current_schema() and c.relkind in ('r', 'p')
      and c.relname not in ('kysely_migration', 'kysely_migration_lock')
    order by c.relname`.execute(db);
  if (rows.length === 0) return;
  const lock = sql.raw(
    `lock table ${rows.map((row) => row.relation).join(', ')} in access exclusive mode nowait`,
  );
  const deadline = Date.now() + LOCK_SCHEMA_MS;
  for (let attempt = 1; ; attempt++) {
    await sql`savepoint gitops_lock_schema`.execute(db);
    try {
      await lock.execute(db);
      await sql`release savepoint gitops_lock_schema`.execute(db);
      return;
    } catch (error) {
      await sql`rollback to savepoint gitops_lock_schema`.execute(db);
      // 55P03: a table is in use by another session. Anything else is the migration's own failure.
      if ((error as { code?: unknown }).code !== '55P03' || Date.now() >= deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(10 * attempt, 200) * (0.5 + Math.random())));
  }
}

export class MigrationFailedError extends Error {
  readonly migrationName: string | undefined;
  /**
   * The database went away under it (a restart, a cut connection; isTransientError): nothing was applied and
   * the same run succeeds later, so a process starting up tries again instead of exiting. A failure of the
   * migration itself (bad SQL, a conflicting schema) is not.
   */
  readonly transient: boolean;

  constructor(migrationName: string | undefined, cause: unknown) {
    super(`database migration ${migrationName ?? '(setup)'} failed: ${(cause as Error)?.message ?? cause}`, {
      cause,
    });
    this.name = 'MigrationFailedError';
    this.migrationName = migrationName;
    this.transient = isTransientError(cause);
  }
}

/**
 * Applies every pending migration, in name order, in one transaction. Safe when several processes start at
 * once: Kysely's PostgresAdapter serialises migrators with a session advisory lock, and the later ones find
 * nothing pending. Returns the names applied by this call, and `newer`: migrations the database has that
 * this build does not ship. Those come from a newer version during a rolling upgrade (or after a rollback):
 * when every migration of this build is applied and each unknown one sorts after the last of ours, this
 * build runs against the newer schema, as docs/upgrades.md promises (Kysely's own check would refuse to
 * start). Unknown migrations between ours are a different history: an error. A transient failure (a
 * deadlock with a running process, a lost session) is tried again up to MIGRATION_ATTEMPTS times. Throws
 * MigrationFailedError on failure (nothing of the failed run is kept).
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  options: { migrationsDir?: string } = {},
): Promise<{ applied: string[]; newer: string[] }> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrateOnce(db, options);
    } catch (error) {
      // A transient failure applied nothing (one transaction). The common one is a lock lost to a process
      // still serving on the old schema during a rolling upgrade (a deadlock, 40P01): the next try wins it.
      if (!(error instanceof MigrationFailedError) || !error.transient || attempt >= MIGRATION_ATTEMPTS) {
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

/** Tries of a migration that fails transiently, before its error is thrown (the caller may try later). */
const MIGRATION_ATTEMPTS = 4;

async function migrateOnce(
  db: Kysely<Database>,
  options: { migrationsDir?: string },
): Promise<{ applied: string[]; newer: string[] }> {
  const provider = new SqlFileMigrationProvider(options.migrationsDir);
  const newer = await newerMigrations(db, provider);
  if (newer !== undefined) return { applied: [], newer };
  const migrator = new Migrator({ db, provider });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results.find((result) => result.status === 'Error');
    throw new MigrationFailedError(failed?.migrationName, error);
  }
  return { applied: results.filter((r) => r.status === 'Success').map((r) => r.migrationName), newer: [] };
}

/**
 * The database's migrations this build does not know, when there are any and the schema is a newer one
 * (every migration of ours applied, each unknown one after our last); undefined when the database knows
 * nothing we do not. Read without the migration lock: a newer version migrating at this moment is caught
 * by Kysely's check in migrateToLatest: that start fails, and the restarted process finds the newer schema.
 */
async function newerMigrations(
  db: Kysely<Database>,
  provider: MigrationProvider,
): Promise<string[] | undefined> {
  const { rows: table } = await sql<{ exists: boolean }>`
    select to_regclass('kysely_migration') is not null as exists`.execute(db);
  if (!table[0]?.exists) return undefined;
  const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  const executed = new Set(rows.map((row) => row.name));
  const ours = Object.keys(await provider.getMigrations()).sort();
  const unknown = [...executed].filter((name) => !ours.includes(name)).sort();
  if (unknown.length === 0) return undefined;
  const last = ours.at(-1) ?? '';
  const pending = ours.filter((name) => !executed.has(name));
  const between = unknown.filter((name) => name < last);
  if (pending.length > 0 || between.length > 0) {
    throw new MigrationFailedError(
      undefined,
      new Error(
        `the database has migrations this build does not ship (${unknown.join(', ')})${
          between.length > 0 ? `, some before its last one (${last})` : ''
        }${pending.length > 0 ? ` while this build's ${pending.join(', ')} are not applied` : ''}: a different history, not a newer version`,
      ),
    );
  }
  return unknown;
}

/**
 * Names of the migrations this build ships that the database has not applied yet (all of them when the
 * database was never migrated). Processes that do not migrate (the cluster-agent) wait until this is empty.
 */
export async function pendingMigrations(
  db: Kysely<Database>,
  options: { migrationsDir?: string } = {},
): Promise<string[]> {
  const migrator = new Migrator({ db, provider: new SqlFileMigrationProvider(options.migrationsDir) });
  const migrations = await migrator.getMigrations();
  return migrations.filter((m) => m.executedAt === undefined).map((m) => m.name);
}

/**
 * Waits until every migration this version knows is applied (another process migrates: the agent waits for
 * the backend, so the two may start in any order, as pods do), checking every 500 ms.
 * @throws Error naming the missing migrations after `timeoutMs`; when `signal` aborts.
 */
export async function waitForMigrations(
  db: Kysely<Database>,
  options: { timeoutMs: number; signal?: AbortSignal; onWaiting?: (pending: string[]) => void },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let said = false;
  for (;;) {
    options.signal?.throwIfAborted();
    const pending = await pendingMigrations(db);
    if (pending.length === 0) return;
    if (Date.now() > deadline) {
      throw new Error(`the database still lacks migrations ${pending.join(', ')}: is the backend running?`);
    }
    if (!said) options.onWaiting?.(pending);
    said = true;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
