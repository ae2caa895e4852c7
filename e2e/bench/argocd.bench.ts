/**
 * Real Argo CD benchmark (issue 14; docs/performance.md, "Real Argo CD" and "Scaling past one Argo CD").
 * Run through `pnpm bench` (scripts/bench.ts starts PostgreSQL and the control plane). Starts
 * BENCH_ARGOCD_INSTANCES (1 or 2) engine instances, each a real Argo CD the way tier 3b does (redis,
 * argocd-repo-server, argocd-application-controller from the cached build) with its own cluster-agent process
 * (the second: `cluster-agent-b` in `system.secondArgoCdNamespace`), one backend process serving both, and one
 * local Git repository with one ConfigMap per deployment path (a ConfigMap is Healthy as soon as it exists:
 * the local API server has no node). Tenant namespace i is labelled with instance i % instances
 * (`managed-gitops.redhat.com/engine-instance`), so the spread is fixed, not left to least-loaded placement.
 * Once one warm-up deployment per tenant namespace has converged (each Argo CD loads its cluster cache on its
 * first Application, and each tenant has its AppProject, in both modes), creates BENCH_ARGOCD_DEPLOYMENTS automated GitOpsDeployments over BENCH_ARGOCD_NAMESPACES
 * namespaces with BENCH_ARGOCD_IN_FLIGHT creates at a time and prints one JSON line:
 *   argocd_create_to_synced_healthy   POST GitOpsDeployment → its status shows sync Synced at the repository's
 *                                     head and health Healthy; p50/p99/max and throughput, plus the
 *                                     intermediate steps (the Application exists; Argo CD wrote Synced/Healthy
 *                                     on it); CPU seconds per process (each Argo CD process and agent labelled
 *                                     with its instance, e.g. `argocd-application-controller[a]`), per instance
 *                                     (its Argo CD processes and its agent) and per deployment; PostgreSQL
 *                                     statements per deployment and the most sessions open at once per
 *                                     application_name
 *   argocd_periodic_refresh           (BENCH_ARGOCD_REFRESH=true) then Argo CD's own periodic refresh of every
 *                                     Application, nothing else changing: CPU per process and instance, API
 *                                     writes and statements per refresh, each process's RSS
 * Every arrival time comes from a watch (informers on GitOpsDeployments and on Applications in every Argo CD
 * namespace), never from polling. BENCH_ARGOCD=false skips it. Everything it starts (both instances) is
 * stopped and removed again, also on failure.
 *
 * BENCH_ARGOCD_MODE=alone (issue 34): Argo CD alone, the physical limit of a service in front of it. No backend
 * and no agent run; the benchmark itself creates, per deployment, the Application the agent would have made
 * (packages/cluster-agent/src/application/application.render.ts from the row desired-application.ts writes
 * for an automated GitOpsDeployment: `gitopsdepl-<uuid>`, destination in-cluster + the tenant namespace, the
 * same repository path, automated prune/selfHeal/allowEmpty, PrunePropagationPolicy=background, retry -1
 * 5s/2/3m, Argo CD's resources finalizer) in a per-tenant AppProject like the agent's (sourceRepos the
 * repository, destinations in-cluster + that namespace) created before the timed part, with the same warm-up
 * and the same creates in flight; create → Argo CD wrote Synced/Healthy (at the head) on the Application, from
 * the Application watch. The figures have the same names, with `mode`. In the default mode (`service`) the
 * figure also carries the status lag: Application Synced/Healthy in the Application watch → the
 * GitOpsDeployment Synced/Healthy in its watch. `BENCH_PEER=argocd pnpm bench e2e/bench/argocd.bench.ts`
 * runs both, alternating on fresh infrastructure, and compares them (e2e/bench/argocd-peer.ts).
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Label } from '@gitops/api';
import { createPathTimes, enableStatementStatistics, openSessions, statementCalls } from '@gitops/db';
import { type ArgoCd, builtArgoCdBinary, createGitRepo, manifest, startArgoCd } from '@gitops/local-env';
import {
  createInformer,
  createMetricsRegistry,
  createSilentLogger,
  HttpMethod,
  kubeRequest,
  type kubeStream,
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
import { randomSuffix, type ServiceName, startSystem } from '../fixture/system.ts';
import { apiServerProfile, type ProfiledProcess, startGoProfiles } from './go-profiles.ts';
import {
  apiRequestCounts,
  cores,
  cpuSeconds,
  deltas,
  descendants,
  figureEmitter,
  isWrite,
  latencySummary,
  machineBusySeconds,
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
/** Engine instances: 1, or 2 (a second Argo CD with its own agent). */
const INSTANCES = Number(process.env.BENCH_ARGOCD_INSTANCES ?? 1);
/** `service` (GitOpsDeployments through the backend and agent) or `alone` (Applications created directly). */
const MODE = process.env.BENCH_ARGOCD_MODE ?? 'service';
if (MODE !== 'service' && MODE !== 'alone') {
  say(`BENCH_ARGOCD_MODE must be service or alone, not ${MODE}`);
  process.exit(1);
}
const ALONE = MODE === 'alone';
if (ALONE && INSTANCES !== 1) {
  say('BENCH_ARGOCD_MODE=alone runs one Argo CD (BENCH_ARGOCD_INSTANCES=1)');
  process.exit(1);
}
if (INSTANCES !== 1 && INSTANCES !== 2) {
  say(`BENCH_ARGOCD_INSTANCES must be 1 or 2, not ${process.env.BENCH_ARGOCD_INSTANCES}`);
  process.exit(1);
}
if (NAMESPACES < INSTANCES) {
  say(`BENCH_ARGOCD_NAMESPACES (${NAMESPACES}) must be at least BENCH_ARGOCD_INSTANCES (${INSTANCES})`);
  process.exit(1);
}
/**
 * BENCH_ARGOCD_REFRESH=true: once every deployment converged, also wait for Argo CD's periodic refresh of every
 * Application (each is refreshed once its reconciledAt is older than RECONCILIATION_SECONDS, checked at each
 * informer resync, i.e. within two periods) and print what that round cost (`argocd_periodic_refresh`).
 */
const REFRESH = process.env.BENCH_ARGOCD_REFRESH === 'true';
/**
 * BENCH_ARGOCD_ALONE_FIRST_SYNC=true (alone only): the benchmark's Applications are created with their first
 * sync, as the agent creates a new automated Application (packages/cluster-agent/src/application/first-sync.ts),
 * instead of as a user would write them: what Argo CD alone costs when its users do what the agent does.
 */
