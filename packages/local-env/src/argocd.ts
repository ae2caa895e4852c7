/**
 * A real Argo CD on this machine: Debian's `redis-server` on loopback, `argocd-repo-server` and
 * `argocd-application-controller` (the multi-call `argocd` binary that tools/argocd/build.sh builds, the
 * component chosen through ARGOCD_BINARY_NAME) against a local API server, with their namespace prepared
 * the way Argo CD's install manifests prepare it.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { parse } from 'yaml';
import { isExecutable, runBuildScript } from './binaries.ts';
import { type KubeEndpoint, kubeRequest } from './kube-request.ts';
import { cacheDir, repoRoot } from './paths.ts';
import { freePort } from './ports.ts';
import { type ManagedProcess, startProcess, waitFor } from './process.ts';

/** The Argo CD release tools/argocd builds (its go.mod is the one source of truth). */
export async function argoCdBuildVersion(): Promise<string> {
  const goMod = await readFile(join(repoRoot, 'tools', 'argocd', 'go.mod'), 'utf8');
  const version = /github\.com\/argoproj\/argo-cd\/v3\s+(v[0-9]\S*)/.exec(goMod)?.[1];
  if (!version) throw new Error('tools/argocd/go.mod does not require github.com/argoproj/argo-cd/v3');
  return version;
}

/**
 * Path of the `argocd` binary when it is already built (`ARGOCD_BINARY` wins), else undefined.
 * Never builds: `pnpm dev` uses this to decide whether it can run a real Argo CD.
 */
export async function builtArgoCdBinary(): Promise<string | undefined> {
  const override = process.env.ARGOCD_BINARY;
  if (override) {
    if (!(await isExecutable(override))) throw new Error(`ARGOCD_BINARY=${override} is not an executable`);
    return override;
  }
  const dir = join(cacheDir(), 'argocd', await argoCdBuildVersion());
  // Everything build.sh puts there: a folder an older build.sh left without helm is built up (the
  // repo-server's PATH starts with this folder; it runs `helm template` for a chart).
  for (const file of ['argocd', 'git-verify-wrapper.sh', 'gpg-wrapper.sh', 'kustomize', 'helm']) {
    if (!(await isExecutable(join(dir, file)))) return undefined;
  }
  return join(dir, 'argocd');
}

/** Builds `argocd` once (tools/argocd/build.sh; about 15 min cold on 2 cores) and returns its path. */
export async function ensureArgoCdBinary(log: (line: string) => void = () => {}): Promise<string> {
  const built = await builtArgoCdBinary();
  if (built) return built;
  const dir = await runBuildScript('argocd', log);
  return join(dir, 'argocd');
}

/** The endpoint (server, CA, bearer token) of a token kubeconfig such as the harness writes. */
export async function endpointFromKubeconfig(path: string): Promise<KubeEndpoint> {
  const config = parse(await readFile(path, 'utf8')) as {
    clusters?: { cluster?: { server?: string; 'certificate-authority-data'?: string } }[];
    users?: { user?: { token?: string } }[];
  };
  const cluster = config.clusters?.[0]?.cluster;
  const token = config.users?.[0]?.user?.token;
  if (!cluster?.server || !token) throw new Error(`${path} is not a token kubeconfig`);
  return {
    server: cluster.server,
    token,
    ca: Buffer.from(cluster['certificate-authority-data'] ?? '', 'base64').toString('utf8'),
  };
}

/** Label Argo CD selects its settings ConfigMaps and Secrets by. */
const PART_OF = { 'app.kubernetes.io/part-of': 'argocd' };

async function apply(endpoint: KubeEndpoint, path: string, object: Record<string, unknown>): Promise<void> {
  const metadata = object.metadata as { name: string };
  const response = await kubeRequest(
    endpoint,
    'PATCH',
    `${path}/${metadata.name}?fieldManager=gitops-local-env&force=true`,
    object,
    'application/apply-patch+yaml',
  );
  if (response.status >= 300) {
    throw new Error(`applying ${path}/${metadata.name}: ${response.status} ${JSON.stringify(response.body)}`);
  }
}

/**
 * Creates (or brings up to date) the Argo CD namespace with what Argo CD's own install manifests put there
 * and the two components we run read: the settings ConfigMaps and Secret, and the `default` AppProject.
 */
