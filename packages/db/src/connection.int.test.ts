import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { describe, test } from 'vitest';
import { createDb } from './connection.ts';
import { useTestDatabase } from './testing/per-file-database.ts';

const testDb = useTestDatabase();

/** Ends a session from another connection, as a server restart or an administrator would. */
async function terminate(pid: number): Promise<void> {
  const result = await sql<{ done: boolean }>`select pg_terminate_backend(${pid}) as done`.execute(testDb.db);
  assert.equal(result.rows[0]?.done, true);
}

describe('a pooled connection that loses its server', () => {
  test('in the middle of a transaction: the transaction fails, the error is reported, the pool carries on', async () => {
    const errors: Error[] = [];
    const db = createDb(testDb.url, { max: 2, onConnectionError: (error) => errors.push(error) });
    try {
      const outcome = await db
        .transaction()
        .execute(async (trx) => {
          const me = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
          await terminate(me.rows[0]?.pid ?? 0);
          // Between two statements the connection is checked out and idle: the server's goodbye arrives
          // now, with no query to fail. Give it time to be read.
          await new Promise((resolve) => setTimeout(resolve, 200));
          await sql`select 1`.execute(trx);
          return 'committed';
        })
        .catch((error: unknown) => error);
      assert.ok(outcome instanceof Error, 'the transaction whose session was terminated fails');
      assert.ok(errors.length >= 1, 'the connection error reached onConnectionError');
      const after = await sql<{ one: number }>`select 1 as one`.execute(db);
      assert.equal(after.rows[0]?.one, 1);
    } finally {
      await db.destroy();
    }
  });

  test('while a query runs: the query rejects, the error is reported, and a new connection serves the next queries', async () => {
    const errors: Error[] = [];
    const db = createDb(testDb.url, { max: 1, onConnectionError: (error) => errors.push(error) });
    try {
      const me = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
      const pid = me.rows[0]?.pid ?? 0;
      const running = sql`select pg_sleep(5)`.execute(db).catch((error: unknown) => error);
      await new Promise((resolve) => setTimeout(resolve, 200));
      await terminate(pid);
      assert.ok((await running) instanceof Error, 'the running query fails');
      // The server's goodbye and the end of the socket arrive one after the other: a query sent in between
      // may still meet the dying connection (and fail like the first); the pool then drops it.
      const again = await eventually('a new session serves queries', async () => {
        const result = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
        return result.rows[0]?.pid;
      });
      assert.notEqual(again, pid);
      assert.ok(errors.length >= 1, 'the connection error reached onConnectionError');
    } finally {
      await db.destroy();
    }
  });
});
