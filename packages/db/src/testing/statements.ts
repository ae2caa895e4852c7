/**
 * The statements a process of this test sends to PostgreSQL, as they go out (tests only): `recordStatements`
 * observes every query of the pg clients whose connection has the given `application_name` (e.g. an agent built
 * in-process), with its text and parameters. Nothing is changed or answered in their place: the statements run
 * on the real server as before. For the costs that do not vary with load (round trips per change).
 */
import pg from 'pg';

export interface RecordedStatement {
  text: string;
  /** The parameters, arrays flattened (what a statement was about: the ids it carries). */
  values: unknown[];
}

export interface StatementRecorder {
  readonly statements: readonly RecordedStatement[];
  /** The statements that carry one of `ids` among their parameters. */
  about(...ids: string[]): RecordedStatement[];
  stop(): void;
}

type QueryArgs = [unknown, unknown?, unknown?];

export function recordStatements(applicationName: string): StatementRecorder {
  const statements: RecordedStatement[] = [];
  const original = pg.Client.prototype.query;
  // biome-ignore lint/suspicious/noExplicitAny: pg's overloaded query, passed through unchanged.
  (pg.Client.prototype as any).query = function query(this: pg.Client, ...args: QueryArgs) {
    const own = (this as unknown as { connectionParameters?: { application_name?: string } })
      .connectionParameters?.application_name;
    if (own === applicationName) {
      const [first, second] = args;
      const config = typeof first === 'object' && first !== null ? (first as pg.QueryConfig) : undefined;
      const text = config ? config.text : String(first);
      const values = (config?.values ?? (Array.isArray(second) ? second : [])) as unknown[];
      statements.push({ text, values: values.flat() });
    }
    return (original as (...a: QueryArgs) => unknown).apply(this, args);
  };
  return {
    statements,
    about: (...ids) => statements.filter((s) => s.values.some((v) => ids.includes(String(v)))),
    stop: () => {
      pg.Client.prototype.query = original;
    },
  };
}
