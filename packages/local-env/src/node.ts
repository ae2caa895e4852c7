/**
 * A real Kubernetes node for the local control plane: containerd (its own socket, root and state, so a Docker
 * engine's containerd is untouched) + a kubelet, joined to a control plane started in cluster mode, with a
 * bridge CNI network on a small private subnet and images imported from the local Docker engine
 * (`docker save | ctr import`, nothing pulled). Facts and settings: docs/testing.md ("Tier 4").
 *
 * One node per machine at a time (the kubelet's `/kubepods` cgroups are shared). The daemons run in their own
 * session; their PIDs are kept in `<state>/pids.json`, and a start first stops what a crashed run left. Stop
 * tears the Pods down through containerd, stops the daemons by PID, unmounts what they mounted and restores
 * the kernel settings the kubelet rewrites.
 */
import { execFile, spawn } from 'node:child_process';
import { access, constants, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ensureNodeBinaries } from './binaries.ts';
import { type ControlPlane, type ControlPlaneOptions, startControlPlane } from './control-plane.ts';
import { kubeRequest } from './kube-request.ts';
import {
  CLUSTER_API_PORT,
  CNI_DIR,
  cniConfig,
  containerdConfig,
  KUBELET_PORT,
  kubeletConfig,
  NODE_BRIDGE,
  NODE_GATEWAY,
  NODE_NAME,
  NODE_SUBNET,
  PAUSE_IMAGE,
} from './node-config.ts';
import { type ManagedProcess, startProcess, waitFor } from './process.ts';

const execFileAsync = promisify(execFile);

/** Global kernel settings the kubelet rewrites; saved before it starts and restored when it stops. */
const KUBELET_SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];

/**
 * The full name containerd (and the kubelet) give an image reference of Docker's short form:
 * `gitops-service/pause:local` → `docker.io/gitops-service/pause:local`, `redis` → `docker.io/library/redis:latest`.
 */
export function containerdImageName(image: string): string {
  const tagged = /[:@][^/]*$/.test(image) ? image : `${image}:latest`;
  const [first = '', ...rest] = tagged.split('/');
  const hasHost = rest.length > 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasHost) return tagged;
  return rest.length === 0 ? `docker.io/library/${tagged}` : `docker.io/${tagged}`;
}

async function exists(path: string, mode = constants.F_OK): Promise<boolean> {
  return access(path, mode).then(
    () => true,
    () => false,
  );
}

async function onPath(command: string): Promise<boolean> {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    if (await exists(join(dir, command), constants.X_OK)) return true;
  }
  return false;
}

