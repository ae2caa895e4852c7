/**
 * `BENCH_PEER=argocd pnpm bench e2e/bench/argocd.bench.ts` (issue 34): the service against Argo CD alone, the
 * same benchmark in its two modes (BENCH_ARGOCD_MODE alone, then service; `BENCH_PAIRS` pairs, default 2),
 * each run on infrastructure of its own (PostgreSQL, etcd, API server, Argo CD started fresh), with the same
 * Argo CD build and settings, repository, tenants' AppProjects, deployments and creates in flight. Not a
 * benchmark itself (scripts/bench.ts runs `*.bench.ts` only).
 *
 * Each run's figures are printed with `peer_run` added (peer.ts runCapturing), then one `argocd_peer_run` line
 * per run and a final `argocd_peer_comparison` line: the medians of each mode and the ratios service / alone
 * (throughput, p50, p99, CPU-ms per change of the run's processes and of the whole machine, API writes per
 * change, also as a difference), and the service's status lag.
 */
import { cpus } from 'node:os';
import { median, type PeerRun } from './peer.ts';

type Figure = Record<string, unknown>;
const round1 = (n: number) => Math.round(n * 10) / 10;
const round2 = (n: number) => Math.round(n * 100) / 100;
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const record = (v: unknown) => (v && typeof v === 'object' ? (v as Record<string, number>) : {});
const total = (byKey: Record<string, number>, leaveOut: (key: string) => boolean = () => false) =>
  round1(
    Object.entries(byKey)
      .filter(([key]) => !leaveOut(key))
      .reduce((t, [, v]) => t + v, 0),
  );

/** What is compared of one run. */
export function summarizeArgoCdRun(run: PeerRun) {
  const create = run.figures.find((f) => f.figure === 'argocd_create_to_synced_healthy') as
    | Figure
    | undefined;
  const refresh = run.figures.find((f) => f.figure === 'argocd_periodic_refresh') as Figure | undefined;
  const deployments = num(create?.deployments) ?? Number.NaN;
  const writes = record(create?.api_writes_per_deployment_by_verb_and_resource);
  const lag = create?.status_lag as { p50_ms?: number; p99_ms?: number } | undefined;
  const load = create?.load_average_1m as { before?: number; after?: number } | undefined;
  return {
    mode: run.impl === 'argocd-alone' ? 'alone' : 'service',
    pair: run.pair,
    exit: run.exit,
    started_at: run.startedAt,
    load_average_1m: load,
    converged: num(create?.converged),
    throughput_per_s: num(create?.throughput_per_s),
    p50_ms: num(create?.p50_ms),
    p99_ms: num(create?.p99_ms),
    create_to_application_p50_ms: num((create?.create_to_application as Figure | undefined)?.p50_ms),
    /** CPU of the run's own processes (Argo CD, services, API server, etcd, PostgreSQL, the client). */
    run_cpu_ms_per_change: create
      ? round1(((num(create.cpu_seconds_total) ?? 0) * 1000) / deployments)
      : undefined,
    /** Every core's busy time, other programs on the machine included. */
    machine_cpu_ms_per_change: create
      ? round1(((num(create.machine_busy_seconds) ?? 0) * 1000) / deployments)
      : undefined,
    cpu_ms_per_change_by_process: record(create?.cpu_ms_per_deployment_by_process),
    api_writes_per_change: num(create?.api_writes_per_deployment),
    api_writes_per_change_by_verb_and_resource: writes,
    status_writes_per_change: round2(
      Object.entries(writes)
        .filter(([key]) => key.endsWith(' gitopsdeployments/status'))
        .reduce((t, [, v]) => t + v, 0),
    ),
    api_reads_per_change: num(create?.api_reads_per_deployment),
    events_per_change_by_component_and_reason: record(create?.events_per_deployment_by_component_and_reason),
    db_statements_per_change: num(create?.db_statements_per_deployment),
    status_lag_p50_ms: num(lag?.p50_ms),
    status_lag_p99_ms: num(lag?.p99_ms),
    ...(refresh
      ? {
          at_rest_cpu_ms_per_s: total(
            record(refresh.at_rest_cpu_ms_per_s_by_process),
            (k) => k === 'benchmark client',
          ),
          at_rest_db_statements_per_s: num(refresh.at_rest_db_statements_per_s),
          refresh_cpu_ms_per_refresh: total(
            record(refresh.round_cpu_ms_per_refresh_by_process),
            (k) => k === 'benchmark client',
          ),
          refresh_api_writes_per_refresh: total(record(refresh.api_writes_per_refresh_by_verb_and_resource)),
          refresh_db_statements_per_refresh: num(refresh.round_db_statements_per_refresh),
        }
      : {}),
  };
}
type Summary = ReturnType<typeof summarizeArgoCdRun>;

