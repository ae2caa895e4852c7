/**
 * `pnpm bench`: runs the benchmarks in e2e/bench/ against a local PostgreSQL and control plane started here
 * (all but the fleet benchmark, which runs only when named). Figures are printed as JSON lines (never
 * pass/fail). `pnpm bench <file>` runs one benchmark.
 *
 * `BENCH_PEER=managed-gitops pnpm bench`: the core pipeline, ours and the original alternating, `BENCH_PAIRS`
 * pairs (default 2), with a final `peer_comparison` line (e2e/bench/peer.ts). Needs the original's files in
 * `../shared/anchor/managed-gitops/` (or `BENCH_PEER_DIR`); without them it says `skipped: ...` and exits 0.
 *
 * `BENCH_PEER=argocd pnpm bench [e2e/bench/argocd.bench.ts]`: the real Argo CD benchmark, Argo CD alone and
 * the service alternating (alone, service, ... `BENCH_PAIRS` pairs, default 2), each on fresh infrastructure,
 * with a final `argocd_peer_comparison` line (e2e/bench/argocd-peer.ts). BENCH_ARGOCD_* knobs apply to both;
 * BENCH_ARGOCD_REFRESH defaults to true here (the cost at rest and per periodic refresh).
 */
import { spawn } from 'node:child_process';
import { glob } from 'node:fs/promises';
import { resolve } from 'node:path';
import { prepareTemplateDatabase } from '@gitops/db/testing';
import { repoRoot, startControlPlane, startPostgres } from '@gitops/local-env';
import { argoCdComparison, summarizeArgoCdRun } from '../e2e/bench/argocd-peer.ts';
import {
  comparison,
  missingPeerFiles,
  PEERS,
  type PeerRun,
  peerDir,
  peerWatchdog,
  runCapturing,
  summarize,
  waitForPeerPorts,
} from '../e2e/bench/peer.ts';

const say = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/**
 * Starts PostgreSQL and the control plane, runs `run(file, env)` for each file one after the other with the
 * environment a benchmark needs, tears both down. Returns the first non-zero exit code, else 0.
 */
async function withInfrastructure(
  files: string[],
  run: (file: string, env: NodeJS.ProcessEnv) => Promise<number>,
  options: { forceEmbedded: boolean },
): Promise<number> {
  const [postgres, controlPlane] = await Promise.all([
    startPostgres({
      forceEmbedded: options.forceEmbedded,
      statementStatistics: true,
      // BENCH_POSTGRES_MAX_CONNECTIONS: room for what many instances' pools open (the fleet benchmark).
      ...(process.env.BENCH_POSTGRES_MAX_CONNECTIONS
        ? { maxConnections: Number(process.env.BENCH_POSTGRES_MAX_CONNECTIONS) }
        : {}),
    }),
    startControlPlane({ log: (l) => (l.startsWith('[') ? undefined : say(l)) }),
  ]);
  const teardown = async () => {
    await controlPlane.stop().catch(() => {});
    await postgres.stop().catch(() => {});
  };
  const onSigint = () => void teardown().then(() => process.exit(130));
  process.on('SIGINT', onSigint);
  let code = 0;
  try {
    const template = `gitops_template_${process.pid}`;
    await prepareTemplateDatabase(postgres.url, template);
    const env = {
      ...process.env,
      KUBECONFIG: controlPlane.kubeconfigPath,
      GITOPS_TEST_DATABASE_URL: postgres.url,
      GITOPS_TEST_TEMPLATE_DATABASE: template,
      BENCH_APISERVER_ENDPOINT: JSON.stringify(controlPlane.endpoint),
      E2E_LOG_LEVEL: process.env.E2E_LOG_LEVEL ?? 'warn',
    };
    for (const file of files.sort()) {
      say(`running ${file}`);
      const exit = await run(file, env);
      if (exit !== 0 && code === 0) code = exit;
    }
  } finally {
    process.off('SIGINT', onSigint);
    await teardown();
  }
  return code;
}

