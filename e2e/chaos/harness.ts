/**
 * The chaos tier's own infrastructure (it restarts it, so it shares nothing with other test files): an
 * embedded PostgreSQL, a control plane, an HTTPS Git server, two real Argo CDs (two engine instances), and the
 * backend pair (two replicas of one shard) and the agent of each instance as processes, kept running by a
 * supervisor the way a kubelet restarts a container that died. Between each process and each server it talks
 * to, a TCP proxy of its own (`startTcpProxy`): each service has one to PostgreSQL and one to the API server
 * (its KUBECONFIG names its proxy), each Argo CD one to the API server, and the Git server has one in front of
 * it (the URLs the deployments name go through it); the test itself talks to every server directly. Plus the
 * faults: each one a bounded step the test calls.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareTemplateDatabase } from '@gitops/db/testing';
import {
  type ArgoCd,
  type ControlPlane,
  ensureArgoCdBinary,
  type GitServer,
  type PostgresServer,
  startArgoCd,
  startControlPlane,
  startGitServer,
  startPostgres,
  startTcpProxy,
  type TcpProxy,
} from '@gitops/local-env';
import { type ServiceName, type System, startSystem } from '../fixture/system.ts';

/** The processes of the service under test: a backend pair and the agent of each engine instance. */
export const SERVICES = [
  'backend',
  'backend-2',
  'cluster-agent',
  'cluster-agent-b',
] as const satisfies readonly ServiceName[];
export type Service = (typeof SERVICES)[number];

/**
 * Argo CD re-reads Git and refreshes every Application this often (ARGOCD_RECONCILIATION_TIMEOUT). 10 s by
 * default, so the chaos run's checks see Git's state soon; CHAOS_ARGOCD_RECONCILIATION_SECONDS sets it for a
 * large soak (at 2,000 deployments a refresh every 10 s is 200 Application refreshes a second on two cores).
 */
