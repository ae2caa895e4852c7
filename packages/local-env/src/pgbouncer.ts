/**
 * A real PgBouncer in transaction mode in front of a local PostgreSQL, for tests of the service behind a pooler
 * (docs/database-connections.md): `DATABASE_URL` through it, `DATABASE_SESSION_ADDRESS` past it.
 *
 * The binary is Debian's `pgbouncer` package (scripts/setup-machine.sh installs it; `PGBOUNCER_BINARY` names
 * another). It runs in the foreground as a child process with its own ini and auth files in a temp folder,
 * logging to stderr. PgBouncer refuses to run as root: as root it is started with `-u nobody`, which it
 * switches to after reading its files (so they stay root's, mode 0600; it writes no file: no log file, pid file
 * or Unix socket).
 *
 * Engine instances' roles are created at run time, so no static list can hold them: PgBouncer looks a login
 * role's SCRAM secret up with `auth_query`, as `auth_user`, through a SECURITY DEFINER function over
 * `pg_shadow` that a superuser creates in each database (`prepareDatabase`), and uses it both to check the
 * client and to log in to PostgreSQL (SCRAM pass-through). PostgreSQL must therefore check passwords with
 * scram-sha-256 (`startPostgres({ authMethod: 'scram-sha-256' })`): PgBouncer cannot answer a cleartext password
 * request with a secret. The function hands out no superuser's secret; the superuser of `postgresUrl` is in the
 * auth file instead, so it logs in through PgBouncer too (the e2e backend uses it).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import pg from 'pg';
import { isExecutable } from './binaries.ts';
import { freePort } from './ports.ts';
import { type ManagedProcess, startProcess } from './process.ts';

export interface PgBouncerOptions {
  /** A superuser URL of the PostgreSQL to pool for (`startPostgres().url`); it must use scram-sha-256. */
  postgresUrl: string;
  /** Server sessions per (user, database) pool: `default_pool_size` (default 2). */
  defaultPoolSize?: number;
  /** Server sessions per database, all users together: `max_db_connections` (default 10). */
  maxDbConnections?: number;
  /** Client connections at most: `max_client_conn` (default 500). */
  maxClientConnections?: number;
  /** Every line PgBouncer writes. */
  log?: (line: string) => void;
}

/** One of PgBouncer's sessions with PostgreSQL (a row of `SHOW SERVERS`). */
export interface PgBouncerServer {
  user: string;
  database: string;
  /** `active`, `idle`, `used`, `tested`, `new`. */
  state: string;
  /** The PostgreSQL backend's process id: `pg_stat_activity.pid`. */
  pid: number;
}

export interface PgBouncer {
  readonly host: string;
  readonly port: number;
  /** `url` of the PostgreSQL with PgBouncer's host and port instead: the same user, password, database. */
  urlOf(url: string): string;
  /**
   * Lets PgBouncer log in any role of `database` but a superuser: creates the lookup function there (once per
   * database; a database made from it as a template has it too). As the superuser of `postgresUrl`.
   */
  prepareDatabase(database: string): Promise<void>;
  /** Its sessions with PostgreSQL now (`SHOW SERVERS` on its admin console). */
  servers(): Promise<PgBouncerServer[]>;
  /** Stops it and drops its login role. */
  stop(): Promise<void>;
}

/** The schema and function that hand PgBouncer a role's secret (`auth_query`). */
const LOOKUP_SCHEMA = 'gitops_pgbouncer';
const LOOKUP_FUNCTION = `${LOOKUP_SCHEMA}.user_secret`;
/** The group role allowed to call it; each PgBouncer's `auth_user` is a member. */
const LOOKUP_ROLE = 'gitops_pgbouncer_lookup';

