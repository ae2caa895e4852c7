/**
 * `BENCH_PEER=managed-gitops pnpm bench`: ours and the original (Go managed-gitops) side by side, alternating
 * (ours, original, ours, original, ... `BENCH_PAIRS` pairs, default 2), with the same deployments, namespaces
 * and creates in flight passed to both. Not a benchmark itself (scripts/bench.ts runs `*.bench.ts` only).
 *
 * The original is not part of this repository: its prebuilt backend and cluster-agent, its CRDs and its
 * benchmark live in `../shared/anchor/managed-gitops/` next to the repository (`BENCH_PEER_DIR` overrides the
 * folder). That folder's `env.ts` starts the same infrastructure `pnpm bench` starts (the embedded PostgreSQL
 * with pg_stat_statements, etcd + kube-apiserver + kube-controller-manager, through `@gitops/local-env` with the
 * same flags), installs the original's CRDs, runs both binaries and then its `bench.mjs`, which prints the same
 * JSON figures as `core-pipeline.bench.ts` with `"impl":"go-original"`. It is invoked, never copied. Every run,
 * ours or the original, gets infrastructure of its own, started fresh and torn down after it, so no run
 * inherits another's etcd or database.
 *
 * Prints every figure of every run as its JSON line (with `peer_run: {impl, pair}` added), a `peer_run` line
 * per run, and a final `peer_comparison` line: the medians of each system and the ratios ours / original of the
 * create→Application throughput, the machine's CPU-ms per deployment, the run's own processes' CPU-ms per
 * deployment and each process's share.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { descendants, sleep } from './support.ts';

export const PEERS = ['managed-gitops'] as const;

/** What the original needs in its folder; absent on a user's clone. */
const REQUIRED = ['env.ts', 'bench.mjs', 'backend/backend', 'cluster-agent/cluster-agent', 'crds/original'];

export function peerDir(repoRoot: string): string {
  return resolve(repoRoot, process.env.BENCH_PEER_DIR ?? '../shared/anchor/managed-gitops');
}

/** The files of `dir` the original needs that are missing (empty when it can run). */
export function missingPeerFiles(dir: string): string[] {
  return REQUIRED.filter((f) => !existsSync(resolve(dir, f)));
}

type Figure = Record<string, unknown> & { figure?: string };
export type PeerRun = {
  /** The original's peer runs: ours, go-original; argocd-peer.ts's: argocd-alone, service. */
  impl: 'ours' | 'go-original' | 'argocd-alone' | 'service';
  pair: number;
  exit: number;
  startedAt: string;
  loadavgAtStart: number[];
  figures: Figure[];
  /** Why the run was stopped early (a watchdog found it broken), if it was. */
  aborted?: string;
};

/**
 * Runs `command args` with stdout read line by line: each JSON line is printed again with `peer_run` added and
 * kept; anything else goes to stderr. stderr is passed through.
 */
export async function runCapturing(
  impl: PeerRun['impl'],
  pair: number,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
  /** Polled every 5 s with the child's pid: a reason stops the run (SIGINT) and is kept as `aborted`. */
  watchdog?: (pid: number) => Promise<string | undefined>,
): Promise<PeerRun> {
  const run: PeerRun = {
    impl,
    pair,
    exit: 1,
    startedAt: new Date().toISOString(),
    loadavgAtStart: loadavg().map((x) => Math.round(x * 100) / 100),
    figures: [],
  };
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'inherit'] });
  const onSignal = () => child.kill('SIGINT');
  process.once('SIGINT', onSignal);
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    let parsed: Figure | undefined;
    try {
      parsed = line.startsWith('{') ? (JSON.parse(line) as Figure) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!parsed) {
      process.stderr.write(`${line}\n`);
      return;
    }
    run.figures.push(parsed);
    process.stdout.write(`${JSON.stringify({ ...parsed, peer_run: { impl, pair } })}\n`);
  });
  const exited = new Promise<number>((r) => child.on('exit', (c) => r(c ?? 1)));
  let done = false;
  const watching = (async () => {
    while (watchdog && !done) {
      await Promise.race([sleep(5000), exited]);
      if (done || child.exitCode !== null) return;
      const reason = await watchdog(child.pid as number).catch(() => undefined);
      if (reason) {
        run.aborted = reason;
        process.stderr.write(`[bench] stopping the ${impl} run: ${reason}\n`);
        child.kill('SIGINT');
        return;
      }
    }
  })();
  run.exit = await exited;
  done = true;
  await watching;
  process.off('SIGINT', onSignal);
  return run;
}

/** The loopback ports the original's env.ts gives its backend and agent (metrics, probes); fixed there. */
const PEER_PORTS = [38080, 38081, 38082, 38083];
const portFree = (port: number) =>
  new Promise<boolean>((r) => {
    const server = createServer();
    server.once('error', () => r(false));
    server.listen(port, '127.0.0.1', () => server.close(() => r(true)));
  });

/** Waits (at most `timeoutMs`) until the original's fixed ports are free; returns the ones still taken. */
export async function waitForPeerPorts(timeoutMs = 60_000): Promise<number[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const taken: number[] = [];
    for (const port of PEER_PORTS) if (!(await portFree(port))) taken.push(port);
    if (taken.length === 0 || Date.now() > until) return taken;
    await sleep(1000);
  }
}