const ARGOCD_RECONCILIATION_SECONDS = Number(process.env.CHAOS_ARGOCD_RECONCILIATION_SECONDS ?? 10);
/** A dead service is started again after this pause, as a kubelet restarts a container (no back-off here). */
const RESTART_DELAY_MS = 1_000;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** A small seeded generator (mulberry32), so that a run can be replayed with its printed seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export interface Supervisor {
  /** Starts of each service after it died (killed by the test or exited by itself). */
  readonly restarts: Record<Service, number>;
  /** Resolves once every service runs and answers /readyz. */
  allReady(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** Keeps every service running: one that is gone is started again after {@link RESTART_DELAY_MS}. */
function supervise(
  system: System,
  envOf: (name: Service) => Record<string, string>,
  log: (line: string) => void,
): Supervisor {
  const restarts = Object.fromEntries(SERVICES.map((s) => [s, 0])) as Record<Service, number>;
  const starting = new Map<Service, Promise<void>>();
  const goneSince = new Map<Service, number>();
  let stopped = false;
  const timer = setInterval(() => {
    for (const name of SERVICES) {
      if (stopped || starting.has(name)) continue;
      if (system.isRunning(name)) {
        goneSince.delete(name);
        continue;
      }
      const since = goneSince.get(name) ?? Date.now();
      goneSince.set(name, since);
      if (Date.now() - since < RESTART_DELAY_MS) continue;
      goneSince.delete(name);
      restarts[name]++;
      starting.set(
        name,
        system
          .start(name, envOf(name))
          .catch((error: unknown) => log(`${name} did not become ready: ${whyNotReady(error)}`))
          .finally(() => starting.delete(name)),
      );
    }
  }, 200);
  return {
    restarts,
    async allReady(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const ready = await Promise.all(SERVICES.map((s) => system.isReady(s)));
        if (ready.every(Boolean)) return;
        if (Date.now() > deadline) {
          throw new Error(
            `not ready after ${timeoutMs} ms: ${SERVICES.filter((_, i) => !ready[i]).join(', ')}`,
          );
        }
        await sleep(500);
      }
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.all(starting.values());
    },
  };
}

/**
 * Why a (re)start did not reach /readyz, on one line: killed by the test meanwhile (the kill loop does not wait
 * for a restarted service to be ready), or the service's own last fatal log line (why it exited by itself).
 */
function whyNotReady(error: unknown): string {
  const [first = '', ...output] = String(error).split('\n');
  const fatal = output
    .map((line) => /^\[[\w-]+\] (\{.*\})$/.exec(line)?.[1])
    .map((json) => {
      try {
        return json ? (JSON.parse(json) as { level?: number; msg?: string; err?: { message?: string } }) : {};
      } catch {
        return {};
      }
    })
    .findLast((entry) => (entry.level ?? 0) >= 60);
  return fatal ? `${first}: ${fatal.msg} (${fatal.err?.message ?? 'no error'})` : first;
}

/** The Argo CDs, by the prefix of their log lines. */
export const ARGO_CDS = ['argocd', 'argocd-b'] as const;

/** The TCP proxies between each process and what it talks to. */
export interface Proxies {
  /** Each service's way to PostgreSQL. */
  readonly postgres: Record<Service, TcpProxy>;
  /** Each service's and each Argo CD's way to the API server. */
  readonly apiServer: Record<Service | (typeof ARGO_CDS)[number], TcpProxy>;
  /** Everyone's way to the Git server (Argo CD's repo-servers, the backends' credential checks). */
  readonly git: TcpProxy;
  readonly all: TcpProxy[];
}

export interface ChaosEnvironment {
  readonly postgres: PostgresServer;
  readonly proxies: Proxies;
  readonly controlPlane: ControlPlane;
  readonly argoCd: ArgoCd;
  /** The second engine instance's Argo CD (namespace `system.secondArgoCdNamespace`, agent `cluster-agent-b`). */
  readonly secondArgoCd: ArgoCd;
  /** The Git server, its URLs those of its proxy (`proxies.git`). */
  readonly git: GitServer;
  readonly system: System;
  readonly gitRoot: string;
  readonly supervisor: Supervisor;
  stop(): Promise<void>;
}

/** A URL of a server, through a proxy in front of it (same scheme, path and credentials). */
function throughProxy(url: string, proxy: TcpProxy): string {
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  return proxied.toString().replace(/\/$/, '');
}

/** A proxy on a loopback port in front of the server of `url`. */
const proxyTo = (url: string) =>
  startTcpProxy({ target: { host: new URL(url).hostname, port: Number(new URL(url).port) } });

/**
 * A copy of the admin kubeconfig whose server is `proxy` (TLS goes through the proxy untouched: the API
 * server's certificate names 127.0.0.1, whatever the port).
 */
async function kubeconfigThrough(controlPlane: ControlPlane, proxy: TcpProxy, file: string): Promise<string> {
  const original = await readFile(controlPlane.kubeconfigPath, 'utf8');
  const server = `server: ${controlPlane.server}`;
  if (!original.includes(server)) throw new Error(`no "${server}" in ${controlPlane.kubeconfigPath}`);
  await writeFile(file, original.replace(server, `server: ${throughProxy(controlPlane.server, proxy)}`), {
    mode: 0o600,
  });
  return file;
}

export async function startChaosEnvironment(log: (line: string) => void): Promise<ChaosEnvironment> {
  const cleanups: (() => Promise<void>)[] = [];
  const cleanUp = async () => {
    for (const step of cleanups.splice(0).reverse()) {
      await step().catch((error: unknown) => log(`clean-up step failed: ${String(error)}`));
    }
  };
  try {
    const argoCdBinary = await ensureArgoCdBinary(log);
    // synchronous_commit stays on: an immediate restart must not lose what the server confirmed.
    const postgres = await startPostgres({ forceEmbedded: true, durableCommits: true });
    cleanups.push(() => postgres.stop());
    const controlPlane = await startControlPlane({ log: (l) => (l.startsWith('[') ? undefined : log(l)) });
    cleanups.push(() => controlPlane.stop());

    // What the global setup provides to other tiers, from this file's own PostgreSQL and control plane.
    const template = 'gitops_template_chaos';
    await prepareTemplateDatabase(postgres.url, template);
    Object.assign(process.env, {
      KUBECONFIG: controlPlane.kubeconfigPath,
      GITOPS_TEST_USER_KUBECONFIG: controlPlane.userKubeconfigPath,
      GITOPS_TEST_DATABASE_URL: postgres.url,
      GITOPS_TEST_TEMPLATE_DATABASE: template,
    });

    const gitServer = await startGitServer();
    cleanups.push(() => gitServer.stop());
    const gitRoot = await mkdtemp(join(tmpdir(), 'chaos-git-'));
    cleanups.push(() => rm(gitRoot, { recursive: true, force: true }));

    const all: TcpProxy[] = [];
    cleanups.push(async () => {
      for (const proxy of all) await proxy.stop();
    });
    const proxy = async (url: string) => {
      const started = await proxyTo(url);
      all.push(started);
      return started;
    };
    const each = async <K extends string>(names: readonly K[], url: string) => {
      const out = {} as Record<K, TcpProxy>;
      for (const name of names) out[name] = await proxy(url);
      return out;
    };
    const proxies: Proxies = {
      postgres: await each(SERVICES, postgres.url),
      apiServer: await each([...SERVICES, ...ARGO_CDS], controlPlane.server),
      git: await proxy(gitServer.baseUrl),
      all,
    };
    const gitBase = throughProxy(gitServer.baseUrl, proxies.git);
    const git: GitServer = { ...gitServer, baseUrl: gitBase, url: (name) => `${gitBase}/${name}.git` };
    const kubeconfigs = await mkdtemp(join(tmpdir(), 'chaos-kubeconfigs-'));
    cleanups.push(() => rm(kubeconfigs, { recursive: true, force: true }));
    const kubeconfigOf = Object.fromEntries(
      await Promise.all(
        Object.entries<TcpProxy>(proxies.apiServer).map(async ([name, p]) => [
          name,
          await kubeconfigThrough(controlPlane, p, join(kubeconfigs, name)),
        ]),
      ),
    ) as Record<keyof Proxies['apiServer'], string>;

    const system = await startSystem({ start: [] });
    cleanups.push(() => system.stop());
    const argoWorkDir = await mkdtemp(join(tmpdir(), 'chaos-argocd-'));
    cleanups.push(() => rm(argoWorkDir, { recursive: true, force: true }));
    const argoCdIn = (namespace: string, workDir: string, prefix: (typeof ARGO_CDS)[number]) =>
      startArgoCd({
        kubeconfigPath: kubeconfigOf[prefix],
        namespace,
        workDir,
        binary: argoCdBinary,
        reconciliationSeconds: ARGOCD_RECONCILIATION_SECONDS,
        trustedCertificates: { '127.0.0.1': gitCa },
        onLine: (line) => {
          system.logs.push(`[${prefix}]${line}`);
          if (process.env.E2E_VERBOSE) process.stderr.write(`[${prefix}]${line}\n`);
        },
      });
    const gitCa = await readFile(git.caFile, 'utf8');
    const argoCd = await argoCdIn(system.argoCdNamespace, argoWorkDir, 'argocd');
    cleanups.push(() => argoCd.stop());
    const secondWorkDir = join(argoWorkDir, 'b');
    await mkdir(secondWorkDir);
    const secondArgoCd = await argoCdIn(system.secondArgoCdNamespace, secondWorkDir, 'argocd-b');
    cleanups.push(() => secondArgoCd.stop());

    // The churn deletes about a quarter of all deployments within minutes, on purpose: beyond a few hundred that
    // is more than the deletion guard lets an instance delete without an operator (docs/deletion-guard.md), and
    // the held deletes would wait for ever. Above the default size the agents get budgets of the run's size;
    // the default run keeps the production budgets, and no run raises anything else of the guard (a delete
    // without proof is still held, and fails the run).
    const deployments = Number(process.env.CHAOS_DEPLOYMENTS ?? 200);
    const budgets: Record<string, string> =
      deployments > 200
        ? {
            GITOPS_DELETION_BUDGET_MIN: String(deployments),
            GITOPS_TENANT_DELETION_BUDGET_MIN: String(deployments),
          }
        : {};
    const envOf = (name: Service): Record<string, string> => ({
      DATABASE_URL: throughProxy(system.database.url, proxies.postgres[name]),
      KUBECONFIG: kubeconfigOf[name],
      GIT_SSL_CAINFO: git.caFile,
      // info, not the debug of the other tiers: a few hundred deployments on two cores.
      LOG_LEVEL: process.env.E2E_LOG_LEVEL ?? 'info',
      ...(name.startsWith('cluster-agent') ? budgets : {}),
    });
    for (const name of SERVICES) await system.start(name, envOf(name));
    const supervisor = supervise(system, envOf, log);
    cleanups.push(() => supervisor.stop());
    return {
      postgres,
      proxies,
      controlPlane,
      argoCd,
      secondArgoCd,
      git,
      system,
      gitRoot,
      supervisor,
      stop: cleanUp,
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

/** A fault the test injected: when (seconds since the churn started), what, and how long it lasted. */
export interface FaultRecord {
  at: number;
  fault: string;
  seconds: number;
}

/** Cuts every connection through `proxies` and holds new ones for `ms`, then lets them through. */
async function partition(proxies: TcpProxy[], ms: number): Promise<void> {
  for (const proxy of proxies) {
    proxy.setMode('hang');
    proxy.cut();
  }
  await sleep(ms);
  for (const proxy of proxies) proxy.setMode('pass');
}

/** Delays every chunk through `proxies` by `latencyMs` for `ms`. */
async function slow(proxies: TcpProxy[], latencyMs: number, ms: number): Promise<void> {
  for (const proxy of proxies) proxy.setLatency(latencyMs);
  await sleep(ms);
  for (const proxy of proxies) proxy.setLatency(0);
}

/** The faults, each one bounded; every call appends what it did to `timeline`. */
export function faults(env: ChaosEnvironment, startedAt: number, timeline: FaultRecord[]) {
  const record = async (fault: string, run: () => Promise<void>) => {
    const at = Date.now();
    await run();
    timeline.push({
      at: Math.round((at - startedAt) / 100) / 10,
      fault,
      seconds: Math.round((Date.now() - at) / 100) / 10,
    });
  };
  return {
    /** SIGKILL of one service; the supervisor starts it again. */
    kill: (name: Service) => record(`SIGKILL ${name}`, () => env.system.kill(name)),
    /** PostgreSQL stops at once (every session cut, no checkpoint) and starts again on its data. */
    restartPostgres: () => record('PostgreSQL immediate restart', () => env.postgres.restartImmediately()),
    /** Every open connection to PostgreSQL is cut, and new ones hang for `ms`. */
    partitionPostgres: (ms: number) =>
      record(`PostgreSQL connections cut, new ones hang ${Math.round(ms / 1000)} s`, () =>
        partition(Object.values(env.proxies.postgres), ms),
      ),
    /** One service's connections to PostgreSQL are cut and new ones hang for `ms`; the API server answers. */
    cutFromPostgres: (name: Service, ms: number) =>
      record(`${name} cut from PostgreSQL, new connections hang ${Math.round(ms / 1000)} s`, () =>
        partition([env.proxies.postgres[name]], ms),
      ),
    /** One service's connections to the API server are cut and new ones hang for `ms`; PostgreSQL answers. */
    cutFromApiServer: (name: Service, ms: number) =>
      record(`${name} cut from the API server, new connections hang ${Math.round(ms / 1000)} s`, () =>
        partition([env.proxies.apiServer[name]], ms),
      ),
    /** Every chunk to and from PostgreSQL (every service's) is delayed `latencyMs` each way for `ms`. */
    postgresLatency: (latencyMs: number, ms: number) =>
      record(`PostgreSQL latency ${latencyMs} ms each way for ${Math.round(ms / 1000)} s`, () =>
        slow(Object.values(env.proxies.postgres), latencyMs, ms),
      ),
    /** Every chunk to and from the API server (the services' and Argo CDs') is delayed `latencyMs` for `ms`. */
    apiServerLatency: (latencyMs: number, ms: number) =>
      record(`API server latency ${latencyMs} ms each way for ${Math.round(ms / 1000)} s`, () =>
        slow(Object.values(env.proxies.apiServer), latencyMs, ms),
      ),
    /**
     * The Git server hangs for `ms`: its open connections are cut and new ones are accepted and never answered
     * (Argo CD's repo-servers and the backends' credential checks meet it); then it answers again.
     */
    hangGitServer: (ms: number) =>
      record(`Git server hangs ${Math.round(ms / 1000)} s`, () => partition([env.proxies.git], ms)),
    /** kube-apiserver stops (SIGTERM) and starts again with the same flags, port, certificates and etcd. */
    restartApiServer: () =>
      record('kube-apiserver restart', async () => {
        await env.controlPlane.stopApiServer();
        await env.controlPlane.startApiServer();
      }),
    /** argocd-application-controller (of the first instance) is killed and started again. */
    restartArgoCdController: () =>
      record('argocd-application-controller restart', () => env.argoCd.restartApplicationController()),
  };
}

/** Error-level (pino level ≥ 50) lines of the services, parsed. */
export interface ErrorLine {
  service: string;
  msg: string;
  err: string;
  line: string;
}

export function errorLines(logs: readonly string[]): ErrorLine[] {
  const out: ErrorLine[] = [];
  for (const line of logs) {
    const match = /^\[(backend|backend-2|cluster-agent|cluster-agent-b)\] (\{.*\})$/.exec(line);
    if (!match) continue;
    let entry: { level?: number; msg?: string; err?: { message?: string; code?: string } };
    try {
      entry = JSON.parse(match[2] ?? '');
    } catch {
      continue;
    }
    if ((entry.level ?? 0) < 50) continue;
    out.push({
      service: match[1] ?? '',
      msg: entry.msg ?? '',
      err: [entry.err?.code, entry.err?.message].filter(Boolean).join(' '),
      line,
    });
  }
  return out;
}
