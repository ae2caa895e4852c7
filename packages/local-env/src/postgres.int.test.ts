import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
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

describe('an embedded PostgreSQL whose port is taken before it binds it', () => {
  it('starts on another free port, and its URL reaches it', async () => {
    // Another process holds the port (as when it takes a port freePort() gave back, during a busy test run).
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const taken = (holder.address() as AddressInfo).port;
    const lines: string[] = [];
    const server = await startPostgres({ forceEmbedded: true, port: taken, log: (line) => lines.push(line) });
    try {
      assert.notEqual(new URL(server.url).port, String(taken));
      assert.ok(lines.some((line) => line.includes(`port ${taken} taken`)));
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ one: number }>('select 1 as one');
        assert.equal(rows[0]?.one, 1);
      } finally {
        await client.end();
      }
    } finally {
      await server.stop();
      holder.close();
    }
  });
});
