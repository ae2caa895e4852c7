/**
 * Real Argo CD benchmark (issue 14; docs/performance.md, "Real Argo CD"). Run through `pnpm bench`
 * (scripts/bench.ts starts PostgreSQL and the control plane). Starts a real Argo CD the way tier 3b does
 * (redis, argocd-repo-server, argocd-application-controller from the cached build), the backend and the
 * cluster-agent as processes, and one local Git repository with one ConfigMap per deployment path (a
 * ConfigMap is Healthy as soon as it exists: the local API server has no node). Once one warm-up deployment
 * has converged (Argo CD loads its cluster cache on its first Application), creates BENCH_ARGOCD_DEPLOYMENTS
 * automated GitOpsDeployments over BENCH_ARGOCD_NAMESPACES namespaces with
 * BENCH_ARGOCD_IN_FLIGHT creates at a time and prints one JSON line:
 *   argocd_create_to_synced_healthy   POST GitOpsDeployment → its status shows sync Synced at the repository's
 *                                     head and health Healthy; p50/p99/max and throughput, plus the
 *                                     intermediate steps (the Application exists; Argo CD wrote Synced/Healthy
 *                                     on it)
 * Every arrival time comes from a watch (informers on GitOpsDeployments and Applications), never from polling.
 * BENCH_ARGOCD=false skips it. Everything it starts is stopped and removed again, also on failure.
 */
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtArgoCdBinary, createGitRepo, manifest, startArgoCd } from '@gitops/local-env';
import {
  createInformer,
  createMetricsRegistry,
  createSilentLogger,
  HttpMethod,
  kubeRequest,
} from '@gitops/shared';
import {
  type ArgoApplication,
  create,
  type GitOpsDeployment,
  list,
  mergePatch,
  paths,
  remove,
} from '../fixture/kube.ts';
import { randomSuffix, startSystem } from '../fixture/system.ts';
import {
  apiRequestCounts,
  cores,
  cpuSeconds,
  deltas,
  descendants,
  figureEmitter,
  isWrite,
  latencySummary,
  pool,
  round1,
  round2,
  sleep,
} from './support.ts';

const say = (line: string) => process.stderr.write(`[bench argocd] ${line}\n`);

if (process.env.BENCH_ARGOCD === 'false') {
  say('skipped (BENCH_ARGOCD=false)');
  process.exit(0);
}
const binary = await builtArgoCdBinary();
if (!binary) {
  say('skipped: the argocd binary is not built (pnpm build:argocd builds it once, about 15 min on 2 cores)');
  process.exit(0);
}

const DEPLOYMENTS = Number(process.env.BENCH_ARGOCD_DEPLOYMENTS ?? 200);
const NAMESPACES = Number(process.env.BENCH_ARGOCD_NAMESPACES ?? 20);
const IN_FLIGHT = Number(process.env.BENCH_ARGOCD_IN_FLIGHT ?? 16);
/** Argo CD's periodic refresh (ARGOCD_RECONCILIATION_TIMEOUT); 180 s is Argo CD's own default. */
const RECONCILIATION_SECONDS = Number(process.env.BENCH_ARGOCD_RECONCILIATION_SECONDS ?? 180);
/** How long to wait for every deployment to converge before printing what converged and failing. */
const TIMEOUT_SECONDS = Number(process.env.BENCH_ARGOCD_TIMEOUT_SECONDS ?? 480);
const emit = figureEmitter({ deployments: DEPLOYMENTS, namespaces: NAMESPACES });

/** Cleanup steps, run last-registered first, each one also when an earlier one failed. */
const cleanups: { what: string; run: () => Promise<void> }[] = [];
const tempDirs: string[] = [];
// Interrupted (Ctrl-C reaches the whole process group): the exit hook of @gitops/local-env kills every
// process started here; the temporary folders go too. The API server and database go with scripts/bench.ts.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  });
}

