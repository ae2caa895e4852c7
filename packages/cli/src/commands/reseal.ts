/**
 * `kubectl gitops reseal [--batch N] [--dry-run]`: re-encrypts every stored sealed value under the active key of
 * GITOPS_ENCRYPTION_KEYS (docs/data-model.md, "Sealed columns and key rotation"), so the old key can be removed.
 * Resumable: a value already under the active key is left alone, so an interrupted run is simply run again.
 * Each value is replaced only if it is still the one read (the backend may rewrite it meanwhile, then under
 * its own active key). Prints counts per column; a value that does not open is reported with its row id and key
 * id, never its content.
 */
import {
  type Db,
  listSealedValues,
  replaceSealedValue,
  SEALED_COLUMNS,
  type SealedColumn,
  type Sealer,
  SealingError,
  sealedColumnName,
} from '@gitops/db';
import type { Command } from '../command.ts';
import { CliError, ExitCode } from '../context.ts';
import { formatStructured, formatTable, type Io, isStructured } from '../output.ts';

const DEFAULT_BATCH = 100;

interface ColumnCounts {
  column: string;
  resealed: number;
  current: number;
  /** Rewritten by someone else between our read and our write: left as it is now (run again to check). */
  changedMeanwhile: number;
  failed: { id: string; keyId: string | null; reason: string }[];
}

export const reseal: Command = async ({ args, options, format, ctx, io }) => {
  if (args.length > 0) throw new CliError('usage: kubectl gitops reseal [--batch N] [--dry-run]');
  const batch = options.batch === undefined ? DEFAULT_BATCH : Number(options.batch);
  if (!Number.isInteger(batch) || batch < 1 || batch > 10_000) {
    throw new CliError(`--batch must be an integer between 1 and 10000 (got "${options.batch}")`);
  }
  const dryRun = options['dry-run'] === true;
  const sealer = ctx.sealer();
  const counts = await resealAll(await ctx.db(), sealer, { batch, dryRun });
  const failed = counts.some((c) => c.failed.length > 0);
  const activeKeyId = sealer.activeKeyId;
  if (isStructured(format)) io.out(formatStructured(format, { activeKeyId, dryRun, columns: counts }));
  else report(io, counts, { activeKeyId, dryRun, batch, failed });
  return failed ? ExitCode.failed : ExitCode.ok;
};

/** Every sealed column, page by page: each value not under the active key is resealed (unless a dry run). */
async function resealAll(
  db: Db,
  sealer: Sealer,
  { batch, dryRun }: { batch: number; dryRun: boolean },
): Promise<ColumnCounts[]> {
  const counts: ColumnCounts[] = [];
  for (const column of SEALED_COLUMNS) {
    const c: ColumnCounts = {
      column: sealedColumnName(column),
      resealed: 0,
      current: 0,
      changedMeanwhile: 0,
      failed: [],
    };
    counts.push(c);
    let afterId: string | undefined;
    for (;;) {
      const page = await listSealedValues(db, column, { afterId, limit: batch });
      for (const { id, value } of page) await resealOne(column, id, value, c);
      if (page.length < batch) break;
      afterId = page.at(-1)!.id;
    }
  }
  return counts;

  async function resealOne(column: SealedColumn, id: string, value: Buffer, c: ColumnCounts) {
    let keyId: string | null = null;
    try {
      keyId = sealer.keyIdOf(value);
      if (!sealer.needsResealing(value)) {
        c.current++;
        return;
      }
      const plaintext = sealer.open(value, column.context);
      try {
        if (dryRun) {
          c.resealed++;
          return;
        }
        const replacement = sealer.seal(plaintext, column.context);
        if (await replaceSealedValue(db, column, id, value, replacement)) c.resealed++;
        else c.changedMeanwhile++;
      } finally {
        plaintext.fill(0);
      }
    } catch (err) {
      if (!(err instanceof SealingError)) throw err;
      c.failed.push({ id, keyId, reason: err.code });
    }
  }
}

/** The table of counts, every value that failed (row id and key id, never its content), and what is next. */
function report(
  io: Io,
  counts: ColumnCounts[],
  {
    activeKeyId,
    dryRun,
    batch,
    failed,
  }: { activeKeyId: string; dryRun: boolean; batch: number; failed: boolean },
) {
  io.out(
    `${dryRun ? 'dry run: would reseal' : 'resealed'} under the active key '${activeKeyId}' (${batch} rows a batch):`,
  );
  io.out(
    formatTable(
      ['COLUMN', dryRun ? 'TO RESEAL' : 'RESEALED', 'ALREADY CURRENT', 'CHANGED MEANWHILE', 'FAILED'],
      counts.map((c) => [
        c.column,
        String(c.resealed),
        String(c.current),
        String(c.changedMeanwhile),
        String(c.failed.length),
      ]),
    ),
  );
  for (const c of counts) {
    for (const f of c.failed) {
      io.out(
        `FAILED ${c.column} row ${f.id}: sealed under key ${f.keyId === null ? '(unreadable header)' : `'${f.keyId}'`}: ${explain(f.reason)}`,
      );
    }
  }
  const total = counts.reduce((n, c) => n + c.resealed, 0);
  const meanwhile = counts.reduce((n, c) => n + c.changedMeanwhile, 0);
  if (meanwhile > 0) io.out(`${meanwhile} values changed while this ran: run reseal again to check them`);
  if (!dryRun && !failed && meanwhile === 0) {
    io.out(
      total === 0
        ? `every stored value is sealed under '${activeKeyId}'`
        : `every stored value is now sealed under '${activeKeyId}': keys other than the active one can be removed from GITOPS_ENCRYPTION_KEYS once every process runs with '${activeKeyId}' first`,
    );
  }
}

function explain(code: string): string {
  switch (code) {
    case 'UNKNOWN_KEY':
      return 'that key is not in GITOPS_ENCRYPTION_KEYS (add it after the active one)';
    case 'AUTHENTICATION_FAILED':
      return 'it does not open with the configured key of that id (wrong key material, or the value was altered)';
    case 'UNSUPPORTED_VERSION':
      return 'unknown sealed format version';
    default:
      return 'malformed sealed value';
  }
}