async function run(command: string, args: string[]): Promise<string> {
  try {
    return (await execFileAsync(command, args, { maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr.trim() || String(error)}`);
  }
}

/**
 * Whether this machine can run the node, and if not why: root, Linux, containerd + ctr + runc, the CNI
 * plugins (Debian's containernetworking-plugins), a Docker engine with the images. scripts/setup-machine.sh
 * installs the packages; `pnpm images` builds the images.
 */
export async function nodeSupport(
  images: string[] = [PAUSE_IMAGE],
): Promise<{ ok: boolean; reason?: string }> {
  if (process.platform !== 'linux') return { ok: false, reason: 'not Linux' };
  if (process.getuid?.() !== 0)
    return { ok: false, reason: 'not root (the kubelet and containerd need root)' };
  for (const command of ['containerd', 'ctr', 'runc', 'ip', 'iptables', 'docker']) {
    if (!(await onPath(command)))
      return { ok: false, reason: `${command} is not installed (run scripts/setup-machine.sh)` };
  }
  for (const plugin of ['bridge', 'host-local', 'loopback', 'firewall']) {
    if (!(await exists(join(CNI_DIR, plugin))))
      return { ok: false, reason: `no CNI plugin ${CNI_DIR}/${plugin} (run scripts/setup-machine.sh)` };
  }
  try {
    await run('docker', ['version', '--format', '{{.Server.Version}}']);
  } catch {
    return { ok: false, reason: 'the Docker engine is not running (run scripts/setup-machine.sh)' };
  }
  if (!(await portFree(KUBELET_PORT))) {
    return {
      ok: false,
      reason: `port ${KUBELET_PORT} is taken: another local cluster node runs on this machine (one at a time)`,
    };
  }
  for (const image of images) {
    try {
      await run('docker', ['image', 'inspect', image]);
    } catch {
      return { ok: false, reason: `image ${image} is missing (run pnpm images)` };
    }
  }
  return { ok: true };
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolveFree) => {
    const server = createServer();
    server.once('error', () => resolveFree(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolveFree(true)));
  });
}

/** Creates the node network's bridge with the gateway address (before the API server binds to it). */
export async function ensureNodeNetwork(): Promise<void> {
  const show = await run('ip', ['-o', '-4', 'addr', 'show', 'dev', NODE_BRIDGE]).catch(() => undefined);
  if (show === undefined) await run('ip', ['link', 'add', NODE_BRIDGE, 'type', 'bridge']);
  if (!show?.includes(`${NODE_GATEWAY}/`)) {
    await run('ip', ['addr', 'add', `${NODE_GATEWAY}/26`, 'dev', NODE_BRIDGE]);
  }
  await run('ip', ['link', 'set', NODE_BRIDGE, 'up']);
}

export async function removeNodeNetwork(): Promise<void> {
  await run('ip', ['link', 'del', NODE_BRIDGE]).catch(() => {});
  // The firewall plugin's rules of Pods whose containers were ended through ctr (no CNI DEL removed them).
  const podAddress = new RegExp(` -[sd] ${NODE_SUBNET.split('.').slice(0, 3).join('\\.')}\\.\\d+/32 `);
  const rules = await run('iptables', ['-S', 'CNI-FORWARD']).catch(() => '');
  for (const rule of rules.split('\n').filter((r) => r.startsWith('-A CNI-FORWARD ') && podAddress.test(r))) {
    await run('iptables', ['-D', ...rule.slice('-A '.length).split(' ')]).catch(() => {});
  }
}

async function readSysctls(): Promise<Record<string, string>> {
  const values: Record<string, string> = {};
  for (const key of KUBELET_SYSCTLS) {
    values[key] = (await readFile(`/proc/sys/${key}`, 'utf8').catch(() => '')).trim();
  }
  return values;
}

async function restoreSysctls(file: string): Promise<void> {
  const saved = await readFile(file, 'utf8').then(
    (text) => JSON.parse(text) as Record<string, string>,
    () => undefined,
  );
  if (!saved) return;
  for (const [key, value] of Object.entries(saved)) {
    if (value) await writeFile(`/proc/sys/${key}`, value).catch(() => {});
  }
  await rm(file, { force: true });
}

/** Unmounts everything mounted under `dir` (deepest first): Pod volumes, network namespaces, overlays. */
async function unmountUnder(dir: string): Promise<void> {
  const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
  const points = mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((p) => p === dir || p.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const p of points) await run('umount', ['-l', p]).catch(() => {});
}

async function alive(pid: number, marker: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.includes(marker);
}

async function killPid(pid: number, marker: string): Promise<void> {
  if (!(await alive(pid, marker))) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100 && (await alive(pid, marker)); i++) await new Promise((r) => setTimeout(r, 100));
  if (await alive(pid, marker)) process.kill(pid, 'SIGKILL');
}

/** PIDs of processes whose command line names `marker` (containerd's shims carry our socket's path). */
async function pidsNaming(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    if (await alive(pid, marker)) pids.push(pid);
  }
  return pids;
}

export interface NodeOptions {
  /** Images (of the local Docker engine) to import into the node; the pause image is always imported. */
  images?: string[];
  log?: (line: string) => void;
}

export interface KubeNode {
  readonly name: string;
  readonly stateDir: string;
  /** Path of kubectl (built beside the control plane). */
  readonly kubectl: string;
  /**
   * Imports more images from the local Docker engine; each is then known by its tag and by its digest
   * (`<name>@sha256:…`), as a pulled image is. Returns each image's digest on the node.
   */
  importImages(images: string[]): Promise<Record<string, string>>;
  stop(): Promise<void>;
}

/** Stops what a previous run left (by the PIDs it recorded), unmounts its mounts and removes its state. */
async function cleanUpState(state: string): Promise<void> {
  const pids = await readFile(join(state, 'pids.json'), 'utf8').then(
    (text) => JSON.parse(text) as Record<string, number>,
    () => ({}) as Record<string, number>,
  );
  if (pids.kubelet) await killPid(pids.kubelet, 'kubelet');
  const socket = join(state, 'containerd', 'containerd.sock');
  for (const pid of await pidsNaming(socket)) await killPid(pid, socket);
  if (pids.containerd) await killPid(pids.containerd, 'containerd');
  await unmountUnder(state);
  await rm(state, { recursive: true, force: true });
}

/**
 * Starts containerd and a kubelet joined to `controlPlane` (started in cluster mode), imports the images and
 * waits until the node is Ready.
 */
export async function startNode(controlPlane: ControlPlane, options: NodeOptions = {}): Promise<KubeNode> {
  const log = options.log ?? (() => {});
  if (!controlPlane.nodeKubeconfigPath || !controlPlane.caFile) {
    throw new Error('startNode needs a control plane started in cluster mode (startCluster)');
  }
  const binDir = await ensureNodeBinaries(log);
  const state = join(controlPlane.workDir, 'node');
  const sysctlFile = join(controlPlane.workDir, 'sysctls.json');
  await cleanUpState(state);
  await restoreSysctls(sysctlFile);
  for (const dir of ['containerd', 'cni/net.d', 'cni/ipam', 'kubelet', 'pod-logs', 'logs']) {
    await mkdir(join(state, dir), { recursive: true, mode: 0o700 });
  }
  const socket = join(state, 'containerd', 'containerd.sock');
  await writeFile(join(state, 'containerd', 'config.toml'), containerdConfig(state));
  await writeFile(join(state, 'cni', 'net.d', '10-gitops-local.conflist'), cniConfig(state));
  await writeFile(join(state, 'kubelet-config.yaml'), kubeletConfig(state, controlPlane.caFile));
  await writeFile(sysctlFile, JSON.stringify(await readSysctls()));

  const processes: ManagedProcess[] = [];
  const pids: Record<string, number> = {};
  const recordPids = () => writeFile(join(state, 'pids.json'), JSON.stringify(pids));
  const ctr = (args: string[]) => run('ctr', ['--address', socket, '--namespace', 'k8s.io', ...args]);

  const importImages = async (images: string[]): Promise<Record<string, string>> => {
    if (images.length === 0) return {};
    const started = Date.now();
    await new Promise<void>((resolve, reject) => {
      const save = spawn('docker', ['save', ...images], { stdio: ['ignore', 'pipe', 'pipe'] });
      const load = spawn(
        'ctr',
        ['--address', socket, '--namespace', 'k8s.io', 'images', 'import', '--no-unpack', '-'],
        {
          stdio: ['pipe', 'ignore', 'pipe'],
        },
      );
      let errors = '';
      save.stderr.on('data', (c: Buffer) => {
        errors += c.toString();
      });
      load.stderr.on('data', (c: Buffer) => {
        errors += c.toString();
      });
      save.stdout.pipe(load.stdin);
      let pending = 2;
      const done = (code: number | null) => {
        if (code !== 0) reject(new Error(`importing ${images.join(', ')} failed: ${errors.trim()}`));
        else if (--pending === 0) resolve();
      };
      save.on('exit', done);
      load.on('exit', done);
    });
    // The CRI plugin records a pulled image under its tag and its digest; an imported one has its tag only.
    // Add the digest reference, so that a Pod naming `<name>@sha256:…` (a rendered overlay pins images by
    // digest) finds it without a pull.
    const digests: Record<string, string> = {};
    const listed = new Map(
      (await ctr(['images', 'ls']))
        .split('\n')
        .slice(1)
        .map((line) => line.split(/\s+/))
        .map(([ref = '', , digest = '']) => [ref, digest] as const),
    );
    for (const image of images) {
      const ref = containerdImageName(image);
      const digest = listed.get(ref);
      if (!digest?.startsWith('sha256:'))
        throw new Error(`image ${image} is not on the node after its import`);
      digests[image] = digest;
      await ctr(['images', 'tag', '--force', ref, `${ref.replace(/:[^:/@]+$/, '')}@${digest}`]);
    }
    log(`imported ${images.join(', ')} into the node in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    return digests;
  };

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    const kubelet = processes.find((p) => p.name === 'kubelet');
    await kubelet?.stop(10_000);
    // Pods down through containerd before it stops: kill every task, then remove tasks and containers.
    if (await exists(socket)) {
      const tasks = (await ctr(['tasks', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean);
      for (const id of tasks)
        await ctr(['tasks', 'kill', '--all', '--signal', 'SIGKILL', id]).catch(() => {});
      for (const id of tasks) await ctr(['tasks', 'delete', '--force', id]).catch(() => {});
      const containers = (await ctr(['containers', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean);
      for (const id of containers) await ctr(['containers', 'delete', id]).catch(() => {});
    }
    await processes.find((p) => p.name === 'containerd')?.stop(10_000);
    for (const pid of await pidsNaming(socket)) await killPid(pid, socket);
    await unmountUnder(state);
    await rm(state, { recursive: true, force: true });
    await restoreSysctls(sysctlFile);
  };

  try {
    const containerd = startProcess(
      'containerd',
      'containerd',
      ['--config', join(state, 'containerd', 'config.toml')],
      {
        logFile: join(state, 'logs', 'containerd.log'),
        detached: true,
      },
    );
    processes.push(containerd);
    pids.containerd = containerd.child.pid ?? 0;
    await recordPids();
    // `ctr` waits about 10 s on a missing socket: wait for the file first.
    await waitFor('containerd socket', () => exists(socket), { process: containerd });
    await waitFor('containerd', async () => (await ctr(['version'])).includes('Server'), {
      process: containerd,
    });
    await importImages([...new Set([PAUSE_IMAGE, ...(options.images ?? [])])]);

    const kubelet = startProcess(
      'kubelet',
      join(binDir, 'kubelet'),
      [
        `--config=${join(state, 'kubelet-config.yaml')}`,
        `--kubeconfig=${controlPlane.nodeKubeconfigPath}`,
        `--root-dir=${join(state, 'kubelet')}`,
        `--hostname-override=${NODE_NAME}`,
        '--v=1',
      ],
      { logFile: join(state, 'logs', 'kubelet.log'), detached: true },
    );
    processes.push(kubelet);
    pids.kubelet = kubelet.child.pid ?? 0;
    await recordPids();
    await waitFor(
      `node ${NODE_NAME} Ready`,
      async () => {
        const res = await kubeRequest(controlPlane.endpoint, 'GET', `/api/v1/nodes/${NODE_NAME}`);
        const conditions = (res.body as { status?: { conditions?: { type: string; status: string }[] } })
          .status?.conditions;
        return conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      },
      { process: kubelet, timeoutMs: 180_000, intervalMs: 500 },
    );
    log(`node ${NODE_NAME} Ready (kubelet + containerd, state ${state})`);
    return { name: NODE_NAME, stateDir: state, kubectl: join(binDir, 'kubectl'), importImages, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

export interface ClusterOptions extends Omit<ControlPlaneOptions, 'cluster'> {
  /** Images of the local Docker engine to import into the node. */
  images?: string[];
}

export interface Cluster extends ControlPlane {
  readonly node: KubeNode;
  /** The address Pods reach the API server and the host's services on. */
  readonly gateway: string;
}

/**
 * The control plane in cluster mode and one real node: Pods run. Check {@link nodeSupport} first.
 * The API server serves on the node network's gateway ({@link NODE_GATEWAY}:{@link CLUSTER_API_PORT}).
 */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  await ensureNodeNetwork();
  const controlPlane = await startControlPlane({
    ...options,
    cluster: { bindAddress: NODE_GATEWAY, nodeName: NODE_NAME, apiServerPort: CLUSTER_API_PORT },
  });
  let node: KubeNode;
  try {
    node = await startNode(controlPlane, { images: options.images, log: options.log });
  } catch (error) {
    await controlPlane.stop();
    throw error;
  }
  return Object.assign(Object.create(controlPlane) as ControlPlane, {
    node,
    gateway: NODE_GATEWAY,
    async stop() {
      await node.stop();
      await controlPlane.stop();
      await removeNodeNetwork();
    },
  }) as Cluster;
}
