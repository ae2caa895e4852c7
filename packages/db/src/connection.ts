import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from './database.ts';
import { createStatementNames, namingClient } from './named-statements.ts';

/** PostgreSQL type OIDs we parse differently from node-postgres' defaults. */
const INT8_OID = 20;
const DATE_OID = 1082;

/**
 * `bigint` (e.g. `count(*)`) becomes a JS number; a value outside the safe integer range throws instead of
 * silently losing precision (the schema's one int8 column is `api_cr_mapping.cr_generation`, a Kubernetes
 * `metadata.generation`). `date` stays a 'YYYY-MM-DD' string,
 * because turning it into a Date at local midnight shifts it across time zones. `timestamptz` keeps the
 * default (a Date, exact to the millisecond); `numeric` stays a string; `jsonb` is parsed.
 */
export function parseInt8(value: string): number {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed)) {
    throw new RangeError(`bigint value ${value} does not fit in a JavaScript number`);
  }
  return parsed;
}

const typeParsers: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format === undefined || format === 'text') {
      if (oid === INT8_OID) return parseInt8;
      if (oid === DATE_OID) return (value: string) => value;
    }
    return format === undefined ? pg.types.getTypeParser(oid) : pg.types.getTypeParser(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};

export interface CreateDbOptions {
  /** Maximum pool size (default 10). */
  max?: number;
  /** Shown in pg_stat_activity, e.g. 'gitops-backend'. */
  applicationName?: string;
  /**
   * Send repeated parameterised statements as named prepared statements (default true; named-statements.ts).
   * Off for a connection pooler that cannot keep them (PgBouncer in transaction mode before 1.21, or without
   * `max_prepared_statements`).
   */
  preparedStatements?: boolean;
  /**
   * Called when a pooled connection fails (e.g. the server restarted or terminated the session), whether it
   * was idle in the pool or checked out for a query or a transaction. A checked-out connection's query
   * rejects with the error as well; pg drops the connection and the next query opens a new one. Without
   * these listeners node-postgres raises an `'error'` event nobody handles, which kills the process.
   */
  onConnectionError?: (error: Error) => void;
}

/** node-postgres connection options shared by the pool and the LISTEN client. */
export function connectionConfig(url: string, applicationName?: string): pg.ClientConfig {
  return {
    connectionString: url,
    types: typeParsers,
    keepAlive: true,
    ...(applicationName === undefined ? {} : { application_name: applicationName }),
  };
}

/** A thrown value as an Error. */
export function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** A dedicated session (LISTEN, an advisory lock) and what tells that it is lost. */
export interface WatchedSession {
  client: pg.Client;
  /** Resolves with why the session is lost: a socket error, its end, a health check, or `markLost`. */
  lost: Promise<Error>;
  markLost(error: Error): void;
  /**
   * Every `intervalMs` (none when 0), `select 1`: a failure, or no answer within 10 s (`timeoutMessage`),
   * marks the session lost. The interval does not keep the process alive; clear it when the session ends.
   */
  healthCheck(intervalMs: number, timeoutMessage: string): NodeJS.Timeout | undefined;
}

/**
 * A client of its own (not pooled) whose loss is a promise. Its 'error' listener stays for the client's whole
 * life: a socket error must never be an unhandled 'error' event.
 */
export function watchedSession(url: string, applicationName: string, endedMessage: string): WatchedSession {
  const client = new pg.Client({
    ...connectionConfig(url, applicationName),
    connectionTimeoutMillis: 10_000,
  });
  const { promise: lost, resolve: markLost } = Promise.withResolvers<Error>();
  client.on('error', (error) => markLost(error));
  client.on('end', () => markLost(new Error(endedMessage)));
  const healthCheck = (intervalMs: number, timeoutMessage: string) => {
    if (intervalMs <= 0) return undefined;
    const timer = setInterval(() => {
      const timeout = setTimeout(() => markLost(new Error(timeoutMessage)), 10_000);
      client.query('select 1').then(
        () => clearTimeout(timeout),
        (error: unknown) => {
          clearTimeout(timeout);
          markLost(asError(error));
        },
      );
    }, intervalMs);
    timer.unref();
    return timer;
  };
  return { client, lost, markLost, healthCheck };
}

/**
 * Creates the Kysely instance over a pg Pool. Call `db.destroy()` to close the pool.
 */
