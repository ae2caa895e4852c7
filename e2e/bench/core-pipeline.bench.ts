/**
 * Core pipeline benchmark (issue: 1,000 GitOpsDeployments over 100 namespaces, the test playing Argo CD).
 * Run through `pnpm bench` (scripts/bench.ts starts PostgreSQL and the control plane). Prints JSON lines:
 *   create_to_application   latency p50/p99 from POST GitOpsDeployment to the Application existing, and throughput
 *   status_propagation      latency p50/p99 from Argo CD writing Application status to the GitOpsDeployment showing it
 *   idle                    API requests/s (by verb) and DB transactions/s while nothing changes
 *   peak_rss                VmHWM of the backend and the agent
 *   restart_to_converged    both processes SIGKILLed and restarted with N deployments present
 * Method: the client creates deployments with a bounded number in flight; arrival times come from informers
 * (watch events), so the figures include watch delivery, which is what a user sees.
 */

import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { countDatabaseTransactions, countUnfinishedOperations } from '@gitops/db';
import { kubeRequest as rawKubeRequest } from '@gitops/local-env';
import { createInformer, createMetricsRegistry, createSilentLogger, type KubeObject } from '@gitops/shared';
import { playArgoCd } from '../fixture/argo-cd-actor.ts';
import { create, paths, remove } from '../fixture/kube.ts';
import { randomSuffix, startSystem } from '../fixture/system.ts';

const DEPLOYMENTS = Number(process.env.BENCH_DEPLOYMENTS ?? 1000);
const NAMESPACES = Number(process.env.BENCH_NAMESPACES ?? 100);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 32);
const STATUS_SAMPLES = Number(process.env.BENCH_STATUS_SAMPLES ?? 100);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 30);
const cores = cpus().length;

const emit = (figure: string, values: Record<string, unknown>) =>
  process.stdout.write(
    `${JSON.stringify({ figure, cores, deployments: DEPLOYMENTS, namespaces: NAMESPACES, ...values })}\n`,
  );

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

async function pool<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

async function apiRequestCounts(): Promise<Map<string, number>> {
  const endpoint = JSON.parse(process.env.BENCH_APISERVER_ENDPOINT ?? '{}');
  const res = await rawKubeRequest(endpoint, 'GET', '/metrics');
  const counts = new Map<string, number>();
  for (const line of String(res.body).split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? '?';
    const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? '';
    const key = `${verb} ${resource}`.trim();
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    counts.set(key, (counts.get(key) ?? 0) + value);
  }
  return counts;
}

async function peakRss(pid: number | undefined): Promise<number | undefined> {
  if (!pid) return undefined;
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
  return Math.round(kb / 1024);
}

