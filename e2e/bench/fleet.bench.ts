/**
 * Fleet benchmark (issue 36; docs/performance.md, "A fleet of instances, measured"). N GitOpsDeployments over
 * N/10 tenant namespaces on I engine instances, each with its own real agent process and a played Argo CD
 * (e2e/fixture/fleet.ts: every sync succeeds at once, with Argo CD's status shapes), one real backend, PostgreSQL
 * and API server. Run through `pnpm bench e2e/bench/fleet.bench.ts`. Prints JSON lines:
 *   fleet_ready       processes started, their RSS
 *   create            N created with BENCH_FLEET_IN_FLIGHT in flight: create → Synced/Healthy throughput and
 *                     p50/p99, CPU and PostgreSQL statements per deployment, sessions open at peak
 *   placement         applications and tenants per instance, max/min
 *   rest              BENCH_FLEET_REST_SECONDS with nothing changing: CPU per second of each part, statements/s,
 *                     API requests/s, sessions open
 *   changes           BENCH_FLEET_CHANGE_PERCENT of the deployments changed per minute (a new source path) for
 *                     BENCH_FLEET_CHANGE_MINUTES: change → Synced on the new path p50/p99, status lag (the
 *                     played Argo CD's write → the GitOpsDeployment showing it) p50/p99, CPU and statements
 *                     per change
 *   drain             the fullest instance drained: time to Drained, to every moved deployment Synced and
 *                     Healthy on its new instance, status gap per tenant (time not Synced/Healthy) p50/p99,
 *                     Applications pruned (the played Argo CDs record every cascading delete)
 *   add_instance      one more instance: time to Available, tenants moved (must be 0)
 *   agents_away       one instance's agent stopped for BENCH_FLEET_AWAY_SECONDS while 1 % of its deployments
 *                     change, then started: time to ready and until every change is Synced
 *   memory            RSS now and at peak of the backend, each agent, the API server, etcd, PostgreSQL
 * Knobs: BENCH_FLEET_DEPLOYMENTS (default 10,000), BENCH_FLEET_INSTANCES (default 4 at 10,000, 10 at 30,000,
 * 20 at 100,000, else N/2,500 rounded up, at least 2), BENCH_FLEET_PHASES (comma list, default all of
 * rest,changes,drain,add,away), BENCH_FLEET_RESYNC_SECONDS (below), BENCH_FLEET_REST_SECONDS (60),
 * BENCH_FLEET_CHANGE_MINUTES (10), BENCH_FLEET_CHANGE_PERCENT (1), BENCH_FLEET_AWAY_SECONDS (300). With
 * BENCH_POSTGRES_MAX_CONNECTIONS (scripts/bench.ts) PostgreSQL takes more sessions than its local 300.
 */
import { readFile } from 'node:fs/promises';
import { enableStatementStatistics, openSessions, statementCalls } from '@gitops/db';
import { createInformer, createMetricsRegistry, createSilentLogger, type KubeObject } from '@gitops/shared';
import { type FleetInstance, startFleet } from '../fixture/fleet.ts';
import { type GitOpsDeployment, mergePatch, paths } from '../fixture/kube.ts';
import {
  apiRequestCounts,
  BENCH_OWN_STATEMENTS,
  cpuSecondsByPart,
  deltas,
  figureEmitter,
  isWrite,
  latencySummary,
  memoryMbByPart,
  pool,
  procStatusMb,
  round1,
  round2,
  sleep,
  topStatements,
} from './support.ts';

const N = Number(process.env.BENCH_FLEET_DEPLOYMENTS ?? 10_000);
const DEFAULT_INSTANCES: Record<number, number> = { 10000: 4, 30000: 10, 100000: 20 };
const I = Number(
  process.env.BENCH_FLEET_INSTANCES ?? DEFAULT_INSTANCES[N] ?? Math.max(2, Math.ceil(N / 2500)),
);
const TENANTS = Math.max(1, Math.round(N / 10));
const IN_FLIGHT = Number(process.env.BENCH_FLEET_IN_FLIGHT ?? 32);
const REST_SECONDS = Number(process.env.BENCH_FLEET_REST_SECONDS ?? 60);
const CHANGE_PERCENT = Number(process.env.BENCH_FLEET_CHANGE_PERCENT ?? 1);
const CHANGE_MINUTES = Number(process.env.BENCH_FLEET_CHANGE_MINUTES ?? 10);
const AWAY_SECONDS = Number(process.env.BENCH_FLEET_AWAY_SECONDS ?? 300);
const PHASES = new Set((process.env.BENCH_FLEET_PHASES ?? 'rest,changes,drain,add,away').split(','));
const CONVERGE_MS = Number(process.env.BENCH_FLEET_CONVERGE_MS ?? 30 * 60_000);

