import assert from 'node:assert/strict';
import { openTransaction } from '@gitops/db/testing';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { describe, test } from 'vitest';
import { useBackendFixture } from '../testing/backend-fixture.ts';

describe('the notifications feature at start', () => {
  const f = useBackendFixture();

  test("a connection lost while it reads the backend's channel names is retried, not a failed start", async () => {
    // The read waits behind a lock the test holds; the test then ends its session, as a PostgreSQL restart does.
    const lock = openTransaction(f.db, (trx) =>
      sql`lock table backend_channel in access exclusive mode`.execute(trx),
    );
    await lock.ready;
    const starting = f.startBackend();
    starting.catch(() => {}); // awaited below; a rejection meanwhile is not unhandled
    const waiting = async () => {
      const { rows } = await sql<{ pid: number }>`
        select pid from pg_stat_activity
        where datname = current_database() and application_name = 'gitops-backend'
          and wait_event_type = 'Lock' and query like '%backend_channel%'`.execute(f.db);
      return rows[0]?.pid;
    };
    const pid = await eventually("the backend's read of its channel names waiting", waiting);
    await sql`select pg_terminate_backend(${pid}::int)`.execute(f.db);
    lock.release();
    await lock.done;
    const backend = await starting;
    assert.equal(backend.ready(), true);
  });
});
