/**
 * What the tier 4 node tests share: a control plane with a real node (images imported from the local Docker
 * engine), PostgreSQL reachable from Pods on the node network's gateway with a `gitops` database, a real
 * Argo CD in `gitops-service-argocd`, and the service's namespace with the Secrets an operator creates before
 * applying an overlay (manifests/base/deployments.yaml; docs/testing.md, tier 4): the backend's connection
 * string and keys, and, once the database is migrated and engine instance `default` admitted, the agent's own
 * connection string. Driven with kubectl, as a user would.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { admitEngineInstance, agentDatabaseUrl, createDb, migrateToLatest } from '@gitops/db';
import {
  type ArgoCd,
  argoCdCrdFiles,
  type Cluster,
  NODE_GATEWAY,
  NODE_SUBNET,
  nodeSupport,
  PAUSE_IMAGE,
  type PostgresServer,
  startArgoCd,
  startCluster,
  startPostgres,
} from '@gitops/local-env';
import pg from 'pg';

const execFileAsync = promisify(execFile);
export const SERVICE_NS = 'gitops-service';
export const ARGOCD_NS = 'gitops-service-argocd';
/** The engine instance the overlays' agent serves (its ENGINE_INSTANCE_NAME), in ARGOCD_NS. */
export const ENGINE_INSTANCE = 'default';
/** The Secret with the agent's connection string (key `url`), in SERVICE_NS. */
export const AGENT_DATABASE_SECRET = 'gitops-service-agent-database';

export interface KubeItem {
  metadata: { name: string; namespace?: string; deletionTimestamp?: string; uid?: string };
  spec?: {
    containers?: { image: string }[];
    source?: { path?: string };
    template?: { spec?: { containers?: { image: string }[] } };
  };
  status?: Record<string, unknown> & {
    conditions?: { type: string; status: string; message?: string }[];
    phase?: string;
    podIP?: string;
    sync?: { status?: string; revision?: string };
    health?: { status?: string };
    containerStatuses?: { ready?: boolean; restartCount?: number; imageID?: string }[];
  };
  data?: Record<string, string>;
}

export interface ServiceCluster {
  readonly cluster: Cluster;
  readonly postgres: PostgresServer;
  /** The process-run Argo CD (none with `argoCd: false`: a test that installs Argo CD as Pods). */
  readonly argoCd: ArgoCd | undefined;
  /** A folder of this run's own, removed by stop(). */
  readonly workDir: string;
  /** The `gitops` database as the Pods reach it (the Secret gitops-service-database). */
  readonly databaseUrl: string;
  /** The Secret gitops-service-encryption's `keys`. */
  readonly encryptionKeys: string;
  /**
   * What an operator does before the agent of this version starts (manifests/base/deployments.yaml): migrates
   * the database (as the backend's first Pod would; idempotent), admits engine instance `default` for
   * ARGOCD_NS (its own database role, a new password) and writes the agent's connection string, as the Pods
   * reach the database, into the Secret gitops-service-agent-database (key `url`). Returns that string.
   * Done by startServiceCluster unless `admit: false`.
   */
  admitAgent(): Promise<string>;
  /** The agent's connection string of the last admitAgent(), if any (a secret: never in a log). */
  readonly agentDatabaseUrl: string | undefined;
  kubectl(...args: string[]): Promise<string>;
  /** `kubectl apply --server-side -k <dir>`, as an operator applies an overlay (taking over conflicting fields). */
  applyKustomization(dir: string): Promise<void>;
  getJson<T = KubeItem>(...args: string[]): Promise<T>;
  items(...args: string[]): Promise<KubeItem[]>;
  /** The Running and Ready Pods of a selector, without those being deleted. */
  readyPods(namespace: string, selector: string): Promise<KubeItem[]>;
  /** How many of the ready cluster-agent Pods are the engine instance's active agent (by their log). */
  activeAgents(): Promise<number>;
  stop(): Promise<void>;
}