const emit = figureEmitter({ deployments: N, instances: I, tenants: TENANTS });
const log = (line: string) =>
  process.stderr.write(`[fleet] ${new Date().toISOString().slice(11, 19)} ${line}\n`);

interface Tracked {
  namespace: string;
  name: string;
  uid: string;
  instance?: string;
  path?: string;
  synced: boolean;
}

/**
 * BENCH_FLEET_RESYNC_SECONDS: the periodic relist of every informer (backend and agents) this often instead of
 * every 10 min, so that a rest window longer than it measures what a relist costs at this size.
 */
const RESYNC_SECONDS = process.env.BENCH_FLEET_RESYNC_SECONDS;
const resync: Record<string, string> = RESYNC_SECONDS
  ? { GITOPS_RESYNC_SECONDS: RESYNC_SECONDS, RESYNC_INTERVAL: `${RESYNC_SECONDS}s` }
  : {};
const fleet = await startFleet({
  instances: I,
  // The instances' status every 5 s (default 15) so Drained and Available are read close to when they happen.
  backendEnv: { GITOPS_ENGINE_INSTANCE_STATUS_INTERVAL: '5s', ...resync },
  agentEnv: resync,
  argoCdConcurrency: 4,
});
const { system } = fleet;
const statementsCounted = await enableStatementStatistics(system.db);

const pids = () => {
  const out: Record<string, number | undefined> = { backend: system.pid('backend') };
  for (const instance of fleet.instances) out[`agent ${instance.name}`] = system.pid(instance.agent);
  return out;
};
const isAgent = (label: string) => label.startsWith('agent ');
/** CPU seconds per part between two readings, agents summed (and the busiest one), the rest by command. */
function cpuSummary(before: Map<string, number>, after: Map<string, number>, per: number) {
  const moved = deltas(before, after);
  const agents = [...moved].filter(([k]) => isAgent(k)).map(([, v]) => v);
  const of = (k: string) => round2(((moved.get(k) ?? 0) * 1000) / per);
  return {
    backend_ms: of('backend'),
    agents_ms: round2((agents.reduce((a, b) => a + b, 0) * 1000) / per),
    busiest_agent_ms: round2(((agents.length > 0 ? Math.max(...agents) : 0) * 1000) / per),
    api_server_ms: of('kube-apiserver'),
    etcd_ms: of('etcd'),
    postgres_ms: of('postgres'),
    bench_client_ms: of('bench_client'),
    machine_ms: of('machine'),
  };
}
const statementsNow = async () =>
  statementsCounted ? await statementCalls(system.db) : new Map<string, number>();
/** Statements counted in `calls`, the benchmark's own left out. */
const sumOf = (calls: Map<string, number>) =>
  [...calls].filter(([q]) => !BENCH_OWN_STATEMENTS.test(q)).reduce((a, [, n]) => a + n, 0);

/** The most sessions open at once, by `<application> <role>` (roles of instances shortened), while sampling. */
function sessionSampler() {
  let peakTotal = 0;
  let peakByName: Record<string, number> = {};
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const now = await openSessions(system.db).catch(() => ({}) as Record<string, number>);
      const byName: Record<string, number> = {};
      for (const [who, n] of Object.entries(now)) {
        const name = who.replace(/ gitops_ei_\w+$/, ' (an instance role)');
        byName[name] = (byName[name] ?? 0) + n;
      }
      const total = Object.values(now).reduce((a, b) => a + b, 0);
      if (total > peakTotal) {
        peakTotal = total;
        peakByName = byName;
      }
      await sleep(1000);
    }
  })();
  return async () => {
    stopped = true;
    await done;
    return { most_at_once: peakTotal + 1, by_application_then: peakByName, note: '+1: the benchmark own' };
  };
}

