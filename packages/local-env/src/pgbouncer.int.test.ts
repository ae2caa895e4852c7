import assert from 'node:assert/strict';
import pg from 'pg';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { findPgBouncerBinary, type PgBouncer, startPgBouncer } from './pgbouncer.ts';
import { type PostgresServer, startPostgres } from './postgres.ts';

/** A URL of `server` for `user` and `database`. */
function urlOf(server: string, user: string, password: string, database: string): string {
  const url = new URL(server);
  url.username = user;
  url.password = password;
  url.pathname = `/${database}`;
  return url.toString();
}

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

describe('startPgBouncer', () => {
  let postgres: PostgresServer;
  let bouncer: PgBouncer;

  beforeAll(async () => {
    postgres = await startPostgres({ forceEmbedded: true, authMethod: 'scram-sha-256' });
    bouncer = await startPgBouncer({ postgresUrl: postgres.url, defaultPoolSize: 1, maxDbConnections: 2 });
    await query(postgres.url, 'create database app');
    await bouncer.prepareDatabase('app');
    // A role made at run time, as `instances admit` makes an engine instance's: in no list PgBouncer has.
    await query(postgres.url, "create role gitops_ei_test login password 'instance-secret'");
    await query(postgres.url, "create role other_superuser superuser login password 'super-secret'");
  });
  afterAll(async () => {
    await bouncer?.stop();
    await postgres?.stop();
  });

  it('logs in a role created at run time by its stored SCRAM secret, and pools its transactions', async () => {
    const url = bouncer.urlOf(urlOf(postgres.url, 'gitops_ei_test', 'instance-secret', 'app'));
    assert.equal(new URL(url).port, String(bouncer.port));
    // Eight clients at once, one server session for the role (default_pool_size 1): transaction pooling.
    const pids = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          await client.query('begin');
          const { rows } = await client.query<{ pid: number; role: string }>(
            'select pg_backend_pid() as pid, session_user::text as role from pg_sleep(0.05)',
          );
          await client.query('commit');
          assert.equal(rows[0]?.role, 'gitops_ei_test');
          return rows[0]?.pid;
        } finally {
          await client.end();
        }
      }),
    );
    assert.equal(new Set(pids).size, 1, `server sessions: ${pids.join(', ')}`);
    const servers = (await bouncer.servers()).filter((s) => s.database === 'app');
    assert.ok(
      servers.some((s) => s.user === 'gitops_ei_test' && s.pid === pids[0]),
      JSON.stringify(servers),
    );
    assert.ok(servers.length <= 2, JSON.stringify(servers));
  });

  it('refuses a wrong password, and gives no superuser its secret (only the auth file one logs in)', async () => {
    await assert.rejects(
      query(bouncer.urlOf(urlOf(postgres.url, 'gitops_ei_test', 'wrong', 'app')), 'select 1'),
      /password authentication failed|SASL|auth/i,
    );
    await assert.rejects(
      query(bouncer.urlOf(urlOf(postgres.url, 'other_superuser', 'super-secret', 'app')), 'select 1'),
    );
    const [row] = await query<{ role: string }>(
      bouncer.urlOf(urlOf(postgres.url, 'postgres', 'postgres', 'app')),
      'select session_user::text as role',
    );
    assert.equal(row?.role, 'postgres');
  });

  it('refuses a PostgreSQL that asks for cleartext passwords, naming scram-sha-256', async () => {
    const cleartext = await startPostgres({ forceEmbedded: true });
    try {
      await assert.rejects(startPgBouncer({ postgresUrl: cleartext.url }), /not scram-sha-256/);
    } finally {
      await cleartext.stop();
    }
  });

  it('says how to install the binary when it is missing', async () => {
    const saved = process.env.PGBOUNCER_BINARY;
    process.env.PGBOUNCER_BINARY = '/nonexistent/pgbouncer';
    try {
      await assert.rejects(
        findPgBouncerBinary(),
        /PGBOUNCER_BINARY=\/nonexistent\/pgbouncer is not an executable/,
      );
    } finally {
      if (saved === undefined) delete process.env.PGBOUNCER_BINARY;
      else process.env.PGBOUNCER_BINARY = saved;
    }
  });
});
