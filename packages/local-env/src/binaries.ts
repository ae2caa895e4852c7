import { execFile, spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './paths.ts';

const execFileAsync = promisify(execFile);

/**
 * Argo CD release whose CRDs and binary we use: the same as tools/argocd/go.mod (a unit test keeps them equal).
 * v3.5.3 is the newest v3.5.x whose release commit of the gitops-engine module the module proxy serves.
 */
export const ARGOCD_MODULE = 'github.com/argoproj/argo-cd/v3';
export const ARGOCD_VERSION = 'v3.5.3';

const CONTROL_PLANE_BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager'] as const;

export async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Folder holding etcd, kube-apiserver and kube-controller-manager.
 * `KUBEBUILDER_ASSETS` (envtest convention) wins; otherwise tools/k8s/build.sh builds them once from the Go
 * module proxy into the cache (10-20 min cold on 2 cores) and returns at once when they are there.
 */
export async function ensureControlPlaneBinaries(log: (line: string) => void = () => {}): Promise<string> {
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets) {
    for (const name of ['etcd', 'kube-apiserver'] as const) {
      if (!(await isExecutable(join(assets, name)))) {
        throw new Error(`KUBEBUILDER_ASSETS=${assets} has no executable ${name}`);
      }
    }
    return assets;
  }
  return runBuildScript('k8s', log);
}

/**
 * Folder holding kubelet, kube-scheduler and kubectl (the local cluster's node): `KUBEBUILDER_ASSETS` when it
 * has them, else `tools/k8s/build.sh --node` builds them once beside the control plane (about 2 min after the
 * control plane's build, on 2 cores).
 */
export async function ensureNodeBinaries(log: (line: string) => void = () => {}): Promise<string> {
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets && (await isExecutable(join(assets, 'kubelet')))) return assets;
  return runBuildScript('k8s', log, ['--node']);
}

/**
 * Runs tools/<tool>/build.sh (a one-time build into the cache; at once when cached), passing its progress
 * (stderr) to `log`, and returns the folder it prints last on stdout.
 */
export function runBuildScript(
  tool: string,
  log: (line: string) => void,
  args: string[] = [],
): Promise<string> {
  const script = join(repoRoot, 'tools', tool, 'build.sh');
  return new Promise((resolveDir, reject) => {
    const child = spawn('bash', [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line) log(line);
    });
    child.on('error', reject);
    // 'close', not 'exit': only then has everything the script printed on stdout been read.
    child.on('close', (code, signal) => {
      const dir = out.trim().split('\n').pop() ?? '';
      if (code === 0 && dir) resolveDir(dir);
      else if (code === 0) reject(new Error(`tools/${tool}/build.sh printed no folder`));
      else
        reject(
          new Error(
            `tools/${tool}/build.sh failed with ${signal ? `signal ${signal}` : `exit code ${code}`}`,
          ),
        );
    });
  });
}

/** Whether the cached/overridden control plane has kube-controller-manager (KUBEBUILDER_ASSETS may lack it). */
export async function hasControllerManager(binDir: string): Promise<boolean> {
  return isExecutable(join(binDir, 'kube-controller-manager'));
}

export { CONTROL_PLANE_BINARIES };

/** Downloads (once, into the Go module cache) the Argo CD module and returns its folder. */
export async function argoCdModuleDir(): Promise<string> {
  const { stdout } = await execFileAsync(
    'go',
    ['mod', 'download', '-json', `${ARGOCD_MODULE}@${ARGOCD_VERSION}`],
    {
      env: { ...process.env, GOFLAGS: '', GOTOOLCHAIN: 'local' },
      cwd: repoRoot,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const info = JSON.parse(stdout) as { Dir?: string; Error?: string };
  if (!info.Dir)
    throw new Error(`go mod download ${ARGOCD_MODULE}@${ARGOCD_VERSION} failed: ${info.Error ?? stdout}`);
  return info.Dir;
}

/** Paths of Argo CD's Application and AppProject CRDs from the Argo CD module's manifests/crds/. */
export async function argoCdCrdFiles(): Promise<string[]> {
  const dir = await argoCdModuleDir();
  return [
    join(dir, 'manifests', 'crds', 'application-crd.yaml'),
    join(dir, 'manifests', 'crds', 'appproject-crd.yaml'),
  ];
}