// Every deployment as the user reads it, through one watch of the fleet's shard.
const tracked = new Map<string, Tracked>();
const firstSynced = new Map<string, number>();
const createdAt = new Map<string, number>();
/** uid → the path a change asked for and when. */
const changeWanted = new Map<string, { path: string; at: number }>();
const changeLatencies: number[] = [];
const statusLags: number[] = [];
/** While tracking gaps: uid → since when not Synced/Healthy, and total gap so far. */
let gapTracking = false;
const notSyncedSince = new Map<string, number>();
const gapTotal = new Map<string, number>();
const actorOf = new Map<string, FleetInstance>();
const refreshActors = () => {
  for (const instance of fleet.instances) actorOf.set(instance.name, instance);
};
refreshActors();

const informer = createInformer<KubeObject>({
  kubeConfig: system.kc,
  resource: { apiVersion: 'managed-gitops.redhat.com/v1alpha1', plural: 'gitopsdeployments' },
  labelSelector: `managed-gitops.redhat.com/backend-shard=${system.shard}`,
  registry: createMetricsRegistry({ defaultMetrics: false }),
  logger: createSilentLogger(),
  listPageSize: 2000,
  // Only what `observe` reads: at 100,000 deployments the benchmark's own memory stays small.
  transform: (gd) =>
    ({
      apiVersion: gd.apiVersion,
      kind: gd.kind,
      metadata: { name: gd.metadata.name, namespace: gd.metadata.namespace, uid: gd.metadata.uid },
      status: (() => {
        const s = (gd as GitOpsDeployment).status as Record<string, unknown> | undefined;
        return (
          s && {
            sync: s.sync,
            health: s.health,
            engineInstance: s.engineInstance,
            reconciledState: s.reconciledState,
          }
        );
      })(),
    }) as KubeObject,
});
const observe = (object: KubeObject) => {
  const gd = object as GitOpsDeployment;
  const uid = gd.metadata.uid as string;
  const status = gd.status as
    | {
        sync?: { status?: string };
        health?: { status?: string };
        engineInstance?: string;
        reconciledState?: { source?: { path?: string } };
      }
    | undefined;
  const synced = status?.sync?.status === 'Synced' && status.health?.status === 'Healthy';
  const path = status?.reconciledState?.source?.path;
  const now = performance.now();
  tracked.set(uid, {
    namespace: gd.metadata.namespace as string,
    name: gd.metadata.name,
    uid,
    instance: status?.engineInstance,
    path,
    synced,
  });
  if (synced && !firstSynced.has(uid)) firstSynced.set(uid, now);
  const wanted = changeWanted.get(uid);
  if (wanted && synced && path === wanted.path) {
    changeWanted.delete(uid);
    changeLatencies.push(now - wanted.at);
    const written = status?.engineInstance
      ? actorOf.get(status.engineInstance)?.argoCd.syncedAt.get(`gitopsdepl-${uid}`)
      : undefined;
    if (written !== undefined) statusLags.push(now - written);
  }
  if (gapTracking) {
    const since = notSyncedSince.get(uid);
    if (!synced && since === undefined) notSyncedSince.set(uid, now);
    if (synced && since !== undefined) {
      notSyncedSince.delete(uid);
      gapTotal.set(uid, (gapTotal.get(uid) ?? 0) + (now - since));
    }
  }
};
informer.onAdd(observe);
informer.onUpdate((_old, o) => observe(o));
informer.start();
await informer.waitForSync();

