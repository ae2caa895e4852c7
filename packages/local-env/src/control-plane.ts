import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { ensureControlPlaneBinaries, ensureNodeBinaries, hasControllerManager } from './binaries.ts';
import { crdDocuments, installCrds } from './crds.ts';
import { type KubeEndpoint, kubeRequest } from './kube-request.ts';
import { type ClusterPki, ensureClusterPki } from './pki.ts';
import { freePort, hostAddress } from './ports.ts';
import { type ManagedProcess, startProcess, waitFor } from './process.ts';

/** The non-admin user every control plane has, for RBAC tests. It gets no grants by default. */
export const TEST_USER = 'gitops-test-user';

export interface ControlPlaneOptions {
  /** Keep state here (and reuse it on the next start, e.g. for `pnpm dev`); default: a fresh temp dir removed on stop. */
  workDir?: string;
  /** Install our CRDs and Argo CD's Application/AppProject CRDs (default true). */
  installCrds?: boolean;
  /** Start kube-controller-manager (namespace + garbage-collector controllers), default true. */
  controllerManager?: boolean;
  /** Receives progress lines and the components' output (prefixed). */
  log?: (line: string) => void;
  /**
   * Cluster mode, for a real node (node.ts, `startCluster`): the API server serves on `bindAddress` (the node
   * network's gateway, so Pods reach it) with certificates from its own CA, authorizes with Node,RBAC, runs
   * ServiceAccount and NodeRestriction admission and can reach the kubelet; kube-controller-manager runs
   * every controller; kube-scheduler runs too; `nodeName` gets a token in group system:nodes.
   */
  cluster?: { bindAddress: string; nodeName: string; apiServerPort: number };
}

export interface ControlPlane {
  readonly server: string;
  readonly workDir: string;
  /** Admin kubeconfig (token auth, group system:masters). */
  readonly kubeconfigPath: string;
  /** Kubeconfig of {@link TEST_USER}. */
  readonly userKubeconfigPath: string;
  readonly adminToken: string;
  readonly userToken: string;
  /** PEM bundle that verifies the API server's serving certificate. */
  readonly caPem: string;
  readonly endpoint: KubeEndpoint;
  /** Cluster mode only: the kubeconfig of the node (user system:node:<name>) and the CA file. */
  readonly nodeKubeconfigPath?: string;
  readonly caFile?: string;
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
  stop(): Promise<void>;
}

interface State {
  etcdClientPort: number;
  etcdPeerPort: number;
  apiServerPort: number;
  adminToken: string;
  userToken: string;
  nodeToken?: string;
}

async function loadOrCreateState(workDir: string): Promise<State> {
  const file = join(workDir, 'state.json');
  try {
    const state = JSON.parse(await readFile(file, 'utf8')) as State;
    if (!state.nodeToken) {
      state.nodeToken = randomBytes(24).toString('hex');
      await writeFile(file, JSON.stringify(state), { mode: 0o600 });
    }
    return state;
  } catch {
    const state: State = {
      etcdClientPort: await freePort(),
      etcdPeerPort: await freePort(),
      apiServerPort: await freePort(),
      adminToken: randomBytes(24).toString('hex'),
      userToken: randomBytes(24).toString('hex'),
      nodeToken: randomBytes(24).toString('hex'),
    };
    await writeFile(file, JSON.stringify(state), { mode: 0o600 });
    return state;
  }
}

function kubeconfig(server: string, caPem: string, user: string, token: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'local',
        cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') },
      },
    ],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: 'local', user } }],
    'current-context': user,
  });
}

/** etcd's flags: one member on loopback, no fsync (a test store), progress notifications for watches. */
function etcdArgs(workDir: string, state: State, etcdUrl: string): string[] {
  return [
    `--name=local`,
    `--data-dir=${join(workDir, 'etcd')}`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=http://127.0.0.1:${state.etcdPeerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${state.etcdPeerPort}`,
    `--initial-cluster=local=http://127.0.0.1:${state.etcdPeerPort}`,
    '--unsafe-no-fsync=true',
    '--watch-progress-notify-interval=5s',
    // 8 GiB, etcd's largest recommended quota, instead of its 2 GiB default: the fleet benchmark's 100,000
    // deployments and Applications, with their status revisions between the API server's compactions
    // (every 5 min), outgrow 2 GiB.
    '--quota-backend-bytes=8589934592',
    '--log-level=warn',
  ];
}

/**
 * kube-apiserver's flags: token authentication (tokens.csv), the service-account keys of `certDir`; in cluster
 * mode our own PKI, Node+RBAC authorization and the kubelet client certificate, else a self-signed certificate.
 */
