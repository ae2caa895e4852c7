import { readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import { Cli, type DatabaseMetadata, DiffChecker, type PostprocessFunction } from 'kysely-codegen';

/**
 * How database.generated.ts is produced from a migrated database, shared by scripts/generate-types.ts and
 * schema-types.int.test.ts so both run kysely-codegen identically. Not exported from the package index:
 * kysely-codegen is a dev dependency.
 *
 * Enum-like text columns: the migration constrains them with a single-column CHECK of the form
 * `col IN ('A', 'B')` (optionally `col IS NULL OR col IN (...)`). The postprocess step below reads those
 * constraints back from pg_constraint and gives the column the literal union 'A' | 'B', so the generated
 * types follow the SQL with no second list to keep in sync.
 */

interface CheckConstraintRow {
  table_name: string;
  column_name: string;
  definition: string;
}

/** PostgreSQL prints `col IN ('A','B')` as `(col = ANY (ARRAY['A'::text, 'B'::text]))`. */
const ANY_ARRAY = /= ANY \(ARRAY\[(.*?)\]\)/;
const TEXT_LITERAL = /'((?:[^']|'')*)'::text/g;

/** The allowed values of a single-column `IN (...)` CHECK definition, or undefined for other checks. */
export function enumValuesOfCheck(definition: string): string[] | undefined {
  const list = ANY_ARRAY.exec(definition)?.[1];
  if (list === undefined) return undefined;
  return [...list.matchAll(TEXT_LITERAL)].map((match) => match[1]!.replaceAll("''", "'"));
}

const enumsFromCheckConstraints: PostprocessFunction = async ({ db, metadata }) => {
  const { rows } = await sql<CheckConstraintRow>`
    select c.relname as table_name, a.attname as column_name, pg_get_constraintdef(k.oid) as definition
    from pg_constraint k
    join pg_class c on c.oid = k.conrelid
    join pg_namespace n on n.oid = c.relnamespace
    join pg_attribute a on a.attrelid = c.oid and a.attnum = k.conkey[1]
    where k.contype = 'c' and n.nspname = 'public' and cardinality(k.conkey) = 1
    order by c.relname, a.attname, k.conname
  `.execute(db);
  for (const row of rows) {
    const values = enumValuesOfCheck(row.definition);
    if (values === undefined) continue;
    const column = metadata.tables
      .find((table) => table.name === row.table_name)
      ?.columns.find((col) => col.name === row.column_name);
    if (column) column.enumValues = values;
  }
  return metadata as DatabaseMetadata;
};

/**
 * kysely-codegen command-line flags, without --url / --out-file. `int8` is a number, as the connection parses
 * it (connection.ts, `parseInt8`: one outside the safe integer range throws).
 */
export const CODEGEN_FLAGS: readonly string[] = [
  '--dialect=postgres',
  '--type-mapping={"int8":"number"}',
  '--exclude-pattern=kysely_migration*',
  '--log-level=error',
];

/** Introspects the database at `url` and returns the generated TypeScript source (writes nothing). */
export async function generateDatabaseTypes(url: string): Promise<string> {
  const cli = new Cli();
  const options = cli.parseOptions([...CODEGEN_FLAGS, `--url=${url}`], { config: {} });
  return await cli.generate({ ...options, outFile: null, postprocess: enumsFromCheckConstraints });
}

/** Writes the generated types to `outFile` (kysely-codegen `--out-file`). */
export async function writeDatabaseTypes(url: string, outFile: string): Promise<void> {
  const cli = new Cli();
  const options = cli.parseOptions([...CODEGEN_FLAGS, `--url=${url}`, `--out-file=${outFile}`], {
    config: {},
  });
  await cli.generate({ ...options, postprocess: enumsFromCheckConstraints });
}

/**
 * Compares freshly generated types with `file`; returns a readable diff, or undefined when equal.
 * (Not kysely-codegen's own --verify: on a difference it throws before closing its connection pool.)
 */
export async function diffDatabaseTypes(url: string, file: string): Promise<string | undefined> {
  const generated = await generateDatabaseTypes(url);
  const committed = await readFile(file, 'utf8');
  if (generated === committed) return undefined;
  return new DiffChecker().diff(committed, generated) ?? 'the files differ (whitespace only)';
}
