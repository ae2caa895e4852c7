/**
 * The benchmarks' statement figures (e2e/bench/support.ts, `topStatements`): what `db_statements_per_deployment`
 * and docs/performance.md are made of.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { topStatements } from '../bench/support.ts';

describe('statements per unit, from two pg_stat_statements readings', () => {
  test('statements whose first 160 characters are the same are added up, not one written over the other', () => {
    const shared = `WITH unfinished AS (${'x'.repeat(200)})`;
    const before = new Map([
      [`${shared} SELECT 1`, 10],
      [`${shared} SELECT 2`, 0],
      ['select now()', 5],
    ]);
    const after = new Map([
      [`${shared} SELECT 1`, 110],
      [`${shared} SELECT 2`, 2],
      ['select now()', 55],
      ['select count(*) from pg_stat_statements', 7],
    ]);
    const top = topStatements(before, after, 100, 25);
    assert.deepEqual(top, { [shared.slice(0, 160)]: 1.02, 'select now()': 0.5 });
    const total = Object.values(top).reduce((sum, v) => sum + v, 0);
    assert.equal(Math.round(total * 100) / 100, 1.52);
  });

  test("the benchmark's own statements are left out, a count(*) of the service's is not", () => {
    const after = new Map([
      ['select count(*) as "n" from "operation" where "state" in ($1, $2)', 40],
      ['select coalesce(sum(autovacuum_count + autoanalyze_count), $1) as runs from pg_stat_all_tables', 3],
      [
        'select "ei".* from "engine_instance" as "ei" where "ei"."cordoned" = $1 order by (select count(*) as "n" from "application" as "a" where "a"."engine_instance_id" = "ei"."id")',
        10,
      ],
    ]);
    assert.deepEqual(Object.values(topStatements(new Map(), after, 100, 25)), [0.1]);
  });

  test('past the limit, the rest is one figure', () => {
    const after = new Map(['a', 'b', 'c'].map((q, i) => [q, (i + 1) * 10]));
    assert.deepEqual(topStatements(new Map(), after, 10, 1), { c: 3, '(all others)': 3 });
  });
});