export async function prepareArgoCdNamespace(endpoint: KubeEndpoint, namespace: string): Promise<void> {
  const created = await kubeRequest(endpoint, 'POST', '/api/v1/namespaces', {
    metadata: { name: namespace },
  });
  if (created.status >= 300 && created.status !== 409) {
    throw new Error(`creating namespace ${namespace}: ${created.status} ${JSON.stringify(created.body)}`);
  }
  const configMaps = `/api/v1/namespaces/${namespace}/configmaps`;
  // argocd-cm: `resource.respectRBAC: normal` makes the controller skip resource kinds the cluster's
  // credentials may not list, instead of failing the whole cluster. Tenants' ManagedEnvironments usually
  // carry a token limited to a namespace (e.g. bound to the `admin` ClusterRole there), which cannot list
  // every CRD of the cluster.
  await apply(endpoint, configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'argocd-cm', labels: { ...PART_OF, 'app.kubernetes.io/name': 'argocd-cm' } },
    data: { 'resource.respectRBAC': 'normal' },
  });
  // argocd-cmd-params-cm: the controller persists each resource's health in the Application (Argo CD 3.x
  // keeps it only in its cache by default), as a production install for this service must be configured;
  // the controller gets it as the environment variable Argo CD's manifests map it to (below).
  await apply(endpoint, configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'argocd-cmd-params-cm',
      labels: { ...PART_OF, 'app.kubernetes.io/name': 'argocd-cmd-params-cm' },
    },
    data: { 'controller.resource.health.persist': 'true' },
  });
  for (const name of [
    'argocd-rbac-cm',
    'argocd-gpg-keys-cm',
    'argocd-ssh-known-hosts-cm',
    'argocd-tls-certs-cm',
  ]) {
    await apply(endpoint, configMaps, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, labels: { ...PART_OF, 'app.kubernetes.io/name': name } },
    });
  }
  // argocd-secret must exist for the settings manager; the key is only used by argocd-server (not run here),
  // and a random value keeps every local instance different.
  const secretPath = `/api/v1/namespaces/${namespace}/secrets/argocd-secret`;
  const existing = await kubeRequest(endpoint, 'GET', secretPath);
  if (existing.status === 404) {
    await apply(endpoint, `/api/v1/namespaces/${namespace}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'argocd-secret', labels: { ...PART_OF, 'app.kubernetes.io/name': 'argocd-secret' } },
      type: 'Opaque',
      stringData: { 'server.secretkey': randomBytes(32).toString('base64') },
    });
  }
  await apply(endpoint, `/apis/argoproj.io/v1alpha1/namespaces/${namespace}/appprojects`, {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'AppProject',
    metadata: { name: 'default' },
    spec: {
      sourceRepos: ['*'],
      destinations: [{ server: '*', namespace: '*' }],
      clusterResourceWhitelist: [{ group: '*', kind: '*' }],
    },
  });
}

export interface ArgoCdOptions {
  /** Admin kubeconfig of the API server Argo CD runs "in" (its in-cluster cluster). */
  kubeconfigPath: string;
  /** Namespace Argo CD watches for Applications, AppProjects, cluster and repository Secrets. */
  namespace: string;
  /** Working folder (repo-server checkouts, sockets, TLS data, and each process's `<name>.log`). */
  workDir: string;
  /**
   * How often Argo CD re-reads Git and refreshes every Application (ARGOCD_RECONCILIATION_TIMEOUT);
   * Argo CD's default is 180 s, far too slow for a laptop loop or a test. Default 10 s.
   */
  reconciliationSeconds?: number;
  /** PEM CA certificates Argo CD's repo-server trusts for Git over HTTPS, keyed by host (argocd-tls-certs-cm). */
  trustedCertificates?: Record<string, string>;
  /** Lines of the known_hosts Argo CD checks SSH servers against (argocd-ssh-known-hosts-cm); none by default. */
  sshKnownHosts?: readonly string[];
  /** Every output line of the three processes, prefixed with the component's name. */
  onLine?: (line: string) => void;
  /** Prebuilt binary; built (or found in the cache) otherwise. */
  binary?: string;
}

export interface ArgoCd {
  readonly namespace: string;
  readonly binary: string;
  readonly version: string;
  readonly processes: readonly ManagedProcess[];
  /**
   * Kills argocd-application-controller (SIGKILL, as when its Pod dies) and starts it again with the same
   * flags and ports; resolves once it serves again. redis and the repo-server keep running.
   */
  restartApplicationController(): Promise<void>;
  stop(): Promise<void>;
}

async function httpOk(url: string): Promise<boolean> {
  return (await fetch(url)).ok;
}

/** Starts redis, argocd-repo-server and argocd-application-controller; resolves once all three serve. */
export async function startArgoCd(options: ArgoCdOptions): Promise<ArgoCd> {
  const binary = options.binary ?? (await ensureArgoCdBinary(options.onLine));
  const version = await argoCdBuildVersion();
  const endpoint = await endpointFromKubeconfig(options.kubeconfigPath);
  await prepareArgoCdNamespace(endpoint, options.namespace);

  const workDir = options.workDir;
  const tlsDir = join(workDir, 'tls');
  const sshDir = join(workDir, 'ssh');
  const tmpDir = join(workDir, 'tmp');
  const gpgDir = join(workDir, 'gnupg');
  for (const dir of [tlsDir, sshDir, tmpDir, gpgDir]) await mkdir(dir, { recursive: true });
  await writeFile(
    join(sshDir, 'ssh_known_hosts'),
    (options.sshKnownHosts ?? []).map((line) => `${line}\n`).join(''),
  );
  for (const [host, pem] of Object.entries(options.trustedCertificates ?? {})) {
    await writeFile(join(tlsDir, host), pem);
  }
  // The repo-server runs `kustomize build <dir>` for a folder with a kustomization.yaml and `helm template`
  // for a chart (an Argo CD image ships both binaries; build.sh puts them beside `argocd`, first on PATH).
  // Without a kustomize there (an ARGOCD_BINARY elsewhere), kubectl's built-in kustomize does the same
  // build; a real kustomize on PATH comes first.
  const shimDir = join(workDir, 'kustomize-shim');
  await mkdir(shimDir, { recursive: true });
  await writeFile(
    join(shimDir, 'kustomize'),
    [
      '#!/bin/sh',
      'case "$1" in',
      '  build) shift; exec kubectl kustomize "$@" ;;',
      '  version) kubectl version --client -o json | sed -n \'s/.*"kustomizeVersion": *"\\([^"]*\\)".*/\\1/p\' ;;',
      '  *) echo "kustomize shim: only build and version" >&2; exit 1 ;;',
      'esac',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );

  const processes: ManagedProcess[] = [];
  const stop = async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    processes.length = 0;
  };
  const recent: string[] = [];
  const line = (name: string) => (text: string) => {
    recent.push(`[${name}] ${text}`);
    if (recent.length > 40) recent.shift();
    options.onLine?.(`[${name}] ${text}`);
  };
  const reconcile = `${options.reconciliationSeconds ?? 10}s`;
  /** The application controller's metrics port (its readiness), the same across restarts. */
  let controllerMetrics = 0;
  let common: NodeJS.ProcessEnv = {};
  let repoPort = 0;
  let redisPort = 0;
  /** Starts argocd-application-controller (again, after a restart) and waits until it serves. */
  const startController = async () => {
    const controller = startProcess(
      'argocd-application-controller',
      binary,
      [
        '--namespace',
        options.namespace,
        '--kubeconfig',
        options.kubeconfigPath,
        '--repo-server',
        `127.0.0.1:${repoPort}`,
        '--repo-server-plaintext',
        '--redis',
        `127.0.0.1:${redisPort}`,
        '--metrics-port',
        String(controllerMetrics),
        '--status-processors',
        '10',
        '--operation-processors',
        '5',
        '--self-heal-timeout-seconds',
        '2',
        '--logformat',
        'text',
      ],
      {
        env: {
          ...common,
          ARGOCD_BINARY_NAME: 'argocd-application-controller',
          ARGOCD_APPLICATION_CONTROLLER_PERSIST_RESOURCE_HEALTH: 'true',
        },
        onLine: line('application-controller'),
        logFile: join(workDir, 'application-controller.log'),
      },
    );
    processes.push(controller);
    await waitFor(
      'argocd-application-controller',
      () => httpOk(`http://127.0.0.1:${controllerMetrics}/metrics`),
      {
        process: controller,
        timeoutMs: 60_000,
      },
    );
  };
  try {
    redisPort = await freePort();
    const redis = startProcess(
      'redis',
      'redis-server',
      [
        '--bind',
        '127.0.0.1',
        '--port',
        String(redisPort),
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        workDir,
      ],
      { onLine: line('redis'), logFile: join(workDir, 'redis.log') },
    );
    processes.push(redis);
    await waitFor(
      'redis',
      async () => {
        const { createConnection } = await import('node:net');
        return new Promise<boolean>((resolveOk) => {
          const socket = createConnection(redisPort, '127.0.0.1');
          socket.once('data', (data) => {
            socket.destroy();
            resolveOk(data.toString().startsWith('+PONG'));
          });
          socket.once('error', () => resolveOk(false));
          socket.write('PING\r\n');
        });
      },
      { process: redis, timeoutMs: 30_000 },
    );

    common = {
      PATH: [join(binary, '..'), process.env.PATH ?? '', shimDir].join(delimiter),
      HOME: workDir,
      TMPDIR: tmpDir,
      KUBECONFIG: options.kubeconfigPath,
      // Argo CD's own switch for running outside a Pod: its in-cluster cluster (https://kubernetes.default.svc,
      // our `in-cluster` destination) then uses KUBECONFIG instead of a mounted ServiceAccount.
      ARGOCD_FAKE_IN_CLUSTER: 'true',
      ARGOCD_RECONCILIATION_TIMEOUT: reconcile,
      ARGOCD_RECONCILIATION_JITTER: '0s',
      ARGOCD_TLS_DATA_PATH: tlsDir,
      ARGOCD_SSH_DATA_PATH: sshDir,
      ARGOCD_GPG_ENABLED: 'false',
      ARGOCD_GNUPGHOME: gpgDir,
      ARGOCD_GPG_DATA_PATH: join(workDir, 'gpg-source'),
      ARGOCD_ASK_PASS_SOCK: join(workDir, 'askpass.sock'),
      ARGOCD_PLUGINSOCKFILEPATH: join(workDir, 'plugins'),
      ARGOCD_APP_CONF_PATH: join(workDir, 'app-conf'),
      REDIS_SERVER: `127.0.0.1:${redisPort}`,
      // Argo CD serves /debug/pprof on each metrics port while this file reads `true` (docs/performance.md,
      // "How to run it"); passed through for profiling runs only.
      ...(process.env.ARGOCD_ENABLE_PROFILER_FILE_PATH
        ? { ARGOCD_ENABLE_PROFILER_FILE_PATH: process.env.ARGOCD_ENABLE_PROFILER_FILE_PATH }
        : {}),
    };
    repoPort = await freePort();
    const repoMetrics = await freePort();
    const repoServer = startProcess(
      'argocd-repo-server',
      binary,
      [
        '--address',
        '127.0.0.1',
        '--port',
        String(repoPort),
        '--metrics-address',
        '127.0.0.1',
        '--metrics-port',
        String(repoMetrics),
        '--disable-tls',
        // No mTLS either: its default path would otherwise be read and clash with --disable-tls.
        '--client-ca-path=',
        '--redis',
        `127.0.0.1:${redisPort}`,
        '--logformat',
        'text',
      ],
      {
        env: { ...common, ARGOCD_BINARY_NAME: 'argocd-repo-server' },
        onLine: line('repo-server'),
        logFile: join(workDir, 'repo-server.log'),
      },
    );
    processes.push(repoServer);
    await waitFor('argocd-repo-server', () => httpOk(`http://127.0.0.1:${repoMetrics}/metrics`), {
      process: repoServer,
      timeoutMs: 60_000,
    });

    controllerMetrics = await freePort();
    await startController();
  } catch (error) {
    await stop();
    throw new Error(`starting Argo CD failed: ${String(error)}\n${recent.join('\n')}`);
  }
  return {
    namespace: options.namespace,
    binary,
    version,
    processes,
    async restartApplicationController() {
      const controller = processes.find((p) => p.name === 'argocd-application-controller');
      if (controller) {
        processes.splice(processes.indexOf(controller), 1);
        controller.child.kill('SIGKILL');
        await controller.exited;
      }
      await startController();
    },
    stop,
  };
}

/** Removes an Argo CD work folder (after stop()). */
export async function removeArgoCdWorkDir(workDir: string): Promise<void> {
  await rm(workDir, { recursive: true, force: true });
}
