/**
 * What every benchmark in e2e/bench shares: printing a figure as one JSON line on stdout, percentiles,
 * rounding, a bounded-concurrency pool, the API server's request counters, and the CPU time of the processes a run started. Not a benchmark itself (scripts/bench.ts runs `*.bench.ts` only).
 */
import { readdir, readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { kubeRequest } from '@gitops/local-env';

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
    // reduce, not Math.max(...values): a spread of 100,000 arguments can overflow the stack.
    max_ms: Math.round(values.length > 0 ? values.reduce((a, b) => Math.max(a, b)) : Number.NaN),
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

/**
 * CPU time a process has used so far (user + system), including that of its children it has waited for
 * (e.g. the `git` runs of argocd-repo-server), in seconds; undefined once it is gone.
 */
export async function cpuSeconds(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at field 3 (state); utime, stime, cutime
    // and cstime are fields 14 to 17.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
    return ticks / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on every Linux architecture Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

/** Every process below `root` (children, their children...), with its command name and its parent's pid. */
export async function descendants(root: number): Promise<{ pid: number; command: string; parent: number }[]> {
  const parentOf = new Map<number, { parent: number; command: string }>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => undefined);
    if (!stat) continue;
    const command = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    parentOf.set(Number(entry), { parent, command });
  }
  const out: { pid: number; command: string; parent: number }[] = [];
  const below = new Set([root]);
  // Parents have smaller pids unless the pid counter wrapped; repeat until nothing is added to be safe.
  for (let added = true; added; ) {
    added = false;
    for (const [pid, { parent, command }] of parentOf) {
      if (below.has(parent) && !below.has(pid)) {
        below.add(pid);
        out.push({ pid, command, parent });
        added = true;
      }
    }
  }
  return out;
}

/**
 * CPU seconds used so far by each part of this run: every process scripts/bench.ts started (PostgreSQL and
 * its backends, etcd, the API server, kube-controller-manager: its descendants, labelled by command name),
 * the processes in `named` (label → pid, e.g. the two services) and this script (`bench_client`), plus
 * `machine`, every core's busy time (/proc/stat): `machine` minus the parts is what other programs used.
 */
export async function cpuSecondsByPart(
  named: Record<string, number | undefined>,
): Promise<Map<string, number>> {
  const out = await sumByPart(named, (pid) => cpuSeconds(pid));
  out.set('machine', await machineBusySeconds());
  return out;
}

/**
 * `read` of every process scripts/bench.ts started and of this script, summed by part: the label `named` gives
 * a pid (`bench_client` for this script), else the process's command name.
 */
async function sumByPart(
  named: Record<string, number | undefined>,
  read: (pid: number, command: string) => Promise<number | undefined>,
): Promise<Map<string, number>> {
  const labelOf = new Map<number, string>([[process.pid, 'bench_client']]);
  for (const [label, pid] of Object.entries(named)) if (pid) labelOf.set(pid, label);
  const out = new Map<string, number>();
  for (const { pid, command } of await descendants(process.ppid)) {
    const label = labelOf.get(pid) ?? command;
    const value = await read(pid, command);
    if (value !== undefined) out.set(label, (out.get(label) ?? 0) + value);
  }
  return out;
}

/** Every core's busy time so far (/proc/stat: user, nice, system, irq, softirq), in seconds. */
export async function machineBusySeconds(): Promise<number> {
  const cpu = (await readFile('/proc/stat', 'utf8')).split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number);
  return [0, 1, 2, 5, 6].reduce((sum, i) => sum + (cpu?.[i] ?? 0), 0) / CLOCK_TICKS_PER_SECOND;
}

/**
 * apiserver_request_total of the API server scripts/bench.ts started, summed by `<VERB> <resource>` (with
 * `subresource`: `<VERB> <resource>/<subresource>` where there is one, e.g. `PATCH gitopsdeployments/status`).
 * The counter has no client label: who wrote is told by the resource, or by comparing runs.
 */