const until = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = CONVERGE_MS) => {
  const deadline = Date.now() + timeoutMs;
  let lastLog = Date.now();
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    if (Date.now() - lastLog > 30_000) {
      lastLog = Date.now();
      log(
        `waiting for ${what}: ${[...tracked.values()].filter((t) => t.synced).length}/${tracked.size} synced`,
      );
    }
    await sleep(250);
  }
};
const readPeak = async () => {
  const out: Record<string, number | undefined> = {};
  for (const [label, pid] of Object.entries(pids()))
    out[label] = pid ? await procStatusMb(pid, 'VmHWM') : undefined;
  return out;
};
const memoryNow = async () => Object.fromEntries(await memoryMbByPart(pids()));
const loadAverage = async () => (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');

try {
  emit('fleet_ready', { memory_mb: await memoryNow(), load: await loadAverage() });

  // --- create -----------------------------------------------------------------------------------------
  log(`creating ${TENANTS} tenants and ${N} deployments on ${I} instances`);
  const tenants = await fleet.tenants(TENANTS, 16);
  const work = Array.from({ length: N }, (_, i) => i);
  const spec = (i: number, generation = 0) => ({
    source: { repoURL: `https://github.com/fleet/repo-${i % 50}`, path: `apps/${i}/g${generation}` },
    type: 'automated' as const,
  });
  const cpuBefore = await cpuSecondsByPart(pids());
  const statementsBefore = await statementsNow();
  const apiBefore = await apiRequestCounts();
  const sessions = sessionSampler();
  const start = performance.now();
  const uids: string[] = [];
  await pool(work, IN_FLIGHT, async (i) => {
    const t = performance.now();
    const gd = await system.createGitOpsDeployment(tenants[i % TENANTS] as string, `app-${i}`, spec(i));
    createdAt.set(gd.metadata.uid as string, t);
    uids[i] = gd.metadata.uid as string;
  });
  const createdAll = performance.now();
  log(`created in ${round1((createdAll - start) / 1000)} s; waiting for Synced/Healthy`);
  await until('every deployment Synced/Healthy', () => firstSynced.size >= N);
  const syncedAll = performance.now();
  const cpuAfter = await cpuSecondsByPart(pids());
  const apiAfter = await apiRequestCounts();
  const writes = [...deltas(apiBefore, apiAfter)].filter(([k]) => isWrite(k)).reduce((a, [, v]) => a + v, 0);
  emit('create', {
    client_create_rate_per_s: round1(N / ((createdAll - start) / 1000)),
    throughput_per_s: round1(N / ((syncedAll - start) / 1000)),
    wall_s: round1((syncedAll - start) / 1000),
    create_to_synced_healthy: latencySummary(
      uids.map((u) => (firstSynced.get(u) ?? 0) - (createdAt.get(u) ?? 0)),
    ),
    cpu_per_deployment: cpuSummary(cpuBefore, cpuAfter, N),
    statements_per_deployment: round2((sumOf(await statementsNow()) - sumOf(statementsBefore)) / N),
    top_statements_per_deployment: topStatements(
      statementsBefore,
      await statementsNow(),
      N,
      12,
      BENCH_OWN_STATEMENTS,
    ),
    api_writes_per_deployment: round2(writes / N),
    sessions: await sessions(),
    load: await loadAverage(),
  });

  // --- placement --------------------------------------------------------------------------------------
  const spread = fleet.spread();
  const tenantsOn = new Map<string, Set<string>>();
  for (const t of tracked.values()) {
    if (!t.instance) continue;
    const set = tenantsOn.get(t.instance) ?? new Set<string>();
    set.add(t.namespace);
    tenantsOn.set(t.instance, set);
  }
  const counts = [...spread.values()];
  emit('placement', {
    applications_per_instance: Object.fromEntries(spread),
    tenants_per_instance: Object.fromEntries([...tenantsOn].map(([k, v]) => [k, v.size])),
    max_over_min: round2(Math.max(...counts) / Math.max(1, Math.min(...counts))),
    pruned: fleet.pruned(),
  });

  // --- rest -------------------------------------------------------------------------------------------
  if (PHASES.has('rest')) {
    log(`at rest for ${REST_SECONDS} s`);
    await sleep(10_000); // the last statuses and the instances' status writes of the create settle first
    const restSessions = sessionSampler();
    const c0 = await cpuSecondsByPart(pids());
    const s0 = await statementsNow();
    const a0 = await apiRequestCounts();
    await sleep(REST_SECONDS * 1000);
    const a1 = await apiRequestCounts();
    const requests = Object.fromEntries(
      [...deltas(a0, a1)]
        .map(([k, v]) => [k, round2(v / REST_SECONDS)])
        .filter(([, v]) => (v as number) >= 0.01),
    );
    emit('rest', {
      seconds: REST_SECONDS,
      cpu_per_second: cpuSummary(c0, await cpuSecondsByPart(pids()), REST_SECONDS),
      statements_per_s: round2((sumOf(await statementsNow()) - sumOf(s0)) / REST_SECONDS),
      top_statements_per_s: topStatements(s0, await statementsNow(), REST_SECONDS, 8, BENCH_OWN_STATEMENTS),
      api_requests_per_s: requests,
      sessions: await restSessions(),
    });
  }

  // --- changes ----------------------------------------------------------------------------------------
  let generation = 0;
  const change = async (indexes: number[]) => {
    generation += 1;
    const g = generation;
    await pool(indexes, 16, async (i) => {
      const uid = uids[i] as string;
      const t = tracked.get(uid);
      if (!t) return;
      const wanted = spec(i, g).source.path;
      changeWanted.set(uid, { path: wanted, at: performance.now() });
      await mergePatch(system.kc, paths.gitopsDeployment(t.namespace, t.name), {
        spec: { source: { path: wanted } },
      });
    });
  };
  if (PHASES.has('changes') && CHANGE_MINUTES > 0) {
    const perMinute = Math.max(1, Math.round((N * CHANGE_PERCENT) / 100));
    log(`changing ${perMinute} deployments a minute for ${CHANGE_MINUTES} min`);
    const c0 = await cpuSecondsByPart(pids());
    const s0 = await statementsNow();
    const a0 = await apiRequestCounts();
    const changeSessions = sessionSampler();
    const phaseStart = performance.now();
    // Spread evenly: one batch a second.
    const perSecond = perMinute / 60;
    let done = 0;
    for (let second = 0; second < CHANGE_MINUTES * 60; second++) {
      const due = Math.round((second + 1) * perSecond) - done;
      const batch = Array.from({ length: due }, () => Math.floor(Math.random() * N));
      done += due;
      const tick = performance.now();
      await change(batch);
      await sleep(Math.max(0, 1000 - (performance.now() - tick)));
    }
    await until('every change Synced', () => changeWanted.size === 0, 5 * 60_000);
    const wall = (performance.now() - phaseStart) / 1000;
    const apiWrites = [...deltas(a0, await apiRequestCounts())].filter(([k]) => isWrite(k));
    emit('changes', {
      changed: done,
      per_minute: perMinute,
      wall_s: round1(wall),
      change_to_synced: latencySummary(changeLatencies),
      status_lag: latencySummary(statusLags),
      cpu_per_change: cpuSummary(c0, await cpuSecondsByPart(pids()), done),
      statements_per_change: round2((sumOf(await statementsNow()) - sumOf(s0)) / done),
      top_statements_per_change: topStatements(s0, await statementsNow(), done, 12, BENCH_OWN_STATEMENTS),
      api_writes_per_change: round2(apiWrites.reduce((a, [, v]) => a + v, 0) / done),
      sessions: await changeSessions(),
    });
  }

  // --- drain ------------------------------------------------------------------------------------------
  if (PHASES.has('drain')) {
    const now = fleet.spread();
    const fullest = fleet.instances.reduce((a, b) =>
      (now.get(a.name) ?? 0) >= (now.get(b.name) ?? 0) ? a : b,
    );
    const applications = now.get(fullest.name) ?? 0;
    const moving = [...tracked.values()].filter((t) => t.instance === fullest.name);
    const movingTenants = new Set(moving.map((t) => t.namespace));
    log(`draining ${fullest.name}: ${applications} applications, ${movingTenants.size} tenants`);
    const prunedBefore = fleet.pruned();
    const drainSessions = sessionSampler();
    const c0 = await cpuSecondsByPart(pids());
    const s0 = await statementsNow();
    gapTracking = true;
    notSyncedSince.clear();
    gapTotal.clear();
    const t0 = performance.now();
    await fleet.drain(fullest, CONVERGE_MS);
    const drained = performance.now();
    await until('every moved deployment Synced on its new instance', () =>
      moving.every((m) => {
        const t = tracked.get(m.uid);
        return t?.synced === true && t.instance !== fullest.name;
      }),
    );
    const converged = performance.now();
    gapTracking = false;
    const gapOf = (uid: string) =>
      (gapTotal.get(uid) ?? 0) + (notSyncedSince.has(uid) ? converged - (notSyncedSince.get(uid) ?? 0) : 0);
    const tenantGaps = [...movingTenants].map((ns) =>
      Math.max(0, ...moving.filter((m) => m.namespace === ns).map((m) => gapOf(m.uid))),
    );
    const targets = new Map<string, number>();
    for (const m of moving) {
      const to = tracked.get(m.uid)?.instance ?? '?';
      targets.set(to, (targets.get(to) ?? 0) + 1);
    }
    emit('drain', {
      instance: fullest.name,
      applications,
      tenants: movingTenants.size,
      to_drained_s: round1((drained - t0) / 1000),
      to_all_synced_on_new_instance_s: round1((converged - t0) / 1000),
      status_gap_per_tenant: latencySummary(tenantGaps),
      tenants_with_a_gap: tenantGaps.filter((g) => g > 0).length,
      pruned: fleet.pruned() - prunedBefore,
      left_on_drained_argocd: fullest.argoCd.applications(),
      moved_to: Object.fromEntries(targets),
      cpu_per_moved_application: cpuSummary(c0, await cpuSecondsByPart(pids()), Math.max(1, applications)),
      statements_per_moved_application: round2(
        (sumOf(await statementsNow()) - sumOf(s0)) / Math.max(1, applications),
      ),
      top_statements_per_moved_application: topStatements(
        s0,
        await statementsNow(),
        Math.max(1, applications),
        10,
        BENCH_OWN_STATEMENTS,
      ),
      sessions: await drainSessions(),
    });
  }

  // --- add an instance --------------------------------------------------------------------------------
  if (PHASES.has('add')) {
    const before = new Map([...tracked].map(([uid, t]) => [uid, t.instance]));
    const t0 = performance.now();
    const added = await fleet.addInstance();
    refreshActors();
    const ready = performance.now();
    await until(`${added.name} Available`, async () =>
      Boolean(
        (await fleet.engineInstance(added.name))?.status?.conditions?.some(
          (c) => c.type === 'Available' && c.status === 'True',
        ),
      ),
    );
    const available = performance.now();
    await sleep(30_000);
    const moved = [...tracked].filter(([uid, t]) => before.get(uid) !== t.instance).length;
    emit('add_instance', {
      instance: added.name,
      to_agent_ready_s: round1((ready - t0) / 1000),
      to_available_s: round1((available - t0) / 1000),
      deployments_moved_after_30_s: moved,
      applications_on_it: added.argoCd.applications(),
    });
  }

  // --- an instance's agents away ----------------------------------------------------------------------
  if (PHASES.has('away') && AWAY_SECONDS > 0) {
    const now = fleet.spread();
    const busiest = fleet.instances.reduce((a, b) =>
      (now.get(a.name) ?? 0) >= (now.get(b.name) ?? 0) ? a : b,
    );
    const onIt = uids
      .map((uid, i) => ({ uid, i }))
      .filter(({ uid }) => tracked.get(uid)?.instance === busiest.name);
    const changes = onIt.slice(0, Math.max(1, Math.round(onIt.length / 100))).map(({ i }) => i);
    log(
      `${busiest.name}'s agent away for ${AWAY_SECONDS} s; ${changes.length} of its deployments change meanwhile`,
    );
    await system.kill(busiest.agent);
    changeLatencies.length = 0;
    await change(changes);
    await sleep(AWAY_SECONDS * 1000);
    const t0 = performance.now();
    const c0 = await cpuSecondsByPart(pids());
    await system.start(busiest.agent, resync);
    const ready = performance.now();
    await until('every change made while away Synced', () => changeWanted.size === 0, 10 * 60_000);
    const converged = performance.now();
    emit('agents_away', {
      instance: busiest.name,
      applications: now.get(busiest.name),
      away_s: AWAY_SECONDS,
      changed_while_away: changes.length,
      restart_to_ready_s: round1((ready - t0) / 1000),
      restart_to_all_changes_synced_s: round1((converged - t0) / 1000),
      cpu_from_restart: cpuSummary(c0, await cpuSecondsByPart(pids()), 1),
    });
  }

  emit('memory', {
    now_mb: await memoryNow(),
    peak_mb_services: await readPeak(),
    crashes: system.crashes,
    pruned_total: fleet.pruned(),
  });
} finally {
  await informer.stop();
  await fleet.stop();
}
process.exit(0);