export function createDb(url: string, options: CreateDbOptions = {}): Kysely<Database> {
  const pool = new pg.Pool({
    ...connectionConfig(url, options.applicationName),
    max: options.max ?? 10,
    ...(options.preparedStatements === false ? {} : { Client: namingClient(createStatementNames()) }),
  });
  // pg-pool listens on a connection only while it is idle; a connection checked out for a query or a
  // transaction that loses its server emits 'error' on the client itself. One listener per connection, for
  // its whole life, covers both (the pool's own 'error' event repeats idle failures, already reported).
  pool.on('connect', (client) => {
    client.on('error', (error) => options.onConnectionError?.(error));
  });
  pool.on('error', () => {});
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/** Transactions this database has committed plus rolled back since its statistics were reset (for benchmarks). */
export async function countDatabaseTransactions(db: Kysely<Database>): Promise<number> {
  const result = await sql<{ commits: string; rollbacks: string }>`
    select xact_commit as commits, xact_rollback as rollbacks
    from pg_stat_database where datname = current_database()`.execute(db);
  return Number(result.rows[0]?.commits ?? 0) + Number(result.rows[0]?.rollbacks ?? 0);
}

/**
 * Benchmarks only: turns on per-statement counting for this database (pg_stat_statements; the server must
 * preload it, see `startPostgres({ statementStatistics: true })` in @gitops/local-env). False when unavailable.
 */
export async function enableStatementStatistics(db: Kysely<Database>): Promise<boolean> {
  try {
    await sql`create extension if not exists pg_stat_statements`.execute(db);
    await sql`select count(*) from pg_stat_statements`.execute(db);
    return true;
  } catch {
    return false;
  }
}

/** Benchmarks only: calls per normalised statement of this database so far (pg_stat_statements). */
export async function statementCalls(db: Kysely<Database>): Promise<Map<string, number>> {
  const result = await sql<{ query: string; calls: string }>`
    select query, sum(calls) as calls from pg_stat_statements
    where dbid = (select oid from pg_database where datname = current_database())
    group by query`.execute(db);
  return new Map(result.rows.map((r) => [r.query.replace(/\s+/g, ' ').trim(), Number(r.calls)]));
}

/**
 * Benchmarks only: PostgreSQL's execution time per normalised statement of this database so far, in µs
 * (pg_stat_statements' `total_exec_time`: planning, parsing and the session's round trip are not in it).
 */
export async function statementExecMicros(db: Kysely<Database>): Promise<Map<string, number>> {
  const result = await sql<{ query: string; micros: string }>`
    select query, sum(total_exec_time) * 1000 as micros from pg_stat_statements
    where dbid = (select oid from pg_database where datname = current_database())
    group by query`.execute(db);
  return new Map(result.rows.map((r) => [r.query.replace(/\s+/g, ' ').trim(), Number(r.micros)]));
}

/** Benchmarks only: the other sessions on this database that are in a transaction now, by backend type and application name. */
export async function activeSessions(db: Kysely<Database>): Promise<Record<string, number>> {
  const result = await sql<{ who: string; n: string }>`
    select backend_type || ':' || coalesce(nullif(application_name, ''), '-') as who, count(*) as n
    from pg_stat_activity
    where (datname = current_database() or backend_type like 'autovacuum%') and pid <> pg_backend_pid()
      and xact_start is not null
    group by 1`.execute(db);
  return Object.fromEntries(result.rows.map((r) => [r.who, Number(r.n)]));
}

/**
 * Benchmarks only: the sessions open on this database now (this one left out), by application name and role:
 * `<application_name> <role>`, e.g. `gitops-cluster-agent gitops_ei_...`.
 */
export async function openSessions(db: Kysely<Database>): Promise<Record<string, number>> {
  const result = await sql<{ who: string; n: string }>`
    select coalesce(nullif(application_name, ''), '-') || ' ' || usename as who, count(*) as n
    from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid()
    group by 1`.execute(db);
  return Object.fromEntries(result.rows.map((r) => [r.who, Number(r.n)]));
}

/** Benchmarks only: autovacuum and autoanalyze runs on this database's tables (catalogs included) so far. */
export async function countAutovacuumRuns(db: Kysely<Database>): Promise<number> {
  const result = await sql<{ runs: string }>`
    select coalesce(sum(autovacuum_count + autoanalyze_count), 0) as runs from pg_stat_all_tables`.execute(
    db,
  );
  return Number(result.rows[0]?.runs ?? 0);
}