const ALONE_FIRST_SYNC = process.env.BENCH_ARGOCD_ALONE_FIRST_SYNC === 'true';
if (ALONE_FIRST_SYNC && !ALONE) {
  say('BENCH_ARGOCD_ALONE_FIRST_SYNC=true needs BENCH_ARGOCD_MODE=alone');
  process.exit(1);
}
/**
 * BENCH_PROFILE_DIR: CPU profiles of kube-apiserver and of each argocd-application-controller over the timed
 * part (the last one ends up to 20 s after it), in `<dir>/<mode>-<time>/` (go-profiles.ts; Argo CD serves them
 * while the file its ARGOCD_ENABLE_PROFILER_FILE_PATH names reads `true`).
 */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR
  ? join(process.env.BENCH_PROFILE_DIR, `${MODE}-${new Date().toISOString().replace(/[:.]/g, '-')}`)
  : undefined;
if (PROFILE_DIR) {
  await mkdir(PROFILE_DIR, { recursive: true });
  process.env.ARGOCD_ENABLE_PROFILER_FILE_PATH = join(PROFILE_DIR, 'argocd-profiler.enabled');
  await writeFile(process.env.ARGOCD_ENABLE_PROFILER_FILE_PATH, 'true');
}
const emit = figureEmitter({
  mode: MODE,
  ...(ALONE_FIRST_SYNC ? { alone_first_sync: true } : {}),
  deployments: DEPLOYMENTS,
  namespaces: NAMESPACES,
  instances: INSTANCES,
});

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

/** One engine instance of the run: an Argo CD and its agent. */
interface Instance {
  /** `a`, `b`: labels its processes in the CPU figures. */
  letter: string;
  name: string;
  argoCdNamespace: string;
  agent: ServiceName;
  argoCd?: ArgoCd;
  warmupMs?: number;
}

/** Alone: the AppProject of the tenant in `namespace` (the agent's is `app-project-<cluster_user id>`). */
const appProjectOf = (namespace: string) => `app-project-${namespace}`;
/** A repository URL as the agent writes it into sourceRepos (app-project.render.ts normaliseRepoUrl). */
const normalisedRepoUrl = (url: string) =>
  url
    .trim()
    .toLowerCase()
    .replace(/\/+$/, '')
    .replace(/\.git$/, '')
    .replace(/\/+$/, '');
/**
 * Alone: the Application the agent makes for an automated GitOpsDeployment with no syncPolicy of its own
 * (desired-application.ts syncPolicyOf + application.render.ts renderApplication), without the agent's labels.
 */
const applicationOfAlone = (
  name: string,
  argoCdNamespace: string,
  namespace: string,
  repoURL: string,
  path: string,
) => ({
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'Application',
  metadata: { name, namespace: argoCdNamespace, finalizers: ['resources-finalizer.argocd.argoproj.io'] },
  spec: {
    project: appProjectOf(namespace),
    source: { repoURL, path },
    destination: { name: 'in-cluster', namespace },
    syncPolicy: {
      automated: { prune: true, selfHeal: true, allowEmpty: true },
      syncOptions: ['PrunePropagationPolicy=background'],
      retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
    },
  },
  // The operation the agent creates a new automated Application with (first-sync.ts), without its info entry.
  ...(ALONE_FIRST_SYNC
    ? {
        operation: {
          initiatedBy: { automated: true },
          sync: { prune: true, syncOptions: ['PrunePropagationPolicy=background'] },
          retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
        },
      }
    : {}),
});

/** BENCH_PROFILE_DIR: the API server (through the admin kubeconfig) and each instance's application-controller. */
function profiledProcesses(
  kc: Parameters<typeof kubeStream>[0],
  instances: readonly Instance[],
): ProfiledProcess[] {
  const read = async (url: string) => {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    return new Uint8Array(await response.arrayBuffer());
  };
  return [
    apiServerProfile(kc),
    ...instances.flatMap((instance) =>
      (instance.argoCd?.processes ?? [])
        .filter((p) => p.name === 'argocd-application-controller')
        .map((p) => {
          const args = p.child.spawnargs;
          const port = args[args.indexOf('--metrics-port') + 1];
          return {
            name: `argocd-application-controller-${instance.letter}`,
            read: (seconds: number) =>
              read(`http://127.0.0.1:${port}/debug/pprof/profile?seconds=${seconds}`),
          };
        }),
    ),
  ];
}

const isSyncedHealthy = (status: { sync?: { status?: string }; health?: { status?: string } } | undefined) =>
  status?.sync?.status === 'Synced' && status.health?.status === 'Healthy';