const runInheriting = (file: string, env: NodeJS.ProcessEnv) =>
  new Promise<number>((r) => {
    const child = spawn(process.execPath, [file], { stdio: 'inherit', env, cwd: repoRoot });
    child.on('exit', (c) => r(c ?? 1));
  });

/** BENCH_PEER: ours and the original alternating on fresh infrastructure each, then the comparison. */
async function runWithPeer(peer: string): Promise<number> {
  if (!(PEERS as readonly string[]).includes(peer)) {
    say(`BENCH_PEER must be one of ${PEERS.join(', ')} (got ${peer})`);
    return 2;
  }
  const dir = peerDir(repoRoot);
  const missing = missingPeerFiles(dir);
  if (missing.length > 0) {
    say(`skipped: BENCH_PEER=${peer} needs the original's files in ${dir} (missing: ${missing.join(', ')})`);
    return 0;
  }
  // The same scale for both, resolved here as core-pipeline.bench.ts resolves it.
  const scales: Record<string, [number, number]> = { '1k': [1000, 100], '10k': [10_000, 1000] };
  const scale = scales[process.env.BENCH_SCALE ?? '1k'];
  if (!scale) throw new Error(`BENCH_SCALE must be one of ${Object.keys(scales).join(', ')}`);
  const settings = {
    peer,
    peerDir: dir,
    deployments: Number(process.env.BENCH_DEPLOYMENTS ?? scale[0]),
    namespaces: Number(process.env.BENCH_NAMESPACES ?? scale[1]),
    in_flight: Number(process.env.BENCH_IN_FLIGHT ?? 32),
  };
  const pairs = Number(process.env.BENCH_PAIRS ?? 2);
  const shared = {
    BENCH_DEPLOYMENTS: String(settings.deployments),
    BENCH_NAMESPACES: String(settings.namespaces),
    BENCH_IN_FLIGHT: String(settings.in_flight),
    // Both idle windows equally long (the original's bench.mjs defaults to 60 s, ours to 30 s).
    BENCH_IDLE_SECONDS: process.env.BENCH_IDLE_SECONDS ?? '30',
    // The original's benchmark does neither; both come after the compared window in ours.
    BENCH_PACED_DEPLOYMENTS: process.env.BENCH_PACED_DEPLOYMENTS ?? '0',
    BENCH_SKIP_RESTART: process.env.BENCH_SKIP_RESTART ?? 'true',
    // Nor does it measure the API server's ceiling first: in ours that step (N creates and their
    // DELETECOLLECTION just before the window) leaves garbage collection and etcd work inside the window.
    BENCH_SKIP_CEILING: process.env.BENCH_SKIP_CEILING ?? 'true',
  };
  // Long enough for the original at 10,000 (its default is 900 s).
  const arrivalTimeout = String(Math.max(900, Math.ceil(settings.deployments / 5)));
  say(
    `peer ${peer} from ${dir}: ${pairs} pair(s) of ours then the original, ${settings.deployments} deployments over ${settings.namespaces} namespaces, ${settings.in_flight} in flight`,
  );
  const ourFile = resolve(repoRoot, 'e2e/bench/core-pipeline.bench.ts');
  const runs: PeerRun[] = [];
  const report = (run: PeerRun) => {
    runs.push(run);
    process.stdout.write(`${JSON.stringify({ figure: 'peer_run', ...settings, ...summarize(run) })}\n`);
  };
  for (let pair = 1; pair <= pairs; pair++) {
    say(`pair ${pair}/${pairs}: ours`);
    let ours: PeerRun | undefined;
    const exit = await withInfrastructure(
      [ourFile],
      async (file, env) => {
        ours = await runCapturing('ours', pair, process.execPath, [file], {
          cwd: repoRoot,
          env: { ...env, ...shared },
        });
        return ours.exit;
      },
      // The original's env.ts always uses the embedded PostgreSQL: so does ours here.
      { forceEmbedded: true },
    ).catch((e: unknown) => {
      say(`ours failed: ${e instanceof Error ? e.stack : String(e)}`);
      return 1;
    });
    if (ours) report({ ...ours, exit: ours.exit || exit });
    // A run whose binary died at start (see peerWatchdog) is stopped and run again, at most twice more.
    for (let attempt = 1; attempt <= 3; attempt++) {
      say(`pair ${pair}/${pairs}: the original (${peer})${attempt > 1 ? `, attempt ${attempt}` : ''}`);
      const taken = await waitForPeerPorts();
      if (taken.length > 0)
        say(`ports ${taken.join(', ')} still taken after 60 s; starting the original anyway`);
      const original = await runCapturing(
        'go-original',
        pair,
        process.execPath,
        [resolve(dir, 'env.ts'), 'bench'],
        {
          cwd: repoRoot,
          env: { ...process.env, ...shared, BENCH_ARRIVAL_TIMEOUT_S: arrivalTimeout, OURS: repoRoot },
        },
        peerWatchdog,
      );
      if (original.aborted && attempt < 3) continue;
      report(original);
      break;
    }
  }
  const result = comparison(runs, settings);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return result.failed_runs.length > 0 ? 1 : 0;
}