const system = await startSystem();
const argoCd = await playArgoCd(system.kc, system.argoCdNamespace);
const namespaces = Array.from({ length: NAMESPACES }, () => `bench-${randomSuffix()}`);
try {
  await pool(namespaces, 8, async (name) => {
    await create(system.kc, '/api/v1/namespaces', { metadata: { name } });
  });

  // Arrival of Applications, seen through a watch.
  const appSeen = new Map<string, number>();
  const apps = createInformer<KubeObject>({
    kubeConfig: system.kc,
    resource: { apiVersion: 'argoproj.io/v1alpha1', plural: 'applications' },
    namespace: system.argoCdNamespace,
    registry: createMetricsRegistry({ defaultMetrics: false }),
    logger: createSilentLogger(),
  });
  let allArrived: () => void = () => {};
  const arrived = new Promise<void>((r) => {
    allArrived = r;
  });
  apps.onAdd((app) => {
    if (!appSeen.has(app.metadata.name)) appSeen.set(app.metadata.name, performance.now());
    if (appSeen.size >= DEPLOYMENTS) allArrived();
  });
  apps.start();
  await apps.waitForSync();

  const createdAt = new Map<string, number>();
  const uids: { namespace: string; name: string; app: string }[] = [];
  const items = Array.from({ length: DEPLOYMENTS }, (_, i) => i);
  const start = performance.now();
  await pool(items, IN_FLIGHT, async (i) => {
    const namespace = namespaces[i % NAMESPACES] as string;
    const name = `app-${i}`;
    const t = performance.now();
    const gd = await system.createGitOpsDeployment(namespace, name, {
      source: { repoURL: `https://github.com/bench/repo-${i % 10}`, path: `apps/${i}` },
      type: 'automated',
    });
    const app = `gitopsdepl-${gd.metadata.uid}`;
    createdAt.set(app, t);
    uids.push({ namespace, name, app });
  });
  const createdAll = performance.now();
  await arrived;
  const end = Math.max(...appSeen.values());
  const latencies = [...createdAt].map(([app, t]) => (appSeen.get(app) ?? Number.NaN) - t);
  emit('create_to_application', {
    p50_ms: Math.round(percentile(latencies, 50)),
    p99_ms: Math.round(percentile(latencies, 99)),
    max_ms: Math.round(Math.max(...latencies)),
    client_create_rate_per_s: Math.round((DEPLOYMENTS / (createdAll - start)) * 1000 * 10) / 10,
    throughput_per_s: Math.round((DEPLOYMENTS / (end - start)) * 1000 * 10) / 10,
  });

  // Status propagation: Argo CD (the test) writes a new revision; wait for it on the GitOpsDeployment.
  const statusSeen = new Map<string, number>();
  const expected = new Map<string, string>();
  const gds = createInformer<KubeObject>({
    kubeConfig: system.kc,
    resource: { apiVersion: 'managed-gitops.redhat.com/v1alpha1', plural: 'gitopsdeployments' },
    registry: createMetricsRegistry({ defaultMetrics: false }),
    logger: createSilentLogger(),
  });
  let allStatus: () => void = () => {};
  const statusDone = new Promise<void>((r) => {
    allStatus = r;
  });
  const sample = uids.slice(0, STATUS_SAMPLES);
  gds.onUpdate((_old, gd) => {
    const key = `${gd.metadata.namespace}/${gd.metadata.name}`;
    const revision = (gd.status as { sync?: { revision?: string } } | undefined)?.sync?.revision;
    if (revision && expected.get(key) === revision && !statusSeen.has(key)) {
      statusSeen.set(key, performance.now());
      if (statusSeen.size >= sample.length) allStatus();
    }
  });
  gds.start();
  await gds.waitForSync();
  // Latency: one change at a time, each waited for, so no change queues behind another (what one user sees).
  const statusWrittenAt = new Map<string, number>();
  for (const { namespace, name, app } of sample) {
    const key = `${namespace}/${name}`;
    const revision = `rev-${randomSuffix()}`;
    expected.set(key, revision);
    const seen = new Promise<void>((resolveSeen) => {
      const check = setInterval(() => {
        if (statusSeen.has(key)) {
          clearInterval(check);
          resolveSeen();
        }
      }, 1);
    });
    statusWrittenAt.set(key, performance.now());
    await argoCd.reportStatus(app, { sync: { status: 'Synced', revision }, health: { status: 'Healthy' } });
    await seen;
  }
  await statusDone;
  const statusLatencies = [...statusWrittenAt].map(([key, t]) => (statusSeen.get(key) ?? Number.NaN) - t);
  emit('status_propagation', {
    samples: sample.length,
    method: 'sequential: each Application status write waited for on the GitOpsDeployment before the next',
    p50_ms: Math.round(percentile(statusLatencies, 50)),
    p99_ms: Math.round(percentile(statusLatencies, 99)),
    max_ms: Math.round(Math.max(...statusLatencies)),
  });

  // Burst: every sampled Application changes at once (8 writers); time until all are visible.
  statusSeen.clear();
  const burstStart = performance.now();
  let burstDone: () => void = () => {};
  const burstVisible = new Promise<void>((r) => {
    burstDone = r;
  });
  allStatus = burstDone;
  await pool(sample, 8, async ({ namespace, name, app }) => {
    const revision = `burst-${randomSuffix()}`;
    expected.set(`${namespace}/${name}`, revision);
    await argoCd.reportStatus(app, { sync: { status: 'Synced', revision }, health: { status: 'Healthy' } });
  });
  await burstVisible;
  emit('status_burst', {
    changes: sample.length,
    all_visible_ms: Math.round(performance.now() - burstStart),
    rate_per_s: Math.round((sample.length / (performance.now() - burstStart)) * 1000 * 10) / 10,
  });
  await gds.stop();
  await apps.stop();

  // Idle: nothing changes for IDLE_SECONDS; count what the two processes still do.
  // Let the work caused by the status burst drain first (the burst alone is ~100 status patches).
  await new Promise((r) => setTimeout(r, 20_000));
  const dbStats = () => countDatabaseTransactions(system.db);
  const apiBefore = await apiRequestCounts();
  const dbBefore = await dbStats();
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const apiAfter = await apiRequestCounts();
  const dbAfter = await dbStats();
  const perVerb: Record<string, number> = {};
  for (const [verb, value] of apiAfter) {
    const delta = value - (apiBefore.get(verb) ?? 0);
    if (delta > 0) perVerb[verb] = Math.round((delta / IDLE_SECONDS) * 100) / 100;
  }
  const writes = Object.entries(perVerb)
    .filter(([key]) => /^(POST|PUT|PATCH|DELETE)\b/.test(key))
    .reduce((sum, [, value]) => sum + value, 0);
  emit('idle', {
    seconds: IDLE_SECONDS,
    api_requests_per_s_by_verb_and_resource: perVerb,
    api_writes_per_s: writes,
    note: "apiserver_request_total deltas for the whole API server (includes this script's 2 metric scrapes and kube-controller-manager)",
    db_transactions_per_s: Math.round(((dbAfter - dbBefore - 2) / IDLE_SECONDS) * 100) / 100,
  });
  emit('peak_rss', {
    backend_mb: await peakRss(system.pid('backend')),
    cluster_agent_mb: await peakRss(system.pid('cluster-agent')),
  });

  // BENCH_SKIP_RESTART=true keeps the first processes to the end (e.g. to CPU-profile them).
  if (process.env.BENCH_SKIP_RESTART !== 'true') {
    // Restart both with N deployments present: time until both are ready again and every operation is terminal.
    await system.kill('backend');
    await system.kill('cluster-agent');
    const restartAt = performance.now();
    await Promise.all([system.start('backend'), system.start('cluster-agent')]);
    const readyAt = performance.now();
    for (;;) {
      if ((await countUnfinishedOperations(system.db)) === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    emit('restart_to_converged', {
      ready_ms: Math.round(readyAt - restartAt),
      operations_terminal_ms: Math.round(performance.now() - restartAt),
    });
  }
} finally {
  await argoCd.stop();
  await system.stop();
  await pool(namespaces, 8, async (name) => remove(system.kc, paths.namespace(name)));
}