function kubeApiServerArgs(o: {
  etcdUrl: string;
  bindAddress: string;
  state: State;
  tokenFile: string;
  certDir: string;
  pki: ClusterPki | undefined;
  cluster: boolean;
}): string[] {
  const { etcdUrl, bindAddress, state, tokenFile, certDir, pki, cluster } = o;
  const saPubFile = join(certDir, 'sa.pub');
  const saKeyFile = join(certDir, 'sa.key');
  return [
    `--etcd-servers=${etcdUrl}`,
    `--bind-address=${bindAddress}`,
    `--secure-port=${state.apiServerPort}`,
    `--token-auth-file=${tokenFile}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${saPubFile}`,
    `--service-account-signing-key-file=${saKeyFile}`,
    '--endpoint-reconciler-type=none',
    `--advertise-address=${cluster ? bindAddress : hostAddress()}`,
    '--allow-privileged=true',
    '--v=0',
    ...(pki
      ? [
          `--tls-cert-file=${pki.apiServerCert}`,
          `--tls-private-key-file=${pki.apiServerKey}`,
          `--client-ca-file=${pki.caCert}`,
          '--authorization-mode=Node,RBAC',
          '--enable-admission-plugins=NodeRestriction',
          `--kubelet-client-certificate=${pki.kubeletClientCert}`,
          `--kubelet-client-key=${pki.kubeletClientKey}`,
          '--kubelet-preferred-address-types=InternalIP,Hostname',
          '--profiling=false',
        ]
      : [`--cert-dir=${certDir}`, '--authorization-mode=RBAC', '--disable-admission-plugins=ServiceAccount']),
  ];
}

/**
 * Starts a real etcd → kube-apiserver → kube-controller-manager on free loopback ports, writes an admin
 * and a non-admin kubeconfig, installs the CRDs and waits until everything is usable.
 */