/** The numeric fields compared, medians per mode. */
const COMPARED = [
  'throughput_per_s',
  'p50_ms',
  'p99_ms',
  'create_to_application_p50_ms',
  'run_cpu_ms_per_change',
  'machine_cpu_ms_per_change',
  'api_writes_per_change',
  'status_writes_per_change',
  'api_reads_per_change',
  'db_statements_per_change',
  'status_lag_p50_ms',
  'status_lag_p99_ms',
  'at_rest_cpu_ms_per_s',
  'at_rest_db_statements_per_s',
  'refresh_cpu_ms_per_refresh',
  'refresh_api_writes_per_refresh',
  'refresh_db_statements_per_refresh',
] as const;

type Medians = Record<(typeof COMPARED)[number], number | undefined> & {
  runs: number;
  cpu_ms_per_change_by_process: Record<string, number>;
};

function medians(runs: Summary[]): Medians {
  const out: Record<string, number | undefined> = {};
  for (const field of COMPARED) {
    const m = median(
      runs.map((r) => r[field as keyof Summary]).filter((v): v is number => typeof v === 'number'),
    );
    out[field] = m === undefined ? undefined : round2(m);
  }
  const processes = new Set(runs.flatMap((r) => Object.keys(r.cpu_ms_per_change_by_process)));
  const byProcess = Object.fromEntries(
    [...processes].map((p) => [
      p,
      round1(median(runs.map((r) => r.cpu_ms_per_change_by_process[p] ?? 0)) ?? 0),
    ]),
  );
  return {
    ...(out as Record<(typeof COMPARED)[number], number | undefined>),
    runs: runs.length,
    cpu_ms_per_change_by_process: byProcess,
  };
}

const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? undefined : round2(a / b);

/** The final line: each run, the medians of each mode, service / alone, and the targets of issue 34. */
export function argoCdComparison(
  runs: PeerRun[],
  settings: { deployments: number; namespaces: number; in_flight: number },
) {
  const all = runs.map(summarizeArgoCdRun);
  const ok = all.filter((s) => s.exit === 0 && s.throughput_per_s !== undefined);
  const alone = medians(ok.filter((s) => s.mode === 'alone'));
  const service = medians(ok.filter((s) => s.mode === 'service'));
  const r = (field: (typeof COMPARED)[number]) => ratio(service[field], alone[field]);
  const writesDifference =
    service.api_writes_per_change === undefined || alone.api_writes_per_change === undefined
      ? undefined
      : round2(service.api_writes_per_change - alone.api_writes_per_change);
  const p50Difference =
    service.p50_ms === undefined || alone.p50_ms === undefined ? undefined : service.p50_ms - alone.p50_ms;
  return {
    figure: 'argocd_peer_comparison',
    cores: cpus().length,
    ...settings,
    pairs: Math.max(0, ...all.map((s) => s.pair)),
    failed_runs: all.filter((s) => !ok.includes(s)).map((s) => `${s.mode} pair ${s.pair} (exit ${s.exit})`),
    median: { alone, service },
    ratio_service_to_alone: {
      throughput_per_s: r('throughput_per_s'),
      p50_ms: r('p50_ms'),
      p99_ms: r('p99_ms'),
      run_cpu_ms_per_change: r('run_cpu_ms_per_change'),
      machine_cpu_ms_per_change: r('machine_cpu_ms_per_change'),
      api_writes_per_change: r('api_writes_per_change'),
      api_reads_per_change: r('api_reads_per_change'),
      at_rest_cpu_ms_per_s: r('at_rest_cpu_ms_per_s'),
      refresh_cpu_ms_per_refresh: r('refresh_cpu_ms_per_refresh'),
    },
    difference_service_minus_alone: {
      api_writes_per_change: writesDifference,
      p50_ms: p50Difference,
    },
    status_lag_ms: { p50: service.status_lag_p50_ms, p99: service.status_lag_p99_ms },
    targets: {
      'run CPU-ms per change service/alone <= 1.15': ((c) => (c === undefined ? undefined : c <= 1.15))(
        r('run_cpu_ms_per_change'),
      ),
      'p50 <= alone + 1 s': p50Difference === undefined ? undefined : p50Difference <= 1000,
      'throughput service/alone >= 0.9': ((t) => (t === undefined ? undefined : t >= 0.9))(
        r('throughput_per_s'),
      ),
      'API writes per change <= alone + 2':
        writesDifference === undefined ? undefined : writesDifference <= 2,
      'status lag p99 <= 1 s':
        service.status_lag_p99_ms === undefined ? undefined : service.status_lag_p99_ms <= 1000,
    },
  };
}