let failed = false;
try {
  const system = await startSystem({ start: [] });
  cleanups.push({ what: 'stop the backend and agents, drop the database', run: () => system.stop() });
  const statementsCounted = await enableStatementStatistics(system.db);
  /** Open sessions on the run's database now, by application_name (this script's own left out). */
  const connections = async () => {
    const byName: Record<string, number> = {};
    for (const [who, n] of Object.entries(await openSessions(system.db))) {
      const name = who.slice(0, who.lastIndexOf(' '));
      byName[name] = (byName[name] ?? 0) + n;
    }
    return byName;
  };
  const gitRoot = await mkdtemp(join(tmpdir(), 'bench-argocd-git-'));
  tempDirs.push(gitRoot);
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

  // The engine instances: `a` is the system's own (agent `cluster-agent`), `b` the fixture's second one
  // (agent `cluster-agent-b`, Argo CD namespace `secondArgoCdNamespace`, created by startArgoCd).
  const both: Instance[] = [
    {
      letter: 'a',
      name: system.engineInstanceName,
      argoCdNamespace: system.argoCdNamespace,
      agent: 'cluster-agent',
    },
    {
      letter: 'b',
      name: system.secondEngineInstanceName,
      argoCdNamespace: system.secondArgoCdNamespace,
      agent: 'cluster-agent-b',
    },
  ];
  const instances = both.slice(0, INSTANCES);
  /** Namespace i is labelled with instance i % INSTANCES (deployment i lives in namespace i % NAMESPACES). */
  const instanceOfNamespaceIndex = (i: number) => instances[i % INSTANCES] as Instance;

  const namespaces = Array.from({ length: NAMESPACES }, () => `bench-argocd-${randomSuffix()}`);
  const instanceOfNamespace = new Map(namespaces.map((ns, i) => [ns, instanceOfNamespaceIndex(i)]));
  const created: string[] = [];
  cleanups.push({
    what: 'delete the tenant namespaces',
    run: () => pool(created, 8, (ns) => remove(system.kc, paths.namespace(ns))),
  });
  await pool(namespaces, 8, async (name) => {
    await create(system.kc, '/api/v1/namespaces', {
      metadata: { name, labels: { [Label.EngineInstance]: instanceOfNamespace.get(name)?.name } },
    });
    created.push(name);
  });

  for (const instance of instances) {
    const workDir = await mkdtemp(join(tmpdir(), `bench-argocd-work-${instance.letter}-`));
    tempDirs.push(workDir);
    const argoCd = await startArgoCd({
      binary,
      kubeconfigPath: process.env.KUBECONFIG ?? '',
      namespace: instance.argoCdNamespace,
      workDir,
      reconciliationSeconds: RECONCILIATION_SECONDS,
      onLine: (line) => {
        if (process.env.E2E_VERBOSE) process.stderr.write(`[argocd-${instance.letter}]${line}\n`);
      },
    });
    instance.argoCd = argoCd;
    cleanups.push({ what: `stop Argo CD ${instance.letter}`, run: () => argoCd.stop() });
  }
  // Runs while every Argo CD and the services still run: deleting the GitOpsDeployments makes the system
  // delete the Applications (alone: the benchmark deletes them) and each Argo CD prune its ConfigMaps and drop
  // its finalizer. Whatever Application is left after that (a failed run) loses its finalizer, so the Argo CD
  // namespaces can go.
  cleanups.push({
    what: 'delete the GitOpsDeployments and their Applications',
    run: async () => {
      // One by one: a DELETE of the collection of 1,000 Applications outlasts the client's 30 s timeout.
      if (ALONE)
        for (const { argoCdNamespace } of instances)
          await pool(await list<ArgoApplication>(system.kc, paths.applications(argoCdNamespace)), 8, (app) =>
            remove(system.kc, paths.application(argoCdNamespace, app.metadata.name)),
          );
      else
        await pool(created, 8, async (ns) => {
          await kubeRequest(system.kc, { method: HttpMethod.DELETE, path: paths.gitopsDeployments(ns) });
        });
      const deadline = performance.now() + 180_000;
      for (const { argoCdNamespace } of instances) {
        const applications = paths.applications(argoCdNamespace);
        while ((await list(system.kc, applications)).length > 0 && performance.now() < deadline)
          await sleep(1000);
        const left = await list<ArgoApplication>(system.kc, applications);
        if (left.length > 0)
          say(
            `${left.length} Applications left in ${argoCdNamespace} after 180 s: removing their finalizers`,
          );
        await pool(left, 8, async (app) => {
          await mergePatch(system.kc, paths.application(argoCdNamespace, app.metadata.name), {
            metadata: { finalizers: null },
          }).catch(() => {});
        });
      }
    },
  });
  if (ALONE) {
    // Each tenant's AppProject, as the agent makes it (app-project.render.ts) for a tenant whose
    // applications all use the one repository: created before the timed part, as the agent's exist once a
    // tenant deployed once.
    const argoCdNamespace = instances[0]?.argoCdNamespace as string;
    await pool(namespaces, 8, async (namespace) => {
      await create(system.kc, paths.appProjects(argoCdNamespace), {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'AppProject',
        metadata: { name: appProjectOf(namespace), namespace: argoCdNamespace },
        spec: {
          sourceRepos: [normalisedRepoUrl(repo.fileUrl)],
          destinations: [{ name: 'in-cluster', namespace }],
        },
      });
    });
  } else {
    await system.start('backend');
    // Every agent registers its instance before a labelled tenant deploys (a label naming an unregistered
    // instance is refused and looked at again only every 30 s).
    for (const instance of instances) await system.start(instance.agent);
  }

  // Arrivals, from watches only: the Application exists; Argo CD wrote Synced/Healthy on it; the
  // GitOpsDeployment shows Synced (at head) and Healthy (alone: the Application shows them).
  const appSeen = new Map<string, number>();
  const appSyncedHealthy = new Map<string, number>();
  /** Application name → the letter of the instance whose Argo CD namespace it appeared in. */
  const appInstance = new Map<string, string>();
  /** Deployment key → when it converged: its GitOpsDeployment Synced/Healthy, alone its Application's. */
  const convergedAt = new Map<string, number>();
  /** Alone: Application name → deployment key, set before its POST. */
  const keyOfApplication = new Map<string, string>();
  /** GitOpsDeployment key → `status.engineInstance` when it converged (where the backend placed its tenant). */
  const placedOn = new Map<string, string>();
  let allConverged: () => void = () => {};
  const converged = new Promise<void>((resolve) => {
    allConverged = resolve;
  });
  const informerBase = {
    kubeConfig: system.kc,
    registry: createMetricsRegistry({ defaultMetrics: false }),
    logger: createSilentLogger(),
  };
  /** The warm-up deployments' Applications, left out of the figures. */
  const ignoredApps = new Set<string>();
  /** The refresh figure: every Application's `status.reconciledAt` when it began, and when each changed. */
  let reconciledAtBefore: Map<string, string | undefined> | undefined;
  const refreshed = new Map<string, number>();
  let allRefreshed: () => void = () => {};
  const appInformers = instances.map((instance) => {
    const informer = createInformer<ArgoApplication>({
      ...informerBase,
      resource: { apiVersion: 'argoproj.io/v1alpha1', plural: 'applications' },
      namespace: instance.argoCdNamespace,
    });
    const onApp = (app: ArgoApplication) => {
      if (reconciledAtBefore?.has(app.metadata.name) && !refreshed.has(app.metadata.name)) {
        const reconciledAt = (app.status as { reconciledAt?: string } | undefined)?.reconciledAt;
        if (reconciledAt !== reconciledAtBefore.get(app.metadata.name)) {
          refreshed.set(app.metadata.name, performance.now());
          if (refreshed.size >= reconciledAtBefore.size) allRefreshed();
        }
      }
      const status = app.status as Parameters<typeof isSyncedHealthy>[0] & { sync?: { revision?: string } };
      if (ignoredApps.has(app.metadata.name)) {
        if (ALONE && isSyncedHealthy(status)) warmupOfApp.get(app.metadata.name)?.done();
        return;
      }
      const now = performance.now();
      if (!appSeen.has(app.metadata.name)) appSeen.set(app.metadata.name, now);
      appInstance.set(app.metadata.name, instance.letter);
      if (!appSyncedHealthy.has(app.metadata.name) && isSyncedHealthy(status))
        appSyncedHealthy.set(app.metadata.name, now);
      const key = keyOfApplication.get(app.metadata.name);
      if (
        ALONE &&
        key &&
        !convergedAt.has(key) &&
        isSyncedHealthy(status) &&
        status?.sync?.revision === head
      ) {
        convergedAt.set(key, now);
        if (convergedAt.size >= DEPLOYMENTS) allConverged();
      }
    };
    informer.onAdd(onApp);
    informer.onUpdate((_old, app) => onApp(app));
    return informer;
  });
  const deployments = createInformer<GitOpsDeployment>({
    ...informerBase,
    resource: { apiVersion: 'managed-gitops.redhat.com/v1alpha1', plural: 'gitopsdeployments' },
    labelSelector: `managed-gitops.redhat.com/backend-shard=${system.shard}`,
  });
  // Conditions any deployment ever showed on the way (e.g. Argo CD's InvalidSpecError): deployments per condition.
  const conditionsSeen = new Map<string, Set<string>>();
  // One warm-up deployment per tenant namespace (namespace k is on instance k % instances): each Argo CD has
  // loaded its cache of the cluster, and each tenant has its AppProject before the timed part, in both modes
  // (alone, the benchmark creates the AppProjects first; through the service, a tenant's first deployment
  // does). What is timed is the cost of a change, not a tenant's onboarding.
  const warmups = namespaces.map((namespace, k) => {
    const { promise: converged, resolve: done } = Promise.withResolvers<void>();
    const instance = instances[k % instances.length] as (typeof instances)[number];
    return { instance, namespace, converged, done, ms: 0 };
  });
  /** Alone: the warm-up of each warm-up Application's name. */
  const warmupOfApp = new Map<string, (typeof warmups)[number]>();
  const onDeployment = (gd: GitOpsDeployment) => {
    const key = `${gd.metadata.namespace}/${gd.metadata.name}`;
    for (const c of gd.status?.conditions ?? []) {
      const name = `${c.type}/${c.reason}`;
      conditionsSeen.set(name, (conditionsSeen.get(name) ?? new Set()).add(key));
    }
    const done = isSyncedHealthy(gd.status) && gd.status?.sync?.revision === head;
    if (gd.metadata.name === 'warmup') {
      if (done) warmups.find((w) => w.namespace === gd.metadata.namespace)?.done();
      return;
    }
    if (convergedAt.has(key)) return;
    if (done) {
      convergedAt.set(key, performance.now());
      const placed = (gd.status as { engineInstance?: string } | undefined)?.engineInstance;
      if (placed) placedOn.set(key, placed);
      if (convergedAt.size >= DEPLOYMENTS) allConverged();
    }
  };
  deployments.onAdd(onDeployment);
  deployments.onUpdate((_old, gd) => onDeployment(gd));
  cleanups.push({
    what: 'stop the watches',
    run: async () => {
      for (const informer of appInformers) await informer.stop();
      await deployments.stop();
    },
  });
  for (const informer of appInformers) informer.start();
  deployments.start();
  for (const informer of appInformers) await informer.waitForSync();
  await deployments.waitForSync();

  // Warm-up: one deployment per instance converged first. Each Argo CD loads its cache of the cluster on its
  // first Application, and a running installation has long done that; the measured creates start warm.
  await Promise.all(
    warmups.map(async (w) => {
      const warmupStart = performance.now();
      if (ALONE) {
        const name = `gitopsdepl-${randomUUID()}`;
        ignoredApps.add(name);
        warmupOfApp.set(name, w);
        const { argoCdNamespace } = w.instance;
        await create(
          system.kc,
          paths.applications(argoCdNamespace),
          applicationOfAlone(name, argoCdNamespace, w.namespace, repo.fileUrl, 'apps/warmup'),
        );
      } else {
        const warmupGd = await system.createGitOpsDeployment(w.namespace, 'warmup', {
          source: { repoURL: repo.fileUrl, path: 'apps/warmup' },
          type: 'automated',
        });
        ignoredApps.add(`gitopsdepl-${warmupGd.metadata.uid}`);
      }
      let warmupTimedOut = false;
      await Promise.race([
        w.converged,
        sleep(180_000).then(() => {
          warmupTimedOut = true;
        }),
      ]);
      if (warmupTimedOut)
        throw new Error(`the warm-up deployment of ${w.namespace} was not Synced/Healthy within 180 s`);
      w.ms = Math.round(performance.now() - warmupStart);
    }),
  );
  for (const instance of instances) {
    const own = warmups.filter((w) => w.instance === instance);
    instance.warmupMs = Math.max(...own.map((w) => w.ms));
    say(
      `instance ${instance.letter}: ${own.length} warm-up deployment(s), one per tenant, Synced/Healthy after ${instance.warmupMs} ms`,
    );
  }
  appSeen.clear();
  appSyncedHealthy.clear();
  appInstance.clear();

  // CPU time of every process of the run (the control plane and PostgreSQL are scripts/bench.ts's children),
  // from here to the last GitOpsDeployment converged: where the time goes.
  // Each instance's processes carry its letter: `cluster-agent[a]`, `argocd-application-controller[b]`.
  const named = new Map<number, string>([[process.pid, 'benchmark client']]);
  const backendPid = system.pid('backend');
  if (backendPid) named.set(backendPid, 'backend');
  for (const instance of instances) {
    const agentPid = system.pid(instance.agent);
    if (agentPid) named.set(agentPid, `cluster-agent[${instance.letter}]`);
    for (const p of instance.argoCd?.processes ?? [])
      if (p.child.pid) named.set(p.child.pid, `${p.name}[${instance.letter}]`);
  }
  /**
   * A process counts for its nearest named ancestor (a repo-server's `git` for that repo-server, whose
   * children's time joins its own once it has waited for them), else under its command name (PostgreSQL, etcd,
   * the API server: scripts/bench.ts's children).
   */
  const cpuNow = async () => {
    const byPid = new Map<number, { label: string; seconds: number }>();
    const all = await descendants(process.ppid);
    const parentOf = new Map(all.map(({ pid, parent }) => [pid, parent]));
    const labelOf = (pid: number, command: string) => {
      for (let p: number | undefined = pid; p !== undefined && p !== process.ppid; p = parentOf.get(p)) {
        const label = named.get(p);
        if (label) return label;
      }
      return command;
    };
    for (const { pid, command } of all) {
      const seconds = await cpuSeconds(pid);
      if (seconds !== undefined) byPid.set(pid, { label: labelOf(pid, command), seconds });
    }
    return byPid;
  };
  /** CPU seconds per label between two `cpuNow()` readings. */
  const cpuDelta = (
    before: Map<number, { seconds: number }>,
    after: Map<number, { label: string; seconds: number }>,
  ) => {
    const byLabel: Record<string, number> = {};
    for (const [pid, { label, seconds }] of after)
      byLabel[label] = (byLabel[label] ?? 0) + seconds - (before.get(pid)?.seconds ?? 0);
    return byLabel;
  };
  /** Labels with at least 0.05 CPU-s, busiest first, each divided by `unit` (1: seconds; N/1000: ms per N). */
  const cpuPer = (byLabel: Record<string, number>, unit: number) =>
    Object.fromEntries(
      Object.entries(byLabel)
        .filter(([, v]) => v >= 0.05)
        .sort((x, y) => y[1] - x[1])
        .map(([k, v]) => [k, round1(v / unit)]),
    );
  /** An instance's CPU seconds: its Argo CD processes and its agent (labels ending in `[<letter>]`). */
  const instanceCpu = (byLabel: Record<string, number>, instance: Instance) => {
    const mine = Object.entries(byLabel).filter(([label]) => label.endsWith(`[${instance.letter}]`));
    const seconds = mine.reduce((t, [, v]) => t + v, 0);
    const argoCdSeconds = mine
      .filter(([label]) => !label.startsWith('cluster-agent'))
      .reduce((t, [, v]) => t + v, 0);
    return { seconds, argoCdSeconds };
  };
  const loadBefore = loadavg()[0] ?? 0;
  const statementsBefore = statementsCounted ? await statementCalls(system.db) : undefined;
  // The most sessions each application name had open at once, sampled every second through the window.
  const connectionsPeak: Record<string, number> = {};
  const sampleConnections = async () => {
    for (const [name, n] of Object.entries(await connections().catch(() => ({}))))
      connectionsPeak[name] = Math.max(connectionsPeak[name] ?? 0, n);
  };
  const connectionSampler = setInterval(() => void sampleConnections(), 1000);
  const cpuBefore = await cpuNow();
  const machineBefore = await machineBusySeconds();
  const apiBefore = await apiRequestCounts({ subresource: true });
  const profiles = PROFILE_DIR
    ? await startGoProfiles(PROFILE_DIR, profiledProcesses(system.kc, instances), {
        onError: (name, error) => say(`profile of ${name} stopped: ${String(error)}`),
      })
    : undefined;

  // Create them, IN_FLIGHT at a time.
  const createdAt = new Map<string, number>();
  const applicationOf = new Map<string, string>();
  /** Service: deployment key → its GitOpsDeployment's uid. */
  const uidOf = new Map<string, string>();
  /** Deployment key → the instance its namespace's label names. */
  const intendedInstance = new Map<string, Instance>();
  const start = performance.now();
  await pool(
    Array.from({ length: DEPLOYMENTS }, (_, i) => i),
    IN_FLIGHT,
    async (i) => {
      const namespace = namespaces[i % NAMESPACES] as string;
      const name = `argocd-${i}`;
      const key = `${namespace}/${name}`;
      const t = performance.now();
      if (ALONE) {
        const application = `gitopsdepl-${randomUUID()}`;
        const { argoCdNamespace } = instanceOfNamespaceIndex(i % NAMESPACES);
        keyOfApplication.set(application, key);
        createdAt.set(key, t);
        applicationOf.set(key, application);
        await create(
          system.kc,
          paths.applications(argoCdNamespace),
          applicationOfAlone(application, argoCdNamespace, namespace, repo.fileUrl, `apps/${i}`),
        );
      } else {
        const gd = await system.createGitOpsDeployment(namespace, name, {
          source: { repoURL: repo.fileUrl, path: `apps/${i}` },
          type: 'automated',
        });
        createdAt.set(key, t);
        applicationOf.set(key, `gitopsdepl-${gd.metadata.uid}`);
        uidOf.set(key, gd.metadata.uid ?? '');
      }
      intendedInstance.set(`${namespace}/${name}`, instanceOfNamespaceIndex(i % NAMESPACES));
    },
  );
  const createdAll = performance.now();
  say(`created ${DEPLOYMENTS} in ${round1((createdAll - start) / 1000)} s; waiting for Synced/Healthy`);
  const progress = setInterval(() => {
    say(
      `${round1((performance.now() - start) / 1000)} s: ${appSeen.size} Applications, ${appSyncedHealthy.size} Synced/Healthy in Argo CD${ALONE ? '' : `, ${convergedAt.size} GitOpsDeployments Synced/Healthy`}`,
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
  clearInterval(connectionSampler);
  const cpuAfter = await cpuNow();
  const machineSeconds = (await machineBusySeconds()) - machineBefore;
  const statementsAfter = statementsCounted ? await statementCalls(system.db) : undefined;
  const api = deltas(apiBefore, await apiRequestCounts({ subresource: true }));
  const events = await eventsByComponentAndReason(
    system.kc,
    (name) => ignoredApps.has(name) || name === 'warmup',
  );
  // After every figure of the window was read: stopping waits for the profiles under way.
  if (profiles) say(`CPU profiles: ${(await profiles.stop()).join(' ')}`);
  /** Counts summed by the query's first 90 characters (white space folded). */
  const summedByPrefix = (entries: [string, number][]) => {
    const out = new Map<string, number>();
    for (const [query, n] of entries) {
      const prefix = query.replace(/\s+/g, ' ').slice(0, 90);
      out.set(prefix, (out.get(prefix) ?? 0) + n);
    }
    return out;
  };
  const perDeployment = (entries: [string, number][]) =>
    Object.fromEntries(
      entries
        .map(([key, n]) => [key, round2(n / DEPLOYMENTS)] as const)
        .filter(([, n]) => n >= 0.05)
        .sort((x, y) => y[1] - x[1]),
    );
  const sum = (entries: [string, number][]) => round2(entries.reduce((t, [, n]) => t + n, 0) / DEPLOYMENTS);
  const apiWrites = [...api].filter(([key]) => isWrite(key) && key !== 'PUT leases');
  const apiReads = [...api].filter(([key]) => !isWrite(key) && key !== 'GET leases');
  const windowSeconds = (performance.now() - start) / 1000;
  const cpuByProcess = cpuDelta(cpuBefore, cpuAfter);
  const cpuTotal = Object.values(cpuByProcess).reduce((sum, v) => sum + v, 0);
  const cpuSorted = cpuPer(cpuByProcess, 1);
  const cpuMsPerDeployment = cpuPer(cpuByProcess, DEPLOYMENTS / 1000);
  const statementDeltas =
    statementsBefore && statementsAfter
      ? [...deltas(statementsBefore, statementsAfter)].filter(
          ([query]) => !/pg_stat_statements|pg_stat_activity/.test(query),
        )
      : undefined;
  const statementsPerDeployment = statementDeltas && round1(sum(statementDeltas));
  /** The statements that cost most per deployment, by their text's first words: where a cut would land. */
  const statementsByQuery =
    statementDeltas &&
    Object.fromEntries(Object.entries(perDeployment([...summedByPrefix(statementDeltas)])).slice(0, 12));

  const keys = [...createdAt.keys()];
  const since = (seen: number | undefined, key: string) =>
    seen === undefined ? undefined : seen - (createdAt.get(key) ?? Number.NaN);
  const defined = (values: (number | undefined)[]) => values.filter((v): v is number => v !== undefined);
  const toSyncedHealthy = defined(keys.map((k) => since(convergedAt.get(k), k)));
  const toApplication = defined(keys.map((k) => since(appSeen.get(applicationOf.get(k) ?? ''), k)));
  const toArgoSyncedHealthy = defined(
    keys.map((k) => since(appSyncedHealthy.get(applicationOf.get(k) ?? ''), k)),
  );
  const last = convergedAt.size > 0 ? Math.max(...convergedAt.values()) : start;
  /** Service: Argo CD wrote Synced/Healthy on the Application (its watch) → the GitOpsDeployment showed it. */
  const statusLag = ALONE
    ? []
    : defined(
        keys.map((k) => {
          const app = appSyncedHealthy.get(applicationOf.get(k) ?? '');
          const gd = convergedAt.get(k);
          return app === undefined || gd === undefined ? undefined : gd - app;
        }),
      );
  /** Per instance: its deployments' figures, and the CPU of its Argo CD processes and agent. */
  const byInstance = Object.fromEntries(
    instances.map((instance) => {
      const mine = keys.filter((k) => intendedInstance.get(k) === instance);
      const converged = mine.filter((k) => convergedAt.has(k));
      const lastOfMine = Math.max(start, ...converged.map((k) => convergedAt.get(k) ?? start));
      const { seconds, argoCdSeconds } = instanceCpu(cpuByProcess, instance);
      return [
        instance.letter,
        {
          engine_instance: instance.name,
          argocd_namespace: instance.argoCdNamespace,
          warmup_ms: instance.warmupMs,
          deployments: mine.length,
          converged: converged.length,
          placed_elsewhere: ALONE ? 0 : converged.filter((k) => placedOn.get(k) !== instance.name).length,
          applications_seen_here: [...appInstance.values()].filter((l) => l === instance.letter).length,
          ...latencySummary(defined(converged.map((k) => since(convergedAt.get(k), k)))),
          throughput_per_s: lastOfMine > start ? round1(converged.length / ((lastOfMine - start) / 1000)) : 0,
          cpu_seconds: round1(seconds),
          cpu_seconds_argocd: round1(argoCdSeconds),
          cpu_seconds_agent: round1(seconds - argoCdSeconds),
          cpu_ms_per_deployment: mine.length > 0 ? round1((seconds * 1000) / mine.length) : 0,
        },
      ];
    }),
  );
  const backendSeconds = cpuByProcess.backend ?? 0;
  const createPath = ALONE ? undefined : await createPathStages(system.db, keys, uidOf, createdAt);
  emit('argocd_create_to_synced_healthy', {
    method: ALONE
      ? `Argo CD alone: a real Argo CD ${instances[0]?.argoCd?.version} (redis + repo-server + application-controller, reconciliation ${RECONCILIATION_SECONDS} s), no backend, no agent; per tenant namespace an AppProject like the agent's, created first; one local file:// Git repository, one ConfigMap per path; one warm-up Application per tenant converged first; the Applications the agent would make (automated, in-cluster + the tenant namespace${ALONE_FIRST_SYNC ? ', created with their first sync as the agent creates them' : ''}) POSTed by the benchmark ${IN_FLIGHT} in flight; POST → the Application shows sync Synced at the repository's head and health Healthy, seen by a watch`
      : `${INSTANCES} engine instance(s), each a real Argo CD ${instances[0]?.argoCd?.version} (redis + repo-server + application-controller, reconciliation ${RECONCILIATION_SECONDS} s) with its own agent process, one backend process; tenant namespace i labelled with instance i % ${INSTANCES}; one local file:// Git repository, one ConfigMap per path; one warm-up deployment per tenant converged first; automated GitOpsDeployments created ${IN_FLIGHT} in flight; POST → the GitOpsDeployment's status shows sync Synced at the repository's head and health Healthy, seen by a watch`,
    in_flight: IN_FLIGHT,
    warmup_ms: Object.fromEntries(instances.map((i) => [i.letter, i.warmupMs])),
    converged: toSyncedHealthy.length,
    ...(timedOut ? { timed_out_after_s: TIMEOUT_SECONDS } : {}),
    ...latencySummary(toSyncedHealthy),
    throughput_per_s: last > start ? round1(toSyncedHealthy.length / ((last - start) / 1000)) : 0,
    client_create_rate_per_s: round1(DEPLOYMENTS / ((createdAll - start) / 1000)),
    create_to_application: latencySummary(toApplication),
    create_to_argocd_application_synced_healthy: latencySummary(toArgoSyncedHealthy),
    ...(createPath ? { create_path: createPath } : {}),
    ...(ALONE
      ? {}
      : {
          status_lag: latencySummary(statusLag),
          status_lag_note:
            "per deployment: Argo CD's Synced/Healthy on the Application (its watch) → the GitOpsDeployment's (its watch)",
        }),
    conditions_seen: Object.fromEntries([...conditionsSeen].map(([name, keys]) => [name, keys.size])),
    api_note:
      "apiserver_request_total deltas over the same window, every client's (ours, Argo CD's, this benchmark's own POST of each GitOpsDeployment or, alone, Application), kube-controller-manager's lease left out; the counter names no client: Events by their reporting component below",
    api_writes_per_deployment: sum(apiWrites),
    api_writes_per_deployment_by_verb_and_resource: perDeployment(apiWrites),
    api_reads_per_deployment: sum(apiReads),
    api_reads_per_deployment_by_verb_and_resource: perDeployment(apiReads),
    events_per_deployment_by_component_and_reason: perDeployment([...events]),
    events_note:
      'every Event of the run (core/v1, each counted `count` times) but the warm-up objects, by reportingComponent (else source.component) and reason, listed once the window ended',
    cpu_note:
      'CPU seconds (user + system, /proc/<pid>/stat, waited-for children included) from the first create until the last GitOpsDeployment converged; [a]/[b] = the engine instance; each instance = its redis, argocd-repo-server, argocd-application-controller and cluster-agent',
    cpu_seconds_by_process: cpuSorted,
    cpu_ms_per_deployment_by_process: cpuMsPerDeployment,
    cpu_seconds_total: round1(cpuTotal),
    backend_cpu_ms_per_deployment: round1((backendSeconds * 1000) / DEPLOYMENTS),
    by_instance: byInstance,
    db_statements_per_deployment: statementsPerDeployment,
    db_statements_per_deployment_by_query: statementsByQuery,
    db_connections_peak_by_application_name: connectionsPeak,
    cpu_share_of_machine: round2(cpuTotal / (windowSeconds * cores)),
    machine_busy_seconds: round1(machineSeconds),
    machine_note:
      'every core busy in the window (/proc/stat): minus cpu_seconds_total, what other programs used',
    window_s: round1(windowSeconds),
    load_average_1m: { before: round1(loadBefore), after: round1(loadavg()[0] ?? 0) },
  });
  if (timedOut) {
    failed = true;
    say(
      `only ${toSyncedHealthy.length} of ${DEPLOYMENTS} converged within ${TIMEOUT_SECONDS} s (${appSeen.size} Applications, ${appSyncedHealthy.size} Synced/Healthy in Argo CD)`,
    );
    for (const key of keys.filter((k) => !convergedAt.has(k)).slice(0, 5)) {
      const [namespace, name] = key.split('/') as [string, string];
      const app = appInformers[0]?.get(instances[0]?.argoCdNamespace ?? '', applicationOf.get(key) ?? '');
      const status = ALONE
        ? (app?.status as GitOpsDeployment['status'])
        : deployments.get(namespace, name)?.status;
      say(
        `  ${key}: sync ${status?.sync?.status}, health ${status?.health?.status}, conditions ${JSON.stringify((status?.conditions ?? []).map((c) => `${c.type}/${c.reason}`))}`,
      );
    }
  }
  for (const [letter, figures] of Object.entries(byInstance)) {
    if (figures.placed_elsewhere > 0)
      say(`instance ${letter}: ${figures.placed_elsewhere} deployments were not placed on it as labelled`);
  }

  if (REFRESH && !timedOut) {
    // Argo CD's periodic refresh with every Application present, nothing else changing: from 10 s after
    // convergence until each Application's reconciledAt has changed once, plus 10 s for what follows the last
    // one. CPU and statement counts are read every 5 s: the readings before the first refresh give the cost at
    // rest (per second), the rest of the window minus that rate the cost of the refresh round.
    await sleep(10_000);
    const all = appInformers.flatMap((informer) => informer.list());
    const reading = async () => ({
      at: performance.now(),
      cpu: await cpuNow(),
      statements: statementsCounted ? await statementCalls(system.db) : new Map<string, number>(),
    });
    const statementsBetween = (before: Map<string, number>, after: Map<string, number>) =>
      [...deltas(before, after)]
        .filter(([query]) => !/pg_stat_statements|pg_stat_activity/.test(query))
        .reduce((t, [, n]) => t + n, 0);
    const apiRefreshBefore = await apiRequestCounts({ subresource: true });
    const machineRefreshBefore = await machineBusySeconds();
    const readings = [await reading()];
    const allDone = new Promise<void>((resolve) => {
      allRefreshed = resolve;
    });
    reconciledAtBefore = new Map(
      all.map((app) => [
        app.metadata.name,
        (app.status as { reconciledAt?: string } | undefined)?.reconciledAt,
      ]),
    );
    const refreshLimit = 2 * RECONCILIATION_SECONDS + 60;
    say(`waiting for Argo CD's periodic refresh of ${all.length} Applications (up to ${refreshLimit} s)`);
    let refreshTimedOut = false;
    let readingLoop = true;
    const loop = (async () => {
      while (readingLoop) {
        await sleep(5000);
        // Stop reading once the round began: the last reading before it ends the time at rest.
        if (refreshed.size === 0) readings.push(await reading());
      }
    })();
    await Promise.race([
      allDone,
      sleep(refreshLimit * 1000).then(() => {
        refreshTimedOut = true;
      }),
    ]);
    await sleep(10_000);
    readingLoop = false;
    await loop;
    const end = await reading();
    const machineRefresh = (await machineBusySeconds()) - machineRefreshBefore;
    const apiRefresh = deltas(apiRefreshBefore, await apiRequestCounts({ subresource: true }));
    const first = readings[0] as Awaited<ReturnType<typeof reading>>;
    const lastQuiet = readings[readings.length - 1] as Awaited<ReturnType<typeof reading>>;
    const quietSeconds = (lastQuiet.at - first.at) / 1000;
    const roundSeconds = (end.at - lastQuiet.at) / 1000;
    const atRest = cpuDelta(first.cpu, lastQuiet.cpu);
    const round = cpuDelta(lastQuiet.cpu, end.cpu);
    /** The round's CPU minus what the same process uses at rest in as long a time. */
    const roundNet: Record<string, number> = {};
    if (quietSeconds > 0)
      for (const [label, seconds] of Object.entries(round))
        roundNet[label] = seconds - ((atRest[label] ?? 0) * roundSeconds) / quietSeconds;
    const n = Math.max(1, refreshed.size);
    const times = [...refreshed.values()].map((t) => t - first.at);
    const restStatements = statementsBetween(first.statements, lastQuiet.statements);
    const roundStatements = statementsBetween(lastQuiet.statements, end.statements);
    /** VmRSS of each named process now, in MB. */
    const rss: Record<string, number> = {};
    for (const [pid, label] of named) {
      const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
      const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
      if (kb > 0) rss[label] = Math.round(kb / 1024);
    }
    const perSecond = (byLabel: Record<string, number>, seconds: number) => cpuPer(byLabel, seconds / 1000);
    emit('argocd_periodic_refresh', {
      method: `Argo CD's own periodic refresh (ARGOCD_RECONCILIATION_TIMEOUT ${RECONCILIATION_SECONDS} s) of every Application present, warm-up ones included, nothing else changing; from 10 s after the last deployment converged until every Application's status.reconciledAt has changed once (seen by a watch), plus 10 s. At rest: the readings (every 5 s) before the first refresh; the round: from the last of them to the end, minus the rate at rest`,
      applications: all.length,
      refreshed: refreshed.size,
      ...(refreshTimedOut ? { timed_out_after_s: refreshLimit } : {}),
      first_refresh_s: times.length > 0 ? round1(Math.min(...times) / 1000) : undefined,
      last_refresh_s: times.length > 0 ? round1(Math.max(...times) / 1000) : undefined,
      at_rest_s: round1(quietSeconds),
      at_rest_cpu_ms_per_s_by_process: perSecond(atRest, quietSeconds),
      at_rest_by_instance_cpu_ms_per_s: Object.fromEntries(
        instances.map((instance) => {
          const { seconds, argoCdSeconds } = instanceCpu(atRest, instance);
          return [
            instance.letter,
            {
              total: round1((seconds * 1000) / quietSeconds),
              argocd: round1((argoCdSeconds * 1000) / quietSeconds),
              agent: round1(((seconds - argoCdSeconds) * 1000) / quietSeconds),
            },
          ];
        }),
      ),
      at_rest_db_statements_per_s: quietSeconds > 0 ? round2(restStatements / quietSeconds) : undefined,
      round_s: round1(roundSeconds),
      round_cpu_ms_per_refresh_by_process: cpuPer(roundNet, n / 1000),
      round_by_instance: Object.fromEntries(
        instances.map((instance) => {
          const { seconds, argoCdSeconds } = instanceCpu(roundNet, instance);
          const here = all.filter((app) => app.metadata.namespace === instance.argoCdNamespace);
          const mine = Math.max(1, here.filter((app) => refreshed.has(app.metadata.name)).length);
          return [
            instance.letter,
            {
              applications: here.length,
              refreshed: here.filter((app) => refreshed.has(app.metadata.name)).length,
              cpu_ms_per_refresh: round1((seconds * 1000) / mine),
              argocd_cpu_ms_per_refresh: round1((argoCdSeconds * 1000) / mine),
              agent_cpu_ms_per_refresh: round1(((seconds - argoCdSeconds) * 1000) / mine),
            },
          ];
        }),
      ),
      round_db_statements_per_refresh:
        quietSeconds > 0
          ? round2((roundStatements - (restStatements * roundSeconds) / quietSeconds) / n)
          : undefined,
      api_writes_per_refresh_by_verb_and_resource: Object.fromEntries(
        [...apiRefresh]
          .filter(([key]) => isWrite(key) && key !== 'PUT leases')
          .map(([key, v]) => [key, round2(v / n)] as const)
          .filter(([, v]) => v >= 0.01)
          .sort((x, y) => y[1] - x[1]),
      ),
      api_note: 'whole window (at rest and the round), every client, divided by the refreshes',
      db_connections_now_by_application_name: await connections(),
      rss_mb_by_process: rss,
      machine_busy_seconds: round1(machineRefresh),
      cpu_seconds_total: round1(Object.values(cpuDelta(first.cpu, end.cpu)).reduce((t, v) => t + v, 0)),
      load_average_1m: round1(loadavg()[0] ?? 0),
    });
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

/**
 * Every core/v1 Event in the cluster (each counted `count` times, as the API server took a write per
 * occurrence), by `<reporting component>/<reason>`, but those about objects `ignored` names.
 */
async function eventsByComponentAndReason(
  kc: Parameters<typeof kubeRequest>[0],
  ignored: (name: string) => boolean,
): Promise<Map<string, number>> {
  const res = (await kubeRequest(kc, { method: HttpMethod.GET, path: '/api/v1/events' })) as {
    items: {
      reason?: string;
      count?: number;
      reportingComponent?: string;
      source?: { component?: string };
      involvedObject?: { name?: string };
    }[];
  };
  const out = new Map<string, number>();
  for (const event of res.items) {
    if (ignored(event.involvedObject?.name ?? '')) continue;
    const key = `${event.reportingComponent || event.source?.component || '?'}/${event.reason ?? '?'}`;
    out.set(key, (out.get(key) ?? 0) + (event.count ?? 1));
  }
  return out;
}

/**
 * Service: where a create spends its time before the Application exists, from the database's timestamps
 * (the same machine's clock): POST → the backend's application row, → the agent takes its operation, → the
 * agent finished it (the Application applied).
 */
async function createPathStages(
  db: Parameters<typeof createPathTimes>[0],
  keys: string[],
  uidOf: Map<string, string>,
  createdAt: Map<string, number>,
) {
  const times = new Map((await createPathTimes(db, [...uidOf.values()])).map((t) => [t.crUid, t]));
  const postRow: number[] = [];
  const rowTaken: number[] = [];
  const takenDone: number[] = [];
  for (const key of keys) {
    const t = times.get(uidOf.get(key) ?? '');
    const posted = createdAt.get(key);
    if (!t || posted === undefined) continue;
    postRow.push(t.rowAt.getTime() - (performance.timeOrigin + posted));
    if (t.startedAt) rowTaken.push(t.startedAt.getTime() - t.rowAt.getTime());
    if (t.startedAt && t.finishedAt) takenDone.push(t.finishedAt.getTime() - t.startedAt.getTime());
  }
  return {
    post_to_application_row: latencySummary(postRow),
    application_row_to_operation_taken: latencySummary(rowTaken),
    operation_taken_to_finished: latencySummary(takenDone),
    note: "database timestamps: the row's transaction start, the operation's last attempt start and its finish",
  };
}
