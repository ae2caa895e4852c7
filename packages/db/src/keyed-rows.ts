/**
 * The statements most repository files need for their table: read the row a key names, delete the row of
 * an id, read one keyset page. Each repository names its own functions with these (`getEngineInstance =
 * rowBy('engine_instance', 'id')`), so the query itself is written once.
 */
import { type Kysely, type Selectable, type SelectQueryBuilder, sql } from 'kysely';
import type { Database } from './database.ts';

type Table = keyof Database & string;

/** A column of `T` that holds text (an id, a name, a uid): what a keyed lookup compares with. */
type TextColumn<T extends Table> = {
  [C in keyof Selectable<Database[T]> & string]: NonNullable<Selectable<Database[T]>[C]> extends string
    ? C
    : never;
}[keyof Selectable<Database[T]> & string];

/**
 * The table's rows seen through one text column, as Kysely types a query over a table it is not told of
 * statically (the column names are checked by `TextColumn` at the call instead).
 */
type KeyedTables = Record<string, Record<string, string>>;

/** `(db, value)`: the row of `table` whose `column` is `value` (undefined when there is none). */
export function rowBy<T extends Table>(
  table: T,
  column: TextColumn<T>,
): (db: Kysely<Database>, value: string) => Promise<Selectable<Database[T]> | undefined> {
  return async (db, value) => {
    const keyed = db as unknown as Kysely<KeyedTables>;
    const key: string = column;
    const row = await keyed.selectFrom(table).selectAll().where(key, '=', value).executeTakeFirst();
    return row as Selectable<Database[T]> | undefined;
  };
}

/** A table whose rows have an `id`. */
type TableWithId = { [T in Table]: 'id' extends keyof Database[T] ? T : never }[Table];

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
