/**
 * Named prepared statements for the pool (docs/performance.md, "Named prepared statements"). A statement
 * with parameters that this process has sent before gets a name, so each pooled connection parses and plans
 * its text once instead of on every execution; PostgreSQL keeps choosing custom plans where the parameters
 * matter (its plan cache does this by itself). Kysely builds the same text for the same query shape, so the
 * hot path is a few dozen texts.
 *
 * Bounded: at most MAX_NAMED texts get a name (queries whose text varies, e.g. `in` lists of any length, stop
 * being named once the budget is spent), and at most MAX_TRACKED texts are counted before being named.
 *
 * A schema change (a migration adding a column) makes PostgreSQL refuse a prepared `select *` whose result
 * shape changed ("cached plan must not change result type", 0A000). That text then gets a new name, so every
 * connection prepares it afresh, and the statement is sent once more unnamed; inside a transaction that
 * retry cannot run (the transaction is aborted) and the original error is thrown, as for any failed statement.
 */
import pg from 'pg';

/** Texts with a name, per process. Each costs a parsed statement per pooled connection in PostgreSQL. */
const MAX_NAMED = 300;
/** Texts counted (seen once) before the count is reset. */
const MAX_TRACKED = 2_000;
/** SQLSTATE feature_not_supported, which PostgreSQL raises when a cached plan's result type changed. */
const FEATURE_NOT_SUPPORTED = '0A000';
/** SQLSTATE in_failed_sql_transaction. */
const IN_FAILED_TRANSACTION = '25P02';

/** Which texts are named, and by what (shared by the pool's connections). */
export interface StatementNames {
  /** The name to send `text` under, or undefined to send it unnamed. */
  nameOf(text: string): string | undefined;
  /** The text's plan went stale (a schema change): it gets a new name. */
  renew(text: string): void;
  /** How many texts are named now (tests, metrics). */
  readonly size: number;
}

export function createStatementNames(): StatementNames {
  const names = new Map<string, string>();
  const seen = new Set<string>();
  let counter = 0;
  return {
    nameOf(text) {
      const named = names.get(text);
      if (named !== undefined) return named;
      if (!seen.has(text)) {
        if (seen.size >= MAX_TRACKED) seen.clear();
        seen.add(text);
        return undefined;
      }
      if (names.size >= MAX_NAMED) return undefined;
      seen.delete(text);
      const name = `gitops_${++counter}`;
      names.set(text, name);
      return name;
    },
    renew(text) {
      if (names.has(text)) names.set(text, `gitops_${++counter}`);
    },
    get size() {
      return names.size;
    },
  };
}

function isStalePlan(err: unknown): boolean {
  return (
    (err as { code?: unknown } | null)?.code === FEATURE_NOT_SUPPORTED &&
    /cached plan must not change result type/i.test(String((err as Error).message))
  );
}

/**
 * A pg Client class (the Pool's `Client` option) that sends the parameterised statements Kysely issues
 * (`query(text, values)`) as named statements. Every other form of `query` is passed through unchanged.
 */
export function namingClient(names: StatementNames): typeof pg.Client {
  class NamingClient extends pg.Client {
    // biome-ignore lint/suspicious/noExplicitAny: pg's overloads; only (text, values) is changed.
    override query(...args: any[]): any {
      const [text, values] = args;
      if (args.length !== 2 || typeof text !== 'string' || !Array.isArray(values) || values.length === 0)
        return (super.query as (...a: unknown[]) => unknown)(...args);
      const name = names.nameOf(text);
      if (name === undefined) return super.query(text, values);
      const run = (n: string) => super.query({ name: n, text, values });
      return run(name).catch(async (err: unknown) => {
        if (!isStalePlan(err)) throw err;
        names.renew(text);
        try {
          return await super.query(text, values);
        } catch (retryError) {
          // In a transaction the failed statement aborted it: the caller sees the first error.
          if ((retryError as { code?: unknown } | null)?.code === IN_FAILED_TRANSACTION) throw err;
          throw retryError;
        }
      });
    }
  }
  return NamingClient;
}