/** True when the object has a condition of that type with status True. */
export const isTrue = (item: KubeItem, type: string): boolean =>
  item.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;

/**
 * Starts the pieces (failing, never skipping, on a machine that cannot run a node) with `images` imported
 * into the node. Nothing of the service is applied yet.
 */
export async function startServiceCluster(options: {
  images: string[];
  name: string;
  log: (line: string) => void;
  /** Default true: a real Argo CD as local processes (`startArgoCd`) in gitops-service-argocd. */
  argoCd?: boolean;
  /**
   * Default true: the database migrated and the agent's Secret made at once (`admitAgent`). False for a
   * version whose agent still uses the backend's Secret (upgrade.test.ts admits before the roll).
   */
  admit?: boolean;
  /**
   * Default 'all': the harness installs every CRD of packages/api/crds (App Studio's, their dependencies and
   * the RHOAS kinds included) and Argo CD's. 'argocd': only Argo CD's Application and AppProject, applied with
   * kubectl as on a cluster where Argo CD is installed, so the service's own CRDs come from the manifests
   * applied (base.test.ts).
   */
  crds?: 'all' | 'argocd';
}): Promise<ServiceCluster> {
  const support = await nodeSupport([PAUSE_IMAGE, ...options.images]);
  if (!support.ok) throw new Error(`tier 4 needs a machine that can run a node: ${support.reason}`);
  const workDir = await mkdtemp(join(tmpdir(), `${options.name}-`));
  // What has started, stopped in reverse order by stop() or when a later start fails.
  const started: (() => Promise<void>)[] = [() => rm(workDir, { recursive: true, force: true })];
  const stopAll = async () => {
    for (const stop of started.reverse()) await stop().catch(() => {});
  };
  try {
    const cluster = await startCluster({
      images: options.images,
      log: options.log,
      installCrds: options.crds !== 'argocd',
    });
    started.push(() => cluster.stop());
    if (options.crds === 'argocd') await installArgoCdCrds(cluster);
    // The Pods reach the host's PostgreSQL on the node network's gateway.
    const postgres = await startPostgres({
      forceEmbedded: true,
      podNetwork: { address: NODE_GATEWAY, subnet: NODE_SUBNET },
      log: options.log,
    });
    started.push(() => postgres.stop());
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query('CREATE DATABASE gitops');
    await admin.end();
    const hostUrl = new URL(postgres.url);
    const databaseUrl = `postgres://${hostUrl.username}:${hostUrl.password}@${NODE_GATEWAY}:${hostUrl.port}/gitops`;
    const encryptionKeys = `k1=${randomBytes(32).toString('base64')}`;
    const argoCd =
      options.argoCd === false
        ? undefined
        : await startArgoCd({
            kubeconfigPath: cluster.kubeconfigPath,
            namespace: ARGOCD_NS,
            workDir: join(workDir, 'argocd'),
            reconciliationSeconds: 5,
            onLine: options.log,
          });
    if (argoCd) started.push(() => argoCd.stop());
    const env = await connect({
      cluster,
      postgres,
      argoCd,
      workDir,
      databaseUrl,
      encryptionKeys,
      stop: stopAll,
    });
    if (options.admit !== false) await env.admitAgent();
    return env;
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** Argo CD's Application and AppProject CRDs, server-side applied with kubectl, then Established. */
async function installArgoCdCrds(cluster: Cluster): Promise<void> {
  const kubectl = (...args: string[]) =>
    execFileAsync(cluster.node.kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...args], {
      maxBuffer: 64 * 1024 * 1024,
    });
  for (const file of await argoCdCrdFiles()) await kubectl('apply', '--server-side', '-f', file);
  await kubectl(
    'wait',
    '--for=condition=Established',
    '--timeout=120s',
    'crd/applications.argoproj.io',
    'crd/appprojects.argoproj.io',
  );
}

async function connect(
  pieces: Pick<
    ServiceCluster,
    'cluster' | 'postgres' | 'argoCd' | 'workDir' | 'databaseUrl' | 'encryptionKeys' | 'stop'
  >,
): Promise<ServiceCluster> {
  const { cluster, databaseUrl, encryptionKeys } = pieces;
  const kubectl = async (...args: string[]) =>
    (
      await execFileAsync(cluster.node.kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...args], {
        maxBuffer: 64 * 1024 * 1024,
      })
    ).stdout;
  const getJson = async <T = KubeItem>(...args: string[]): Promise<T> =>
    JSON.parse(await kubectl('get', '-o', 'json', ...args)) as T;
  const items = async (...args: string[]) => (await getJson<{ items: KubeItem[] }>(...args)).items;

  // What an operator does before applying an overlay: the namespace and the backend's two Secrets.
  await kubectl('create', 'namespace', SERVICE_NS);
  for (const [secret, value] of [
    ['gitops-service-database', `url=${databaseUrl}`],
    ['gitops-service-encryption', `keys=${encryptionKeys}`],
  ] as const) {
    await kubectl('create', 'secret', 'generic', secret, '-n', SERVICE_NS, `--from-literal=${value}`);
  }

  const readyPods = async (namespace: string, selector: string) =>
    (await items('pods', '-n', namespace, '-l', selector)).filter(
      (p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running' && isTrue(p, 'Ready'),
    );
  let agentUrl: string | undefined;
  async function admitAgent(): Promise<string> {
    // The host reaches PostgreSQL on loopback, the Pods on the node network's gateway: same server, same role.
    const hostUrl = new URL(pieces.postgres.url);
    hostUrl.pathname = '/gitops';
    const admin = createDb(hostUrl.toString(), { max: 1 });
    try {
      await migrateToLatest(admin);
      const admitted = await admitEngineInstance(admin, { name: ENGINE_INSTANCE, namespaceName: ARGOCD_NS });
      agentUrl = agentDatabaseUrl(databaseUrl, admitted);
    } finally {
      await admin.destroy();
    }
    // Replaced when it exists (a second admission issued a new password), as `instances admit --secret` does.
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: AGENT_DATABASE_SECRET, namespace: SERVICE_NS },
      type: 'Opaque',
      data: { url: Buffer.from(agentUrl).toString('base64') },
    };
    const file = join(pieces.workDir, `${AGENT_DATABASE_SECRET}.json`);
    await writeFile(file, JSON.stringify(secret), { mode: 0o600 });
    try {
      await kubectl('apply', '--server-side', '--force-conflicts', '-f', file);
    } finally {
      await rm(file, { force: true });
    }
    return agentUrl;
  }

  return {
    ...pieces,
    admitAgent,
    get agentDatabaseUrl() {
      return agentUrl;
    },
    kubectl,
    async applyKustomization(dir) {
      await kubectl('apply', '--server-side', '--force-conflicts', '-k', dir);
    },
    getJson,
    items,
    readyPods,
    async activeAgents() {
      const agents = await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-cluster-agent');
      const active = await Promise.all(
        agents.map(async (pod) =>
          /"msg":"active agent of this engine instance"/.test(
            await kubectl('logs', '-n', SERVICE_NS, pod.metadata.name, '--tail=-1'),
          ),
        ),
      );
      return active.filter(Boolean).length;
    },
  };
}

/** A user's web server: two replicas of the locally built `image`, with a readiness probe. */
export function webDeployment(name: string, image: string): string {
  const server = "require('node:http').createServer((q, s) => s.end('ok')).listen(8080)";
  return JSON.stringify({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            {
              name: 'web',
              image,
              imagePullPolicy: 'Never',
              command: ['node', '-e', server],
              ports: [{ containerPort: 8080 }],
              readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 2 },
            },
          ],
        },
      },
    },
  });
}