/** The binary: `PGBOUNCER_BINARY`, else `pgbouncer` on the PATH or in /usr/sbin (Debian's place for it). */
export async function findPgBouncerBinary(): Promise<string> {
  const override = process.env.PGBOUNCER_BINARY;
  if (override) {
    if (!(await isExecutable(override))) throw new Error(`PGBOUNCER_BINARY=${override} is not an executable`);
    return override;
  }
  const folders = [
    ...(process.env.PATH ?? '').split(delimiter).filter(Boolean),
    '/usr/sbin',
    '/usr/local/sbin',
  ];
  for (const folder of folders) {
    if (await isExecutable(join(folder, 'pgbouncer'))) return join(folder, 'pgbouncer');
  }
  throw new Error(
    'pgbouncer is not installed: run scripts/setup-machine.sh as root (it installs the Debian package pgbouncer), or apt-get install pgbouncer, or set PGBOUNCER_BINARY',
  );
}

/** A value of pgbouncer.ini or its auth file, double-quoted (a `"` doubled). */
const quoted = (value: string) => `"${value.replaceAll('"', '""')}"`;

/** A PostgreSQL identifier, double-quoted. */
const identifier = (name: string) => `"${name.replaceAll('"', '""')}"`;

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'gitops-pgbouncer-setup' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Starts PgBouncer in transaction mode on a free loopback port, every database of `postgresUrl`'s server
 * behind it (`* = host port`). Resolves once it accepts connections.
 */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const binary = await findPgBouncerBinary();
  const server = new URL(options.postgresUrl);
  const superuser = decodeURIComponent(server.username);
  const superuserPassword = decodeURIComponent(server.password);
  if (!superuser || !superuserPassword)
    throw new Error('startPgBouncer: postgresUrl needs a user and a password');
  const authUser = `gitops_pgbouncer_${randomBytes(4).toString('hex')}`;
  const authPassword = randomBytes(18).toString('base64url');
  await withClient(options.postgresUrl, async (client) => {
    // How the server checks a password from loopback (pg_hba.conf; unreadable without the privilege: not checked).
    const { rows } = await client
      .query<{ method: string | null }>(
        "select auth_method as method from pg_hba_file_rules where type = 'host' and address = '127.0.0.1' limit 1",
      )
      .catch(() => ({ rows: [] as { method: string | null }[] }));
    const method = rows[0]?.method;
    if (method !== undefined && method !== null && method !== 'scram-sha-256') {
      throw new Error(
        `PostgreSQL checks passwords with ${method}, not scram-sha-256: PgBouncer cannot log in its clients' roles with their stored secrets (start it with startPostgres({ authMethod: 'scram-sha-256' }))`,
      );
    }
    // Concurrent starts may race to create the group role: the loser's error is harmless.
    await client.query(`do $$ begin
        create role ${LOOKUP_ROLE} nologin;
      exception when duplicate_object or unique_violation then null;
      end $$`);
    await client.query(
      `create role ${identifier(authUser)} login in role ${LOOKUP_ROLE} password '${authPassword}'`,
    );
  });

  const dir = await mkdtemp(join(tmpdir(), 'gitops-pgbouncer-'));
  const authFile = join(dir, 'userlist.txt');
  const iniFile = join(dir, 'pgbouncer.ini');
  await writeFile(
    authFile,
    `${quoted(authUser)} ${quoted(authPassword)}\n${quoted(superuser)} ${quoted(superuserPassword)}\n`,
    { mode: 0o600 },
  );
  const ini = (port: number) =>
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || '5432'}`,
      '',
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      // No Unix socket: several may run at once, and nothing here needs one.
      'unix_socket_dir =',
      'pool_mode = transaction',
      'auth_type = scram-sha-256',
      `auth_file = ${authFile}`,
      `auth_user = ${authUser}`,
      `auth_query = SELECT usename, passwd FROM ${LOOKUP_FUNCTION}($1)`,
      `default_pool_size = ${options.defaultPoolSize ?? 2}`,
      'min_pool_size = 0',
      'reserve_pool_size = 0',
      `max_db_connections = ${options.maxDbConnections ?? 10}`,
      `max_client_conn = ${options.maxClientConnections ?? 500}`,
      `stats_users = ${authUser}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n');

  /** Its admin console, where the auth user may run SHOW (`stats_users`). */
  const adminUrlOf = (port: number) =>
    `postgres://${encodeURIComponent(authUser)}:${encodeURIComponent(authPassword)}@127.0.0.1:${port}/pgbouncer`;
  const asRoot = process.getuid?.() === 0;
  const recent: string[] = [];
  let child: ManagedProcess | undefined;
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    await writeFile(iniFile, ini(port), { mode: 0o600 });
    recent.length = 0;
    const started = startProcess('pgbouncer', binary, [...(asRoot ? ['-u', 'nobody'] : []), iniFile], {
      onLine: (line) => {
        options.log?.(line);
        recent.push(line);
        if (recent.length > 20) recent.shift();
      },
    });
    if (await accepting(adminUrlOf(port), started)) {
      child = started;
      break;
    }
    await started.stop(2_000);
    await started.closed;
    // freePort() gives the port back before PgBouncer binds it: another process may have taken it meanwhile.
    const taken = recent.some((line) => /address already in use/i.test(line));
    if (!taken || attempt >= 3) {
      await dropLoginRole(options.postgresUrl, authUser).catch(() => {});
      await rm(dir, { recursive: true, force: true });
      throw new Error(`PgBouncer (${binary}) did not start:\n${recent.join('\n')}`);
    }
  }
  const running = child;
  const adminUrl = adminUrlOf(port);

  return {
    host: '127.0.0.1',
    port,
    urlOf(url) {
      const through = new URL(url);
      through.hostname = '127.0.0.1';
      through.port = String(port);
      return through.toString();
    },
    async prepareDatabase(database) {
      const url = new URL(options.postgresUrl);
      url.pathname = `/${encodeURIComponent(database)}`;
      await withClient(url.toString(), async (client) => {
        await client.query(`create schema if not exists ${LOOKUP_SCHEMA}`);
        // pg_shadow is readable by superusers only: the function runs as its owner (this superuser), for
        // LOOKUP_ROLE's members alone, and never gives a superuser's secret.
        await client.query(`create or replace function ${LOOKUP_FUNCTION}(username text, out usename text, out passwd text)
          returns record language sql stable security definer set search_path = pg_catalog as $$
            select s.usename::text, case when s.valuntil < now() then null else s.passwd::text end
            from pg_catalog.pg_shadow s where s.usename = username and not s.usesuper
          $$`);
        await client.query(`revoke all on function ${LOOKUP_FUNCTION}(text) from public`);
        await client.query(`grant usage on schema ${LOOKUP_SCHEMA} to ${LOOKUP_ROLE}`);
        await client.query(`grant execute on function ${LOOKUP_FUNCTION}(text) to ${LOOKUP_ROLE}`);
      });
    },
    async servers() {
      // The admin console speaks the simple query protocol only: a query without parameters is sent so.
      return await withClient(adminUrl, async (client) => {
        const { rows } = await client.query<Record<string, string | number | null>>('SHOW SERVERS');
        return rows.map((row) => ({
          user: String(row.user),
          database: String(row.database),
          state: String(row.state),
          pid: Number(row.remote_pid),
        }));
      });
    },
    async stop() {
      // SIGTERM: 1.18 shuts down at once; later versions wait for the clients to leave, hence SIGKILL after 5 s.
      await running.stop(5_000);
      await dropLoginRole(options.postgresUrl, authUser).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** True once PgBouncer answers at `adminUrl`; false when it exits first or after 20 s. */
async function accepting(adminUrl: string, process: ManagedProcess): Promise<boolean> {
  let exited = false;
  void process.exited.then(() => {
    exited = true;
  });
  for (let waited = 0; waited < 20_000 && !exited; waited += 100) {
    // A login it refuses would still prove it serves the port.
    const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    const answered = await client.connect().then(
      () => true,
      (error: { code?: string }) => error.code !== 'ECONNREFUSED' && error.code !== 'ECONNRESET',
    );
    await client.end().catch(() => {});
    if (answered) return !exited;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

/** Drops a PgBouncer's login role (it holds nothing of its own: its rights are LOOKUP_ROLE's). */
async function dropLoginRole(postgresUrl: string, role: string): Promise<void> {
  await withClient(postgresUrl, async (client) => {
    await client.query('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [role]);
    await client.query(`drop role if exists ${identifier(role)}`);
  });
}
