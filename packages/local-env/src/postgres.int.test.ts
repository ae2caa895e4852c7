import assert from 'node:assert/strict';
import pg from 'pg';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type PostgresServer, startPostgres } from './postgres.ts';

describe('an embedded PostgreSQL restarted immediately', () => {
  let server: PostgresServer;
  beforeAll(async () => {
    server = await startPostgres({ forceEmbedded: true, durableCommits: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('cuts every session, comes back on the same port and keeps every committed row', async () => {
    const before = new pg.Client({ connectionString: server.url });
    await before.connect();
    const lost = new Promise<Error>((resolve) => before.on('error', resolve));
    await before.query('create table kept (n int)');
    await before.query('insert into kept select generate_series(1, 1000)');
    const { rows: pids } = await before.query<{ pid: number }>('select pg_backend_pid() as pid');

    await server.restartImmediately();

    // The session of before the restart is gone (the server ended it), and the client heard it.
    const error = await lost;
    assert.match(error.message, /terminat|Connection|shut/i);
    await assert.rejects(before.query('select 1'));
    before.end().catch(() => {});

    const after = new pg.Client({ connectionString: server.url });
    await after.connect();
    try {
      const { rows } = await after.query<{ n: number; pid: number }>(
        'select count(*)::int as n, pg_backend_pid() as pid from kept',
      );
      assert.equal(rows[0]?.n, 1000);
      assert.notEqual(rows[0]?.pid, pids[0]?.pid);
    } finally {
      await after.end();
    }
  });
});
