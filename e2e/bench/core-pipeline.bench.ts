/**
 * Core pipeline benchmark (issue 14; docs/performance.md). Run through `pnpm bench` (scripts/bench.ts starts
 * PostgreSQL and the control plane); the test plays Argo CD. Prints JSON lines:
 *   api_server_ceiling      the API server's own create rate for GitOpsDeployments at the same concurrency,
 *                           objects no controller watches (another backend shard's label): the ceiling
 *   create_to_application   latency p50/p99 from POST GitOpsDeployment to the Application existing, and
 *                           throughput (also as a ratio to the ceiling)
 *   cost_per_deployment     API writes (apiserver_request_total by verb and resource) and DB transactions
 *                           (pg_stat_database) per deployment of that run, until every operation is terminal
 *   paced_create            create→Application latency at a fixed client rate (50/s: no queueing)
 *   status_propagation      latency p50/p99 from Argo CD writing Application status to the GitOpsDeployment showing it
 *   idle                    API requests/s (by verb) and DB transactions/s while nothing changes, with the
 *                           tables read and written meanwhile
 *   peak_rss                VmHWM of the backend and the agent
 *   restart_to_converged    both processes SIGKILLed and restarted with N deployments present
 * Scale: BENCH_SCALE=10k is 10,000 deployments over 1,000 namespaces; the default is 1,000 over 100;
 * BENCH_DEPLOYMENTS / BENCH_NAMESPACES override either.
 * Method: the client creates deployments with a bounded number in flight; arrival times come from informers
 * (watch events), so the figures include watch delivery, which is what a user sees.
 */

import { join } from 'node:path';
import {
  activeSessions,
  countAutovacuumRuns,
  countDatabaseTransactions,
  countUnfinishedOperations,
  enableStatementStatistics,
  statementCalls,
  statementExecMicros,
} from '@gitops/db';
import { kubeRequest as rawKubeRequest } from '@gitops/local-env';
import { createInformer, createMetricsRegistry, createSilentLogger, type KubeObject } from '@gitops/shared';
import { playArgoCd } from '../fixture/argo-cd-actor.ts';
import { create, createGitOpsDeployment, list, paths, remove } from '../fixture/kube.ts';
import { randomSuffix, startSystem } from '../fixture/system.ts';
import { apiServerProfile, startGoProfiles } from './go-profiles.ts';
import {
  apiRequestCounts,
  cpuSecondsByPart,
  deltas,
  figureEmitter,
  isWrite,
  percentile,
  pool,
  procStatusMb,
  round1,
  round2,
  sleep,
  topStatements,
} from './support.ts';

const SCALES: Record<string, { deployments: number; namespaces: number }> = {
  '1k': { deployments: 1000, namespaces: 100 },
  '10k': { deployments: 10_000, namespaces: 1000 },
};
const scale = SCALES[process.env.BENCH_SCALE ?? '1k'];
if (!scale) throw new Error(`BENCH_SCALE must be one of ${Object.keys(SCALES).join(', ')}`);
const DEPLOYMENTS = Number(process.env.BENCH_DEPLOYMENTS ?? scale.deployments);
const NAMESPACES = Number(process.env.BENCH_NAMESPACES ?? scale.namespaces);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 32);
const STATUS_SAMPLES = Number(process.env.BENCH_STATUS_SAMPLES ?? 100);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 30);
const PACED_RATE = Number(process.env.BENCH_PACED_RATE ?? 50);
const PACED_DEPLOYMENTS = Number(process.env.BENCH_PACED_DEPLOYMENTS ?? 500);
/** BENCH_PROFILE_DIR: CPU profiles of the API server over the creates, 5 s each (go-profiles.ts). */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR
  ? join(process.env.BENCH_PROFILE_DIR, `core-pipeline-${new Date().toISOString().replace(/[:.]/g, '-')}`)
  : undefined;
/** Label that assigns a GitOpsDeployment to one backend shard; the ceiling uses a shard nobody serves. */
const BACKEND_SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';

const emit = figureEmitter({ deployments: DEPLOYMENTS, namespaces: NAMESPACES });

const peakRss = async (pid: number | undefined) => (pid ? procStatusMb(pid, 'VmHWM') : undefined);
const currentRss = async (pid: number | undefined) => (pid ? procStatusMb(pid, 'VmRSS') : undefined);

