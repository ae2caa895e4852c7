import { type Kysely, sql } from 'kysely';
import type { Database } from './database.ts';
import type { IdPage } from './keyed-rows.ts';
import { SealContext } from './sealing.ts';

/**
 * Every sealed column (`*_sealed`, docs/data-model.md "Sealed columns and key rotation") as one list, for the
 * admin CLI's `reseal` (re-encrypt every stored value under the active key) and `doctor` (which keys the
 * stored values need). Only this file names the columns dynamically: a `_sealed` column added to the schema
 * and missing here fails `pnpm typecheck` (below).
 */

export interface SealedColumn {
  /** Table with a uuid primary key `id`. */
  readonly table: 'cluster_credentials' | 'repository_credentials';
  readonly column: string;
  /** The additional authenticated data the value was sealed with (sealing.ts). */
  readonly context: SealContext;
}

export const SEALED_COLUMNS = [
  { table: 'cluster_credentials', column: 'bearer_token_sealed', context: SealContext.bearerToken },
  { table: 'repository_credentials', column: 'username_sealed', context: SealContext.username },
  { table: 'repository_credentials', column: 'password_sealed', context: SealContext.password },
  {
    table: 'repository_credentials',
    column: 'ssh_private_key_sealed',
    context: SealContext.sshPrivateKey,
  },
] as const satisfies readonly SealedColumn[];

type Listed = `${(typeof SEALED_COLUMNS)[number]['table']}.${(typeof SEALED_COLUMNS)[number]['column']}`;
type SealedColumnsOf<T> = { [K in keyof T]-?: K extends `${string}_sealed` ? K : never }[keyof T];
type SchemaSealed = {
  [T in keyof Database]: `${T & string}.${SealedColumnsOf<Database[T]> & string}`;
}[keyof Database];
// A `_sealed` column of the schema that SEALED_COLUMNS does not list fails `pnpm typecheck` here.
const everySealedColumnListed: Exclude<SchemaSealed, Listed> extends never ? true : false = true;
void everySealedColumnListed;

/** `table.column`, how the CLI names a sealed column. */
export function sealedColumnName(column: SealedColumn): string {
  return `${column.table}.${column.column}`;
}

/** One stored sealed value. */
export interface SealedValue {
  id: string;
  value: Buffer;
}

/**
 * The non-NULL values of one sealed column, by row id, `limit` at a time after `afterId` (keyset paging: a
 * long pass sees each row once, whatever is written meanwhile).
 */
export async function listSealedValues(
  db: Kysely<Database>,
  column: SealedColumn,
  page: IdPage,
): Promise<SealedValue[]> {
  const col = sql.ref(column.column);
  const { rows } = await sql<SealedValue>`
    select id, ${col} as value from ${sql.table(column.table)}
    where ${col} is not null
      ${page.afterId === undefined ? sql`` : sql`and id > ${page.afterId}::uuid`}
    order by id
    limit ${page.limit}`.execute(db);
  return rows;
}

/**
 * Replaces a sealed value only if it still is `expected` (a compare-and-set: a value the backend rewrote
 * meanwhile is left alone). True when the row was updated.
 */
export async function replaceSealedValue(
  db: Kysely<Database>,
  column: SealedColumn,
  id: string,
  expected: Uint8Array,
  replacement: Uint8Array,
): Promise<boolean> {
  const col = sql.ref(column.column);
  const result = await sql`
    update ${sql.table(column.table)} set ${col} = ${Buffer.from(replacement)}
    where id = ${id}::uuid and ${col} = ${Buffer.from(expected)}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/** How many values of a column are sealed under one key id, with one of them to try opening. */
export interface SealedKeyUsage {
  column: SealedColumn;
  /** The key id in the values' header; null when the header is malformed (too short). */
  keyId: string | null;
  count: number;
  sample: SealedValue;
}

/**
 * For every sealed column, the key ids its values are sealed under (read from the header: version byte, key
 * id length, key id; sealing.ts), how many values each, and one sample value (the lowest row id). One
 * statement per column; the values themselves are not read except the samples.
 */
export async function listSealedKeyUsage(db: Kysely<Database>): Promise<SealedKeyUsage[]> {
  const usage: SealedKeyUsage[] = [];
  for (const column of SEALED_COLUMNS) {
    const col = sql.ref(column.column);
    const { rows } = await sql<{ key_id: Buffer | null; n: number; id: string; value: Buffer }>`
      select distinct on (key_id) key_id, count(*) over (partition by key_id)::int as n, id, value
      from (
        select id, ${col} as value,
          case when octet_length(${col}) >= 2 then substring(${col} from 3 for get_byte(${col}, 1)) end
            as key_id
        from ${sql.table(column.table)} where ${col} is not null
      ) sealed
      order by key_id, id`.execute(db);
    for (const row of rows) {
      usage.push({
        column,
        keyId: row.key_id === null || row.key_id.length === 0 ? null : row.key_id.toString('utf8'),
        count: Number(row.n),
        sample: { id: row.id, value: row.value },
      });
    }
  }
  return usage;
}