const isSyncedHealthy = (status: { sync?: { status?: string }; health?: { status?: string } } | undefined) =>
  status?.sync?.status === 'Synced' && status.health?.status === 'Healthy';

let failed = false;
try {
  const system = await startSystem({ start: [] });
  cleanups.push({ what: 'stop the backend and agent, drop the database', run: () => system.stop() });
  const gitRoot = await mkdtemp(join(tmpdir(), 'bench-argocd-git-'));
  const argoWorkDir = await mkdtemp(join(tmpdir(), 'bench-argocd-work-'));
  tempDirs.push(gitRoot, argoWorkDir);
  cleanups.push({
    what: 'remove the temporary folders',
    run: async () => {
      for (const dir of tempDirs) await rm(dir, { recursive: true, force: true });
    },
  });

  // One repository, one path per deployment (and one for the warm-up), each with one ConfigMap.
  const repo = await createGitRepo(gitRoot, 'bench', {
    'apps/warmup/configmap.yaml': manifest.configMap('bench-warmup', { deployment: 'warmup' }),
    ...Object.fromEntries(
      Array.from({ length: DEPLOYMENTS }, (_, i) => [
        `apps/${i}/configmap.yaml`,
        manifest.configMap(`bench-${i}`, { deployment: String(i) }),
      ]),
    ),
  });
  const head = await repo.head();

  const namespaces = Array.from({ length: NAMESPACES }, () => `bench-argocd-${randomSuffix()}`);
  const created: string[] = [];
  cleanups.push({
    what: 'delete the tenant namespaces',
    run: () => pool(created, 8, (ns) => remove(system.kc, paths.namespace(ns))),
  });
  await pool(namespaces, 8, async (name) => {
    await create(system.kc, '/api/v1/namespaces', { metadata: { name } });
    created.push(name);
  });

  const argoCd = await startArgoCd({
    binary,
    kubeconfigPath: process.env.KUBECONFIG ?? '',
    namespace: system.argoCdNamespace,
    workDir: argoWorkDir,
    reconciliationSeconds: RECONCILIATION_SECONDS,
    onLine: (line) => {
      if (process.env.E2E_VERBOSE) process.stderr.write(`[argocd]${line}\n`);
    },
  });
  cleanups.push({ what: 'stop Argo CD', run: () => argoCd.stop() });
  // Runs while Argo CD and both services still run: deleting the GitOpsDeployments makes the system delete
  // the Applications and Argo CD prune the ConfigMaps and drop its finalizer. Whatever Application is left
  // after that (a failed run) loses its finalizer, so the Argo CD namespace can go.
  cleanups.push({
    what: 'delete the GitOpsDeployments and their Applications',
    run: async () => {
      await pool(created, 8, async (ns) => {
        await kubeRequest(system.kc, { method: HttpMethod.DELETE, path: paths.gitopsDeployments(ns) });
      });
      const applications = paths.applications(system.argoCdNamespace);
      const deadline = performance.now() + 180_000;
      while ((await list(system.kc, applications)).length > 0 && performance.now() < deadline)
        await sleep(1000);
      const left = await list<ArgoApplication>(system.kc, applications);
      if (left.length > 0) say(`${left.length} Applications left after 180 s: removing their finalizers`);
      await pool(left, 8, async (app) => {
        await mergePatch(system.kc, paths.application(system.argoCdNamespace, app.metadata.name), {
          metadata: { finalizers: null },
        }).catch(() => {});
      });
    },
  });
  await system.start('backend');
  await system.start('cluster-agent');

  // Arrivals, from watches only: the Application exists; Argo CD wrote Synced/Healthy on it; the
  // GitOpsDeployment shows Synced (at head) and Healthy.
  const appSeen = new Map<string, number>();
  const appSyncedHealthy = new Map<string, number>();
  const deploymentSyncedHealthy = new Map<string, number>();
  let allConverged: () => void = () => {};
  const converged = new Promise<void>((resolve) => {
    allConverged = resolve;
  });
  const informerBase = {
    kubeConfig: system.kc,
    registry: createMetricsRegistry({ defaultMetrics: false }),
    logger: createSilentLogger(),
  };
  const apps = createInformer<ArgoApplication>({
    ...informerBase,
    resource: { apiVersion: 'argoproj.io/v1alpha1', plural: 'applications' },
    namespace: system.argoCdNamespace,
  });
  /** The warm-up deployment's Application, left out of the figures. */
  const ignoredApps = new Set<string>();
  const onApp = (app: ArgoApplication) => {
    if (ignoredApps.has(app.metadata.name)) return;
    const now = performance.now();
    if (!appSeen.has(app.metadata.name)) appSeen.set(app.metadata.name, now);
    const status = app.status as Parameters<typeof isSyncedHealthy>[0];
    if (!appSyncedHealthy.has(app.metadata.name) && isSyncedHealthy(status))
      appSyncedHealthy.set(app.metadata.name, now);
  };
  apps.onAdd(onApp);
  apps.onUpdate((_old, app) => onApp(app));
  const deployments = createInformer<GitOpsDeployment>({
    ...informerBase,
    resource: { apiVersion: 'managed-gitops.redhat.com/v1alpha1', plural: 'gitopsdeployments' },
    labelSelector: `managed-gitops.redhat.com/backend-shard=${system.shard}`,
  });
  // Conditions any deployment ever showed on the way (e.g. Argo CD's InvalidSpecError): deployments per condition.
  const conditionsSeen = new Map<string, Set<string>>();
  const warmupNamespace = namespaces[0] as string;
  let warmedUp: () => void = () => {};
  const warmup = new Promise<void>((resolve) => {
    warmedUp = resolve;
  });
  const onDeployment = (gd: GitOpsDeployment) => {
    const key = `${gd.metadata.namespace}/${gd.metadata.name}`;
    for (const c of gd.status?.conditions ?? []) {
      const name = `${c.type}/${c.reason}`;
      conditionsSeen.set(name, (conditionsSeen.get(name) ?? new Set()).add(key));
    }
    const done = isSyncedHealthy(gd.status) && gd.status?.sync?.revision === head;
    if (gd.metadata.name === 'warmup') {
      if (done) warmedUp();
      return;
    }
    if (deploymentSyncedHealthy.has(key)) return;
    if (isSyncedHealthy(gd.status) && gd.status?.sync?.revision === head) {
      deploymentSyncedHealthy.set(key, performance.now());
      if (deploymentSyncedHealthy.size >= DEPLOYMENTS) allConverged();
    }
  };
  deployments.onAdd(onDeployment);
  deployments.onUpdate((_old, gd) => onDeployment(gd));
  cleanups.push({
    what: 'stop the watches',
    run: async () => {
      await apps.stop();
      await deployments.stop();
    },
  });
  apps.start();
  deployments.start();
  await apps.waitForSync();
  await deployments.waitForSync();

  // Warm-up: one deployment converged first. Argo CD loads its cache of the cluster on its first
  // Application, and a running installation has long done that; the measured creates start warm.
  const warmupStart = performance.now();
  const warmupGd = await system.createGitOpsDeployment(warmupNamespace, 'warmup', {
    source: { repoURL: repo.fileUrl, path: 'apps/warmup' },
    type: 'automated',
  });
  ignoredApps.add(`gitopsdepl-${warmupGd.metadata.uid}`);
  appSeen.clear();
  appSyncedHealthy.clear();
  let warmupTimedOut = false;
  await Promise.race([
    warmup,
    sleep(180_000).then(() => {
      warmupTimedOut = true;
    }),
  ]);
  if (warmupTimedOut) throw new Error('the warm-up deployment was not Synced/Healthy within 180 s');
  const warmupMs = Math.round(performance.now() - warmupStart);
  say(`warm-up deployment Synced/Healthy after ${warmupMs} ms`);

  // CPU time of every process of the run (the control plane and PostgreSQL are scripts/bench.ts's children),
  // from here to the last GitOpsDeployment converged: where the time goes.
  const named = new Map<number, string>([[process.pid, 'benchmark client']]);
  for (const service of ['backend', 'cluster-agent'] as const) {
    const pid = system.pid(service);
    if (pid) named.set(pid, service);
  }
  for (const p of argoCd.processes) if (p.child.pid) named.set(p.child.pid, p.name);
  const cpuNow = async () => {
    const byPid = new Map<number, { label: string; seconds: number }>();
    for (const { pid, command } of await descendants(process.ppid)) {
      const seconds = await cpuSeconds(pid);
      if (seconds !== undefined) byPid.set(pid, { label: named.get(pid) ?? command, seconds });
    }
    return byPid;
  };
  const loadBefore = loadavg()[0] ?? 0;
  const cpuBefore = await cpuNow();
  const apiBefore = await apiRequestCounts();

  // Create them, IN_FLIGHT at a time.
  const createdAt = new Map<string, number>();
  const applicationOf = new Map<string, string>();
  const start = performance.now();
  await pool(
    Array.from({ length: DEPLOYMENTS }, (_, i) => i),
    IN_FLIGHT,
    async (i) => {
      const namespace = namespaces[i % NAMESPACES] as string;
      const name = `argocd-${i}`;
      const t = performance.now();
      const gd = await system.createGitOpsDeployment(namespace, name, {
        source: { repoURL: repo.fileUrl, path: `apps/${i}` },
        type: 'automated',
      });
      createdAt.set(`${namespace}/${name}`, t);
      applicationOf.set(`${namespace}/${name}`, `gitopsdepl-${gd.metadata.uid}`);
    },
  );
  const createdAll = performance.now();
  say(`created ${DEPLOYMENTS} in ${round1((createdAll - start) / 1000)} s; waiting for Synced/Healthy`);
  const progress = setInterval(() => {
    say(
      `${round1((performance.now() - start) / 1000)} s: ${appSeen.size} Applications, ${appSyncedHealthy.size} Synced/Healthy in Argo CD, ${deploymentSyncedHealthy.size} GitOpsDeployments Synced/Healthy`,
    );
  }, 15_000);
  let timedOut = false;
  await Promise.race([
    converged,
    sleep(TIMEOUT_SECONDS * 1000 - (createdAll - start)).then(() => {
      timedOut = true;
    }),
  ]);
  clearInterval(progress);
  const cpuAfter = await cpuNow();
  const api = deltas(apiBefore, await apiRequestCounts());
  const perDeployment = (entries: [string, number][]) =>
    Object.fromEntries(
      entries
        .map(([key, n]) => [key, round2(n / DEPLOYMENTS)] as const)
        .filter(([, n]) => n >= 0.05)
        .sort((x, y) => y[1] - x[1]),
    );
  const sum = (entries: [string, number][]) => round2(entries.reduce((t, [, n]) => t + n, 0) / DEPLOYMENTS);
  const apiWrites = [...api].filter(([key]) => isWrite(key) && key !== 'PUT leases');
  const apiReads = [...api].filter(([key]) => !isWrite(key));
  const windowSeconds = (performance.now() - start) / 1000;
  const cpuByProcess: Record<string, number> = {};
  for (const [pid, { label, seconds }] of cpuAfter) {
    const before = cpuBefore.get(pid)?.seconds ?? 0;
    cpuByProcess[label] = (cpuByProcess[label] ?? 0) + seconds - before;
  }
  const cpuTotal = Object.values(cpuByProcess).reduce((sum, v) => sum + v, 0);
  const cpuSorted = Object.fromEntries(
    Object.entries(cpuByProcess)
      .filter(([, v]) => v >= 0.05)
      .sort((x, y) => y[1] - x[1])
      .map(([k, v]) => [k, round1(v)]),
  );

  const keys = [...createdAt.keys()];
  const since = (seen: number | undefined, key: string) =>
    seen === undefined ? undefined : seen - (createdAt.get(key) ?? Number.NaN);
  const defined = (values: (number | undefined)[]) => values.filter((v): v is number => v !== undefined);
  const toSyncedHealthy = defined(keys.map((k) => since(deploymentSyncedHealthy.get(k), k)));
  const toApplication = defined(keys.map((k) => since(appSeen.get(applicationOf.get(k) ?? ''), k)));
  const toArgoSyncedHealthy = defined(
    keys.map((k) => since(appSyncedHealthy.get(applicationOf.get(k) ?? ''), k)),
  );
  const last = deploymentSyncedHealthy.size > 0 ? Math.max(...deploymentSyncedHealthy.values()) : start;
  emit('argocd_create_to_synced_healthy', {
    method: `real Argo CD ${argoCd.version} (repo-server + application-controller, reconciliation ${RECONCILIATION_SECONDS} s), backend and agent as processes; one local file:// Git repository, one ConfigMap per path; one warm-up deployment converged first; automated GitOpsDeployments created ${IN_FLIGHT} in flight; POST → the GitOpsDeployment's status shows sync Synced at the repository's head and health Healthy, seen by a watch`,
    in_flight: IN_FLIGHT,
    warmup_ms: warmupMs,
    converged: toSyncedHealthy.length,
    ...(timedOut ? { timed_out_after_s: TIMEOUT_SECONDS } : {}),
    ...latencySummary(toSyncedHealthy),
    throughput_per_s: last > start ? round1(toSyncedHealthy.length / ((last - start) / 1000)) : 0,
    client_create_rate_per_s: round1(DEPLOYMENTS / ((createdAll - start) / 1000)),
    create_to_application: latencySummary(toApplication),
    create_to_argocd_application_synced_healthy: latencySummary(toArgoSyncedHealthy),
    conditions_seen: Object.fromEntries([...conditionsSeen].map(([name, keys]) => [name, keys.size])),
    api_note:
      "apiserver_request_total deltas over the same window, every client's (ours, Argo CD's, this benchmark's own POST gitopsdeployments), kube-controller-manager's lease left out",
    api_writes_per_deployment: sum(apiWrites),
    api_writes_per_deployment_by_verb_and_resource: perDeployment(apiWrites),
    api_reads_per_deployment: sum(apiReads),
    cpu_seconds_by_process: cpuSorted,
    cpu_seconds_total: round1(cpuTotal),
    cpu_share_of_machine: round2(cpuTotal / (windowSeconds * cores)),
    window_s: round1(windowSeconds),
    load_average_1m: { before: round1(loadBefore), after: round1(loadavg()[0] ?? 0) },
  });
  if (timedOut) {
    failed = true;
    say(
      `only ${toSyncedHealthy.length} of ${DEPLOYMENTS} converged within ${TIMEOUT_SECONDS} s (${appSeen.size} Applications, ${appSyncedHealthy.size} Synced/Healthy in Argo CD)`,
    );
    for (const key of keys.filter((k) => !deploymentSyncedHealthy.has(k)).slice(0, 5)) {
      const [namespace, name] = key.split('/') as [string, string];
      const status = deployments.get(namespace, name)?.status;
      say(
        `  ${key}: sync ${status?.sync?.status}, health ${status?.health?.status}, conditions ${JSON.stringify((status?.conditions ?? []).map((c) => `${c.type}/${c.reason}`))}`,
      );
    }
  }
  if (system.crashes.length > 0) {
    failed = true;
    say(`crashed: ${system.crashes.join('; ')}`);
  }
} catch (error) {
  failed = true;
  say(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  for (const step of cleanups.reverse()) {
    await step.run().catch((error: unknown) => say(`cleanup "${step.what}" failed: ${String(error)}`));
  }
}
process.exit(failed ? 1 : 0);