export async function apiRequestCounts(
  options: { subresource?: boolean } = {},
): Promise<Map<string, number>> {
  const endpoint = JSON.parse(process.env.BENCH_APISERVER_ENDPOINT ?? '{}');
  const res = await kubeRequest(endpoint, 'GET', '/metrics');
  const counts = new Map<string, number>();
  for (const line of String(res.body).split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? '?';
    const resource = /[{,]resource="([^"]*)"/.exec(line)?.[1] ?? '';
    const subresource = options.subresource ? /subresource="([^"]+)"/.exec(line)?.[1] : undefined;
    const key = `${verb} ${resource}${subresource ? `/${subresource}` : ''}`.trim();
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    counts.set(key, (counts.get(key) ?? 0) + value);
  }
  return counts;
}

/** True for a `<VERB> <resource>` key of a request that writes. */
export const isWrite = (key: string) =>
  /^(POST|PUT|PATCH|DELETE|DELETECOLLECTION|APPLY|CREATE|UPDATE)\b/.test(key);

/** Counter deltas between two scrapes, only the ones that moved. */
export function deltas(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of after) {
    const delta = value - (before.get(key) ?? 0);
    if (delta > 0) out.set(key, delta);
  }
  return out;
}

/** A /proc/<pid>/status field in MB (VmRSS, VmHWM, RssAnon); undefined once the process is gone. */
export async function procStatusMb(
  pid: number,
  field: 'VmRSS' | 'VmHWM' | 'RssAnon',
): Promise<number | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  const kb = status && Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
  return kb ? Math.round(kb / 1024) : undefined;
}

/**
 * Memory of each part of the run now, in MB, labelled as cpuSecondsByPart labels them: VmRSS of each process
 * (the processes in `named`, etcd, the API server...), except PostgreSQL, whose processes share its buffers: its
 * figure is the RssAnon (memory of its own) of all its processes summed, without the shared buffers.
 */
export function memoryMbByPart(named: Record<string, number | undefined>): Promise<Map<string, number>> {
  return sumByPart(named, (pid, command) => procStatusMb(pid, command === 'postgres' ? 'RssAnon' : 'VmRSS'));
}

/** The benchmarks' own statements (statistics, sessions), left out of the statement figures. */
export const BENCH_OWN_STATEMENTS = /pg_stat_statements|pg_stat_database|pg_stat_activity/;

/**
 * The core pipeline benchmark's own statements: the statistics and sessions it reads, the autovacuum runs it
 * counts, and its count of unfinished operations while it waits (`countUnfinishedOperations`). Only these: a
 * `count(*)` of the service's (the least-loaded instance of a new tenant's placement) is counted.
 */
export const CORE_BENCH_OWN_STATEMENTS =
  /pg_stat_statements|pg_stat_database|pg_stat_activity|pg_stat_all_tables|^select count\(\*\) as "n" from "operation" where "state" in /;

/**
 * The statements run between two pg_stat_statements reads, most frequent first, per `unit`; those matching
 * `own` (by default `CORE_BENCH_OWN_STATEMENTS`) left out.
 */
export function topStatements(
  before: Map<string, number>,
  after: Map<string, number>,
  unit: number,
  limit: number,
  own: RegExp = CORE_BENCH_OWN_STATEMENTS,
): Record<string, number> {
  // Keyed by the first 160 characters: statements that share them (the CTEs of one builder) are added up,
  // never one written over another, so the figures always sum to every statement counted.
  const byPrefix = new Map<string, number>();
  for (const [query, calls] of deltas(before, after)) {
    if (own.test(query)) continue;
    const key = query.slice(0, 160);
    byPrefix.set(key, (byPrefix.get(key) ?? 0) + calls);
  }
  const out: Record<string, number> = {};
  let rest = 0;
  for (const [i, [key, calls]] of [...byPrefix].sort((x, y) => y[1] - x[1]).entries()) {
    if (i < limit) out[key] = round2(calls / unit);
    else rest += calls;
  }
  if (rest > 0) out['(all others)'] = round2(rest / unit);
  return out;
}