/**
 * The original's env.ts does not notice when one of its binaries exits after its probe answered (e.g. its
 * metrics port was taken meanwhile, by any process's outgoing connection): its benchmark would then wait
 * for Applications that never come. Once bench.mjs runs, both binaries must still be there.
 */
export async function peerWatchdog(envPid: number): Promise<string | undefined> {
  const below = await descendants(envPid);
  const cmdline = async (pid: number) =>
    (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')) || '';
  let benchRunning = false;
  for (const { pid } of below) if ((await cmdline(pid)).includes('bench.mjs')) benchRunning = true;
  if (!benchRunning) return undefined;
  const gone = ['backend', 'cluster-agent'].filter((name) => !below.some((p) => p.command === name));
  return gone.length > 0
    ? `the original's ${gone.join(' and ')} exited while its benchmark runs (its log: $TMPDIR/managed-gitops-anchor-${envPid}/logs)`
    : undefined;
}

const figureOf = (run: PeerRun, name: string) => run.figures.find((f) => f.figure === name);
const round1 = (n: number) => Math.round(n * 10) / 10;
const round2 = (n: number) => Math.round(n * 100) / 100;

/** What is compared of one run: throughput, latency, CPU-ms per deployment by process. */
export function summarize(run: PeerRun) {
  const create = figureOf(run, 'create_to_application');
  const cost = figureOf(run, 'cost_per_deployment');
  const cpu = (cost?.cpu_ms_per_deployment ?? {}) as Record<string, number>;
  const { machine, ...parts } = cpu;
  const runTotal = Object.values(parts).reduce((s, v) => s + v, 0);
  return {
    impl: run.impl,
    pair: run.pair,
    exit: run.exit,
    ...(run.aborted ? { aborted: run.aborted } : {}),
    started_at: run.startedAt,
    loadavg_at_start: run.loadavgAtStart,
    throughput_per_s: create?.throughput_per_s as number | undefined,
    client_create_rate_per_s: create?.client_create_rate_per_s as number | undefined,
    p50_ms: create?.p50_ms as number | undefined,
    p99_ms: create?.p99_ms as number | undefined,
    api_writes_per_deployment: cost?.api_writes_per_deployment as number | undefined,
    db_statements_per_deployment: cost?.db_statements_per_deployment as number | undefined,
    cpu_ms_per_deployment: {
      machine,
      run_total: cost ? round1(runTotal) : undefined,
      ...parts,
    } as Record<string, number | undefined>,
  };
}
type Summary = ReturnType<typeof summarize>;

export function median(values: number[]): number | undefined {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function medians(runs: Summary[]) {
  const of = (pick: (s: Summary) => number | undefined) => {
    const m = median(runs.map(pick).filter((v): v is number => v !== undefined));
    return m === undefined ? undefined : round2(m);
  };
  const parts = new Set(runs.flatMap((r) => Object.keys(r.cpu_ms_per_deployment)));
  return {
    runs: runs.length,
    throughput_per_s: of((r) => r.throughput_per_s),
    p50_ms: of((r) => r.p50_ms),
    p99_ms: of((r) => r.p99_ms),
    api_writes_per_deployment: of((r) => r.api_writes_per_deployment),
    db_statements_per_deployment: of((r) => r.db_statements_per_deployment),
    // A process absent from a run used nothing in it.
    cpu_ms_per_deployment: Object.fromEntries(
      [...parts].map((p) => [p, of((r) => r.cpu_ms_per_deployment[p] ?? 0)]),
    ) as Record<string, number | undefined>,
  };
}

const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? undefined : round2(a / b);

/** The final line: each run, the medians of each system, and ours / original. */
export function comparison(
  runs: PeerRun[],
  settings: { peer: string; peerDir: string; deployments: number; namespaces: number; in_flight: number },
) {
  const all = runs.map(summarize);
  const ok = all.filter((s) => s.exit === 0 && s.throughput_per_s !== undefined);
  const ours = medians(ok.filter((s) => s.impl === 'ours'));
  const original = medians(ok.filter((s) => s.impl === 'go-original'));
  const parts = new Set([
    ...Object.keys(ours.cpu_ms_per_deployment),
    ...Object.keys(original.cpu_ms_per_deployment),
  ]);
  return {
    figure: 'peer_comparison',
    cores: cpus().length,
    ...settings,
    pairs: Math.max(0, ...all.map((s) => s.pair)),
    failed_runs: all.filter((s) => !ok.includes(s)).map((s) => `${s.impl} pair ${s.pair} (exit ${s.exit})`),
    runs: all,
    median: { ours, original },
    ratio_ours_to_original: {
      throughput_per_s: ratio(ours.throughput_per_s, original.throughput_per_s),
      p50_ms: ratio(ours.p50_ms, original.p50_ms),
      p99_ms: ratio(ours.p99_ms, original.p99_ms),
      cpu_ms_per_deployment: Object.fromEntries(
        [...parts].map((p) => [
          p,
          ratio(ours.cpu_ms_per_deployment[p] ?? 0, original.cpu_ms_per_deployment[p] ?? 0),
        ]),
      ),
    },
    targets: {
      'throughput ours/original >= 1.0': ((t) => (t === undefined ? undefined : t >= 1))(
        ratio(ours.throughput_per_s, original.throughput_per_s),
      ),
      'machine CPU-ms per deployment ours/original <= 1.0': ((c) => (c === undefined ? undefined : c <= 1))(
        ratio(ours.cpu_ms_per_deployment.machine, original.cpu_ms_per_deployment.machine),
      ),
    },
  };
}