/** BENCH_PEER=argocd: Argo CD alone and the service alternating, each on fresh infrastructure. */
async function runWithArgoCdPeer(file: string): Promise<number> {
  const pairs = Number(process.env.BENCH_PAIRS ?? 2);
  const settings = {
    deployments: Number(process.env.BENCH_ARGOCD_DEPLOYMENTS ?? 200),
    namespaces: Number(process.env.BENCH_ARGOCD_NAMESPACES ?? 20),
    in_flight: Number(process.env.BENCH_ARGOCD_IN_FLIGHT ?? 16),
  };
  const shared = { BENCH_ARGOCD_REFRESH: process.env.BENCH_ARGOCD_REFRESH ?? 'true' };
  say(
    `peer argocd: ${pairs} pair(s) of Argo CD alone then the service, ${settings.deployments} deployments over ${settings.namespaces} namespaces, ${settings.in_flight} in flight`,
  );
  const runs: PeerRun[] = [];
  for (let pair = 1; pair <= pairs; pair++) {
    for (const impl of ['argocd-alone', 'service'] as const) {
      say(`pair ${pair}/${pairs}: ${impl}`);
      let run: PeerRun | undefined;
      const exit = await withInfrastructure(
        [file],
        async (f, env) => {
          run = await runCapturing(impl, pair, process.execPath, [f], {
            cwd: repoRoot,
            env: { ...env, ...shared, BENCH_ARGOCD_MODE: impl === 'argocd-alone' ? 'alone' : 'service' },
          });
          return run.exit;
        },
        // Each run its own PostgreSQL, as the original's peer runs.
        { forceEmbedded: true },
      ).catch((e: unknown) => {
        say(`${impl} failed: ${e instanceof Error ? e.stack : String(e)}`);
        return 1;
      });
      if (!run) continue;
      const done: PeerRun = { ...run, exit: run.exit || exit };
      runs.push(done);
      process.stdout.write(
        `${JSON.stringify({ figure: 'argocd_peer_run', ...settings, ...summarizeArgoCdRun(done) })}\n`,
      );
    }
  }
  const result = argoCdComparison(runs, settings);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return result.failed_runs.length > 0 ? 1 : 0;
}

let code: number;
if (process.env.BENCH_PEER === 'argocd') {
  code = await runWithArgoCdPeer(
    resolve(process.cwd(), process.argv[2] ?? resolve(repoRoot, 'e2e/bench/argocd.bench.ts')),
  );
} else if (process.env.BENCH_PEER) {
  code = await runWithPeer(process.env.BENCH_PEER);
} else {
  const files: string[] = process.argv.slice(2).map((f) => resolve(process.cwd(), f));
  // Without a file: every benchmark but the fleet's (e2e/bench/fleet.bench.ts: 25 min and more; name it to run it).
  if (files.length === 0)
    for await (const f of glob('e2e/bench/*.bench.ts', { cwd: repoRoot }))
      if (!f.endsWith('fleet.bench.ts')) files.push(resolve(repoRoot, f));
  code = await withInfrastructure(files, runInheriting, { forceEmbedded: !process.env.DATABASE_URL });
}
process.exit(code);
