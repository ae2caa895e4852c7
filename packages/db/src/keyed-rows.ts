/**
 * The statements most repository files need for their table: read the row (or the rows, or one column of
 * them) a key names, update, lock or delete the row of an id, read one keyset page. Each repository names its
 * own functions with these (`getEngineInstance = rowBy('engine_instance', 'id')`), so the query itself is
 * written once.
 */
import {
  type Kysely,
  type Selectable,
  type SelectQueryBuilder,
  sql,
  type Transaction,
  type Updateable,
} from 'kysely';
import type { Database } from './database.ts';

type Table = keyof Database & string;

type Column<T extends Table> = keyof Selectable<Database[T]> & string;

/** A column of `T` that holds text (an id, a name, a uid): what a keyed lookup compares with. */
type TextColumn<T extends Table> = {
  [C in Column<T>]: NonNullable<Selectable<Database[T]>[C]> extends string ? C : never;
}[Column<T>];

/** A table whose rows have an `id`. */
type TableWithId = { [T in Table]: 'id' extends keyof Database[T] ? T : never }[Table];

/**
 * The tables as Kysely types a query over a table it is not told of statically: the table and column names
 * are checked by the signatures below (`Table`, `TextColumn`, `Column`) at the call instead.
 */
type AnyTables = Record<string, Record<string, unknown>>;

/** `db` for a statement over a table named by a type parameter (see AnyTables). */
const untyped = (db: Kysely<Database>) => db as unknown as Kysely<AnyTables>;

/** `(db, value)`: the row of `table` whose `column` is `value` (undefined when there is none). */
export function rowBy<T extends Table>(
  table: T,
  column: TextColumn<T>,
): (db: Kysely<Database>, value: string) => Promise<Selectable<Database[T]> | undefined> {
  const key: string = column;
  return async (db, value) => {
    const row = await untyped(db).selectFrom(table).selectAll().where(key, '=', value).executeTakeFirst();
    return row as Selectable<Database[T]> | undefined;
  };
}

/** `(db, value)`: the rows of `table` whose `column` is `value`, in the order of the columns `orderBy`. */
export function rowsBy<T extends Table>(
  table: T,
  column: TextColumn<T>,
  orderBy: readonly Column<T>[] = [],
): (db: Kysely<Database>, value: string) => Promise<Selectable<Database[T]>[]> {
  const key: string = column;
  return async (db, value) => {
    let query = untyped(db).selectFrom(table).selectAll().where(key, '=', value);
    for (const order of orderBy) query = query.orderBy(order);
    return (await query.execute()) as Selectable<Database[T]>[];
  };
}

/**
 * `(db, value)`: the values of the text column `select` in the rows of `table` whose `column` is `value`
 * (each once with `distinct`), in no particular order.
 */
export function valuesBy<T extends Table>(
  table: T,
  select: TextColumn<T>,
  column: TextColumn<T>,
  options: { distinct?: boolean } = {},
): (db: Kysely<Database>, value: string) => Promise<string[]> {
  const from: string = table;
  const selected: string = select;
  const key: string = column;
  return async (db, value) => {
    const query = untyped(db).selectFrom(from).select(selected).where(key, '=', value);
    const rows = await (options.distinct ? query.distinct() : query).execute();
    return rows.map((row) => row[selected] as string);
  };
}

/** Sets `values` on the row of `table` with this id; the row as it is now (undefined when there is none). */
export async function updateRowById<T extends TableWithId>(
  db: Kysely<Database>,
  table: T,
  id: string,
  values: Updateable<Database[T]>,
): Promise<Selectable<Database[T]> | undefined> {
  const name: string = table;
  const row = await untyped(db)
    .updateTable(name)
    .set(values as Record<string, unknown>)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row as Selectable<Database[T]> | undefined;
}

/** `(trx, id)`: the row of `table` with this id, locked until `trx` ends (FOR UPDATE); undefined when none. */
export function lockRowById<T extends TableWithId>(
  table: T,
): (trx: Transaction<Database>, id: string) => Promise<Selectable<Database[T]> | undefined> {
  const from: string = table;
  return async (trx, id) => {
    const row = await untyped(trx)
      .selectFrom(from)
      .selectAll()
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    return row as Selectable<Database[T]> | undefined;
  };
}

/** `(db, id)`: deletes the row of `table` with this id (cascading as the schema says); whether there was one. */
export function deleteRowById(table: TableWithId): (db: Kysely<Database>, id: string) => Promise<boolean> {
  return async (db, id) => {
    const result = await db.deleteFrom(table).where('id', '=', id).executeTakeFirst();
    return result.numDeletedRows > 0n;
  };
}

/** A keyset page: the rows after `afterId` (from the first when absent), at most `limit`, in id order. */
export interface IdPage {
  afterId?: string;
  limit: number;
}

/**
 * `query` (over one table whose rows have an `id`) narrowed to one keyset page: a long pass sees each row once,
 * whatever is written meanwhile.
 */
export function pageById<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  page: IdPage,
): SelectQueryBuilder<DB, TB, O> {
  const id = sql.ref<string>('id');
  const ordered = query.orderBy(id).limit(page.limit);
  return page.afterId === undefined ? ordered : ordered.where(id, '>', page.afterId);
}