const system = await startSystem();
const statementsCounted = await enableStatementStatistics(system.db);
const rssAtReady = {
  backend_mb: await currentRss(system.pid('backend')),
  cluster_agent_mb: await currentRss(system.pid('cluster-agent')),
};
const argoCd = await playArgoCd(system.kc, system.argoCdNamespace);
const namespaces = Array.from({ length: NAMESPACES }, () => `bench-${randomSuffix()}`);
const spec = (i: number) => ({
  source: { repoURL: `https://github.com/bench/repo-${i % 10}`, path: `apps/${i}` },
  type: 'automated' as const,
});
/** The API server's own create rate for GitOpsDeployments nobody watches (see api_server_ceiling). */
async function measureCeiling(): Promise<number> {
  const ceilingShard = `ceiling-${randomSuffix()}`;
  const ceilingItems = Array.from({ length: DEPLOYMENTS }, (_, i) => i);
  const ceilingStart = performance.now();
  await pool(ceilingItems, IN_FLIGHT, async (i) => {
    await createGitOpsDeployment(system.kc, namespaces[i % NAMESPACES] as string, `ceiling-${i}`, spec(i), {
      labels: { [BACKEND_SHARD_LABEL]: ceilingShard },
    });
  });
  const ceilingRate = DEPLOYMENTS / ((performance.now() - ceilingStart) / 1000);
  emit('api_server_ceiling', {
    method: `POST GitOpsDeployment, ${IN_FLIGHT} in flight, shard label no backend serves (nothing watches them)`,
    create_rate_per_s: round1(ceilingRate),
  });
  await pool(namespaces, 8, async (ns) => {
    await rawKubeRequest(
      JSON.parse(process.env.BENCH_APISERVER_ENDPOINT ?? '{}'),
      'DELETE',
      `${paths.gitopsDeployments(ns)}?labelSelector=${encodeURIComponent(`${BACKEND_SHARD_LABEL}=${ceilingShard}`)}`,
    );
  });
  return ceilingRate;
}