export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = options.log ?? (() => {});
  const binDir = await ensureControlPlaneBinaries(log);
  const ownWorkDir = !options.workDir;
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), 'gitops-cp-')));
  await mkdir(workDir, { recursive: true, mode: 0o700 });
  const state = await loadOrCreateState(workDir);
  if (options.cluster) state.apiServerPort = options.cluster.apiServerPort;
  const certDir = join(workDir, 'certs');
  await mkdir(certDir, { recursive: true });
  await mkdir(join(workDir, 'logs'), { recursive: true });

  const saKeyFile = join(certDir, 'sa.key');
  const saPubFile = join(certDir, 'sa.pub');
  const saKeyExists = await readFile(saKeyFile).then(
    () => true,
    () => false,
  );
  if (!saKeyExists) {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(saKeyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(saPubFile, publicKey.export({ type: 'spki', format: 'pem' }));
  }
  const cluster = options.cluster;
  const tokenFile = join(workDir, 'tokens.csv');
  await writeFile(
    tokenFile,
    `${state.adminToken},admin,admin-uid,"system:masters"\n${state.userToken},${TEST_USER},${TEST_USER}-uid\n` +
      (cluster
        ? `${state.nodeToken},system:node:${cluster.nodeName},node-${cluster.nodeName}-uid,"system:nodes"\n`
        : ''),
    { mode: 0o600 },
  );
  const pki = cluster ? await ensureClusterPki(workDir, [cluster.bindAddress]) : undefined;
  const nodeBinDir = cluster ? await ensureNodeBinaries(log) : undefined;

  const processes: ManagedProcess[] = [];
  const logFile = (name: string) => join(workDir, 'logs', `${name}.log`);
  let stopped = false;

  const stopAll = async () => {
    if (stopped) return;
    stopped = true;
    // Reverse start order: kcm → apiserver → etcd.
    for (const p of [...processes].reverse()) await p.stop();
    if (ownWorkDir) await rm(workDir, { recursive: true, force: true });
  };

  try {
    const etcdUrl = `http://127.0.0.1:${state.etcdClientPort}`;
    const etcd = startProcess('etcd', join(binDir, 'etcd'), etcdArgs(workDir, state, etcdUrl), {
      logFile: logFile('etcd'),
    });
    processes.push(etcd);
    await waitFor(
      'etcd health',
      async () => {
        const res = await fetch(`${etcdUrl}/health`);
        return res.ok && ((await res.json()) as { health?: string }).health === 'true';
      },
      { process: etcd },
    );
    log(`etcd ready on ${etcdUrl}`);

    const bindAddress = cluster?.bindAddress ?? '127.0.0.1';
    const server = `https://${bindAddress}:${state.apiServerPort}`;
    const apiServerArgs = kubeApiServerArgs({
      etcdUrl,
      bindAddress,
      state,
      tokenFile,
      certDir,
      pki,
      cluster: cluster !== undefined,
    });
    let caPem = '';
    const endpoint: KubeEndpoint = { server, token: state.adminToken, ca: '' };
    let apiServer: ManagedProcess | undefined;

    const startApiServer = async () => {
      apiServer = startProcess('kube-apiserver', join(binDir, 'kube-apiserver'), apiServerArgs, {
        logFile: logFile('kube-apiserver'),
      });
      processes.splice(1, 0, apiServer);
      const started = apiServer;
      // The API server self-signs into --cert-dir on first start; the file carries the cert and its CA.
      // In cluster mode the serving certificate comes from our own CA.
      await waitFor(
        'kube-apiserver serving certificate',
        async () => {
          caPem = await readFile(pki ? pki.caCert : join(certDir, 'apiserver.crt'), 'utf8');
          return caPem.includes('BEGIN CERTIFICATE');
        },
        { process: started },
      );
      endpoint.ca = caPem;
      await waitFor(
        'kube-apiserver /readyz',
        async () => (await kubeRequest(endpoint, 'GET', '/readyz')).status === 200,
        { process: started },
      );
      await waitFor(
        'namespace default',
        async () => (await kubeRequest(endpoint, 'GET', '/api/v1/namespaces/default')).status === 200,
        { process: started },
      );
    };
    const stopApiServer = async () => {
      if (!apiServer) return;
      const p = apiServer;
      apiServer = undefined;
      processes.splice(processes.indexOf(p), 1);
      await p.stop();
    };

    await startApiServer();
    log(`kube-apiserver ready on ${server}`);

    const kubeconfigPath = join(workDir, 'kubeconfig');
    const userKubeconfigPath = join(workDir, 'user.kubeconfig');
    await writeFile(kubeconfigPath, kubeconfig(server, caPem, 'admin', state.adminToken), { mode: 0o600 });
    await writeFile(userKubeconfigPath, kubeconfig(server, caPem, TEST_USER, state.userToken), {
      mode: 0o600,
    });

    /** kube-controller-manager or kube-scheduler from `dir`, its log in the work directory; stopped with the rest. */
    const startComponent = (name: string, dir: string, args: string[]) => {
      const started = startProcess(name, join(dir, name), args, { logFile: logFile(name), onLine: () => {} });
      processes.push(started);
      return started;
    };
    /** The admin kubeconfig, for the API server and for the component's own authentication and authorization. */
    const adminKubeconfigFlags = [
      `--kubeconfig=${kubeconfigPath}`,
      `--authentication-kubeconfig=${kubeconfigPath}`,
      `--authorization-kubeconfig=${kubeconfigPath}`,
    ];

    let nodeKubeconfigPath: string | undefined;
    if (cluster && pki && nodeBinDir) {
      nodeKubeconfigPath = join(workDir, 'node.kubeconfig');
      await writeFile(
        nodeKubeconfigPath,
        kubeconfig(server, caPem, `system:node:${cluster.nodeName}`, state.nodeToken ?? ''),
        { mode: 0o600 },
      );
      // Every controller (Deployments, ReplicaSets, ServiceAccount tokens, kube-root-ca.crt, ...) with a
      // credential per controller, and the scheduler; both use the admin kubeconfig.
      const kcm = startComponent('kube-controller-manager', binDir, [
        ...adminKubeconfigFlags,
        '--controllers=*',
        '--leader-elect=false',
        '--secure-port=0',
        '--use-service-account-credentials=true',
        `--root-ca-file=${pki.caCert}`,
        `--service-account-private-key-file=${saKeyFile}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--concurrent-gc-syncs=5',
        '--profiling=false',
      ]);
      const scheduler = startComponent('kube-scheduler', nodeBinDir, [
        ...adminKubeconfigFlags,
        '--leader-elect=false',
        '--secure-port=0',
        '--profiling=false',
      ]);
      await new Promise((r) => setTimeout(r, 500));
      for (const p of [kcm, scheduler]) {
        if (p.child.exitCode !== null) throw new Error(`${p.name} exited (see ${logFile(p.name)})`);
      }
      log('kube-controller-manager (every controller) and kube-scheduler started');
    } else if (options.controllerManager !== false && (await hasControllerManager(binDir))) {
      const kcm = startComponent('kube-controller-manager', binDir, [
        `--kubeconfig=${kubeconfigPath}`,
        '--controllers=namespace-controller,garbage-collector-controller,clusterrole-aggregation-controller',
        '--leader-elect=false',
        '--secure-port=0',
        '--concurrent-gc-syncs=5',
      ]);
      // kcm has no HTTP endpoint with --secure-port=0; give it a moment to fail fast on bad flags.
      await new Promise((r) => setTimeout(r, 500));
      if (kcm.child.exitCode !== null) {
        throw new Error(`kube-controller-manager exited (see ${logFile('kube-controller-manager')})`);
      }
      log(
        'kube-controller-manager started (namespace, garbage-collector, clusterrole-aggregation controllers)',
      );
    }

    if (options.installCrds !== false) {
      await installCrds(endpoint, await crdDocuments());
      log('CRDs installed and Established');
    }

    return {
      server,
      workDir,
      kubeconfigPath,
      userKubeconfigPath,
      adminToken: state.adminToken,
      userToken: state.userToken,
      get caPem() {
        return caPem;
      },
      endpoint,
      nodeKubeconfigPath,
      caFile: pki?.caCert,
      stopApiServer,
      startApiServer,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
