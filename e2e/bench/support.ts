/**
 * What every benchmark in e2e/bench shares: printing a figure as one JSON line on stdout, percentiles,
 * rounding, and a bounded-concurrency pool. Not a benchmark itself (scripts/bench.ts runs `*.bench.ts` only).
 */
import { cpus } from 'node:os';

export const cores = cpus().length;

/** Prints `{"figure": ..., "cores": ..., ...scale, ...values}` as one line on stdout. */
export function figureEmitter(scale: Record<string, unknown>) {
  return (figure: string, values: Record<string, unknown>) =>
    process.stdout.write(`${JSON.stringify({ figure, cores, ...scale, ...values })}\n`);
}

export const round1 = (n: number) => Math.round(n * 10) / 10;
export const round2 = (n: number) => Math.round(n * 100) / 100;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Nearest-rank percentile; NaN for no values. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

/** p50/p99/max of latencies, rounded to milliseconds. */
export function latencySummary(values: number[]): { p50_ms: number; p99_ms: number; max_ms: number } {
  return {
    p50_ms: Math.round(percentile(values, 50)),
    p99_ms: Math.round(percentile(values, 99)),
    max_ms: Math.round(values.length > 0 ? Math.max(...values) : Number.NaN),
  };
}

/** Runs `work` for every item with at most `limit` at a time. */
export async function pool<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}