try {
  await pool(namespaces, 8, async (name) => {
    await create(system.kc, '/api/v1/namespaces', { metadata: { name } });
  });

  // The ceiling: the same client creating the same kind at the same concurrency into the same namespaces,
  // labelled for a backend shard no process serves, so no controller receives them (watches are filtered by
  // the API server). The system is running and idle meanwhile. The objects are deleted again afterwards.
  // BENCH_SKIP_CEILING=true leaves it out (the peer comparison: the original's benchmark has no such step).
  const ceilingRate = process.env.BENCH_SKIP_CEILING === 'true' ? undefined : await measureCeiling();
  const ratio = (rate: number) => (ceilingRate === undefined ? null : round2(rate / ceilingRate));

  // Arrival of Applications, seen through a watch.
  const appSeen = new Map<string, number>();
  const apps = createInformer<KubeObject>({
    kubeConfig: system.kc,
    resource: { apiVersion: 'argoproj.io/v1alpha1', plural: 'applications' },
    namespace: system.argoCdNamespace,
    registry: createMetricsRegistry({ defaultMetrics: false }),
    logger: createSilentLogger(),
  });
  const waiters: { count: number; resolve: () => void }[] = [];
  apps.onAdd((app) => {
    if (!appSeen.has(app.metadata.name)) appSeen.set(app.metadata.name, performance.now());
    for (const w of waiters) if (appSeen.size >= w.count) w.resolve();
  });
  const appsSeenAtLeast = (count: number) =>
    new Promise<void>((resolve) => {
      if (appSeen.size >= count) resolve();
      else waiters.push({ count, resolve });
    });
  apps.start();
  await apps.waitForSync();

  const createdAt = new Map<string, number>();
  const uids: { namespace: string; name: string; app: string }[] = [];
  const createOne = async (i: number, prefix: string) => {
    const namespace = namespaces[i % NAMESPACES] as string;
    const name = `${prefix}-${i}`;
    const t = performance.now();
    const gd = await system.createGitOpsDeployment(namespace, name, spec(i));
    const app = `gitopsdepl-${gd.metadata.uid}`;
    createdAt.set(app, t);
    return { namespace, name, app };
  };

  /** Until every operation is terminal and no Operation CR is left: the work of the creates is done. */
  const settled = async () => {
    for (;;) {
      const unfinished = await countUnfinishedOperations(system.db);
      const crs = unfinished === 0 ? await list(system.kc, paths.operations(system.argoCdNamespace)) : [1];
      if (unfinished === 0 && crs.length === 0) return;
      await sleep(200);
    }
  };

  const statementsBeforeCreate = statementsCounted ? await statementCalls(system.db) : undefined;
  const execBeforeCreate = statementsCounted ? await statementExecMicros(system.db) : undefined;
  const apiBeforeCreate = await apiRequestCounts();
  const dbBeforeCreate = await countDatabaseTransactions(system.db);
  const servicePids = { backend: system.pid('backend'), cluster_agent: system.pid('cluster-agent') };
  const cpuBeforeCreate = await cpuSecondsByPart(servicePids);
  const items = Array.from({ length: DEPLOYMENTS }, (_, i) => i);
  const profiles = PROFILE_DIR
    ? await startGoProfiles(PROFILE_DIR, [apiServerProfile(system.kc)], {
        chunkSeconds: 5,
        onError: (name, error) => console.error(`[bench] profile of ${name} stopped: ${String(error)}`),
      })
    : undefined;
  const start = performance.now();
  await pool(items, IN_FLIGHT, async (i) => {
    uids.push(await createOne(i, 'app'));
  });
  const createdAll = performance.now();
  await appsSeenAtLeast(DEPLOYMENTS);
  const end = Math.max(...appSeen.values());
  const latencies = [...createdAt].map(([app, t]) => (appSeen.get(app) ?? Number.NaN) - t);
  const clientRate = DEPLOYMENTS / ((createdAll - start) / 1000);
  const throughput = DEPLOYMENTS / ((end - start) / 1000);
  emit('create_to_application', {
    in_flight: IN_FLIGHT,
    p50_ms: Math.round(percentile(latencies, 50)),
    p99_ms: Math.round(percentile(latencies, 99)),
    max_ms: Math.round(Math.max(...latencies)),
    client_create_rate_per_s: round1(clientRate),
    client_create_rate_to_ceiling: ratio(clientRate),
    throughput_per_s: round1(throughput),
    throughput_to_ceiling: ratio(throughput),
  });

  await settled();
  await sleep(3000); // follow-up reconciles (owner re-enqueued by the operation's state change)
  const profileFiles = await profiles?.stop();
  if (profileFiles) console.error(`[bench] API server profiles of the creates: ${profileFiles.join(' ')}`);
  const cpuCreate = deltas(cpuBeforeCreate, await cpuSecondsByPart(servicePids));
  const apiCreate = deltas(apiBeforeCreate, await apiRequestCounts());
  const dbCreate = (await countDatabaseTransactions(system.db)) - dbBeforeCreate;
  const statementsCreate = statementsBeforeCreate
    ? topStatements(statementsBeforeCreate, await statementCalls(system.db), DEPLOYMENTS, 25)
    : {};
  const execCreate = execBeforeCreate
    ? topStatements(execBeforeCreate, await statementExecMicros(system.db), DEPLOYMENTS, 8)
    : {};
  const writesByResource: Record<string, number> = {};
  let systemWrites = 0;
  for (const [key, value] of apiCreate) {
    if (!isWrite(key)) continue;
    writesByResource[key] = round2(value / DEPLOYMENTS);
    // The client's own creates and kube-controller-manager's leader lease are not the system's work.
    if (key !== 'POST gitopsdeployments' && key !== 'PUT leases') systemWrites += value;
  }
  emit('cost_per_deployment', {
    method:
      'apiserver_request_total and pg_stat_database (xact_commit + xact_rollback) deltas from the first create until every operation is terminal, no Operation CR is left, and 3 s more; divided by the deployments',
    api_writes_per_deployment: round2(systemWrites / DEPLOYMENTS),
    api_writes_by_verb_and_resource: writesByResource,
    api_reads_per_deployment: round2(
      [...apiCreate].filter(([key]) => !isWrite(key)).reduce((sum, [, v]) => sum + v, 0) / DEPLOYMENTS,
    ),
    api_reads_by_verb_and_resource: Object.fromEntries(
      [...apiCreate].filter(([key]) => !isWrite(key)).map(([key, v]) => [key, round2(v / DEPLOYMENTS)]),
    ),
    db_transactions_per_deployment: round2(dbCreate / DEPLOYMENTS),
    db_statements_per_deployment: round2(Object.values(statementsCreate).reduce((sum, v) => sum + v, 0)),
    db_top_statements_per_deployment: statementsCreate,
    // PostgreSQL's execution time of those statements, µs per deployment (not its parsing, planning, commits
    // or sessions: the rest of its CPU).
    db_exec_us_per_deployment: round1(Object.values(execCreate).reduce((sum, v) => sum + v, 0)),
    db_top_statements_exec_us_per_deployment: execCreate,
    cpu_ms_per_deployment: Object.fromEntries(
      [...cpuCreate]
        .sort(([, a], [, b]) => b - a)
        .map(([part, seconds]) => [part, round1((seconds * 1000) / DEPLOYMENTS)]),
    ),
  });

  // Latency without queueing: a fixed client rate (open loop: each create starts at its time).
  if (PACED_DEPLOYMENTS > 0) {
    const pacedApps: string[] = [];
    const pacedStart = performance.now();
    await Promise.all(
      Array.from({ length: PACED_DEPLOYMENTS }, async (_, k) => {
        const due = pacedStart + (k * 1000) / PACED_RATE;
        await sleep(Math.max(0, due - performance.now()));
        pacedApps.push((await createOne(DEPLOYMENTS + k, 'paced')).app);
      }),
    );
    const pacedCreated = performance.now();
    await appsSeenAtLeast(DEPLOYMENTS + PACED_DEPLOYMENTS);
    const paced = pacedApps.map((app) => (appSeen.get(app) ?? Number.NaN) - (createdAt.get(app) ?? 0));
    emit('paced_create', {
      target_rate_per_s: PACED_RATE,
      achieved_client_rate_per_s: round1(PACED_DEPLOYMENTS / ((pacedCreated - pacedStart) / 1000)),
      created: PACED_DEPLOYMENTS,
      present_before: DEPLOYMENTS,
      p50_ms: Math.round(percentile(paced, 50)),
      p99_ms: Math.round(percentile(paced, 99)),
      max_ms: Math.round(Math.max(...paced)),
    });
    await settled();
  }

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
  // Let the work caused by the status burst drain first (the burst alone is ~100 status patches), and let
  // each LISTEN session run its health check (every 30 s) once: PostgreSQL counts a transaction for every
  // batch of notifications a listening session reads, but publishes those counts in pg_stat_database only
  // when that session next runs a statement. Without that, the load's notifications land in the idle window
  // as bursts of hundreds of "transactions" that no statement explains (docs/performance.md, "Idle").
  await sleep(40_000);
  const dbStats = () => countDatabaseTransactions(system.db);
  const statementsBefore = statementsCounted ? await statementCalls(system.db) : undefined;
  const apiBefore = await apiRequestCounts();
  const autovacuumBefore = await countAutovacuumRuns(system.db);
  const dbBefore = await dbStats();
  // Once a second: transactions committed meanwhile, and who holds one open right now (finds the bursts).
  const idleSlices: { transactions: number; open: Record<string, number> }[] = [];
  let previous = dbBefore;
  for (let second = 0; second < IDLE_SECONDS; second++) {
    await sleep(1000);
    const open = await activeSessions(system.db);
    const now = await dbStats();
    idleSlices.push({ transactions: now - previous - 2, open });
    previous = now;
  }
  const apiAfter = await apiRequestCounts();
  const statementsAfter = statementsCounted ? await statementCalls(system.db) : undefined;
  const perVerb: Record<string, number> = {};
  for (const [key, delta] of deltas(apiBefore, apiAfter)) perVerb[key] = round2(delta / IDLE_SECONDS);
  const writes = Object.entries(perVerb)
    .filter(([key]) => isWrite(key) && key !== 'PUT leases')
    .reduce((sum, [, value]) => sum + value, 0);
  // What the database ran meanwhile (pg_stat_statements; this script's own counting queries excluded).
  const statements =
    statementsBefore && statementsAfter
      ? topStatements(statementsBefore, statementsAfter, IDLE_SECONDS, 10)
      : {};
  emit('idle', {
    seconds: IDLE_SECONDS,
    api_requests_per_s_by_verb_and_resource: perVerb,
    api_writes_per_s: round2(writes),
    note: "apiserver_request_total deltas for the whole API server (includes this script's 2 metric scrapes); api_writes_per_s leaves out kube-controller-manager's leader lease (PUT leases)",
    db_transactions_per_s: round2(idleSlices.reduce((sum, x) => sum + x.transactions, 0) / IDLE_SECONDS),
    db_statements_per_s: statements,
    // Autovacuum's transactions count in pg_stat_database but are not ours (pg_stat_statements leaves them out).
    autovacuum_runs: (await countAutovacuumRuns(system.db)) - autovacuumBefore,
    db_busiest_seconds: [...idleSlices].sort((x, y) => y.transactions - x.transactions).slice(0, 3),
  });
  emit('peak_rss', {
    backend_mb: await peakRss(system.pid('backend')),
    cluster_agent_mb: await peakRss(system.pid('cluster-agent')),
    rss_now: {
      backend_mb: await currentRss(system.pid('backend')),
      cluster_agent_mb: await currentRss(system.pid('cluster-agent')),
    },
    rss_at_ready_before_any_deployment: rssAtReady,
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
