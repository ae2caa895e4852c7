import assert from 'node:assert/strict';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createDb } from './connection.ts';
import type { Database } from './database.ts';
import { createTestDatabase, type TestDatabase } from './testing/test-database.ts';

let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await createTestDatabase();
  await sql`create table named_probe (id int primary key)`.execute(testDb.db);
  await sql`insert into named_probe values (1), (2)`.execute(testDb.db);
});
afterAll(async () => {
  await testDb?.destroy();
});

/** The protocol-level prepared statements of the session `db`'s only connection holds. */
async function preparedNames(db: Kysely<Database>): Promise<string[]> {
  const result = await sql<{ name: string }>`
    select name from pg_prepared_statements where not from_sql order by name`.execute(db);
  return result.rows.map((row) => row.name);
}

const byId = (db: Kysely<Database>, id: number) =>
  sql<Record<string, unknown>>`select * from named_probe where id = ${id}`.execute(db);

describe('named prepared statements', () => {
  test('a parameterised statement sent again is prepared once on the connection and keeps answering', async () => {
    const db = createDb(testDb.url, { max: 1 });
    try {
      assert.deepEqual((await byId(db, 1)).rows, [{ id: 1 }]);
      assert.deepEqual(await preparedNames(db), [], 'the first time it is sent unnamed');
      assert.deepEqual((await byId(db, 2)).rows, [{ id: 2 }]);
      assert.deepEqual((await byId(db, 1)).rows, [{ id: 1 }]);
      const names = await preparedNames(db);
      assert.equal(names.length, 1, `one prepared statement for the repeated text (${names.join(', ')})`);
      assert.match(names[0] ?? '', /^gitops_\d+$/);
    } finally {
      await db.destroy();
    }
  });

  test('preparedStatements: false sends every statement unnamed', async () => {
    const db = createDb(testDb.url, { max: 1, preparedStatements: false });
    try {
      for (const id of [1, 2, 1]) await byId(db, id);
      assert.deepEqual(await preparedNames(db), []);
    } finally {
      await db.destroy();
    }
  });

  /** A table of one row, and a pool of one connection on which its `select *` is already prepared. */
  async function preparedSelect(table: string) {
    await sql`create table ${sql.table(table)} (id int primary key)`.execute(testDb.db);
    await sql`insert into ${sql.table(table)} values (1)`.execute(testDb.db);
    const db = createDb(testDb.url, { max: 1 });
    const read = (on: Kysely<Database> = db) =>
      sql<Record<string, unknown>>`select * from ${sql.table(table)} where id = ${1}`.execute(on);
    await read();
    await read();
    const addColumn = () =>
      sql`alter table ${sql.table(table)} add column note text default 'added'`.execute(testDb.db);
    return { db, read, addColumn };
  }

  test('a column added by a migration: a prepared select * answers with the new shape instead of failing', async () => {
    const { db, read, addColumn } = await preparedSelect('named_migrated');
    try {
      assert.equal((await preparedNames(db)).length, 1, 'the select is prepared before the migration');
      await addColumn();
      // PostgreSQL refuses the stale plan ("cached plan must not change result type"); the statement is sent
      // again under a new name.
      assert.deepEqual((await read()).rows, [{ id: 1, note: 'added' }]);
      assert.deepEqual((await read()).rows, [{ id: 1, note: 'added' }]);
    } finally {
      await db.destroy();
    }
  });

  test('inside a transaction the stale plan fails the transaction (it cannot be retried there), and the next one works', async () => {
    const { db, read, addColumn } = await preparedSelect('named_migrated_trx');
    try {
      await addColumn();
      const failed = await db
        .transaction()
        .execute((trx) => read(trx))
        .catch((err: unknown) => err);
      assert.equal((failed as { code?: unknown }).code, '0A000', String(failed));
      const rows = await db.transaction().execute(async (trx) => (await read(trx)).rows);
      assert.deepEqual(rows, [{ id: 1, note: 'added' }]);
    } finally {
      await db.destroy();
    }
  });
});
