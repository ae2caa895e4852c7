/**
 * A local Helm repository for tests: charts packaged with `helm package` and indexed with `helm repo index`
 * (the `helm` of tools/argocd/build.sh, beside Argo CD), served as static files over HTTP by node's http
 * server, optionally behind basic auth. Also `helmCommand`, the one way these helpers run `helm`: with its
 * cache, configuration and registry login in a folder of their own, never the user's.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';
import { promisify } from 'node:util';
import type { Files } from './git-repo.ts';

const exec = promisify(execFile);

/** Runs `helm <args>` with its state under `home`; throws with helm's own message. */
export async function helmCommand(helm: string, home: string, args: string[]): Promise<string> {
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
    HELM_REGISTRY_CONFIG: join(home, 'registry.json'),
  };
  try {
    return (await exec(helm, args, { env })).stdout;
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`helm ${args[0]} failed: ${stderr.trim() || String(error)}`);
  }
}

/** Writes a chart's files (paths relative to the chart) into a new folder under `root`; returns it. */
export async function writeChart(root: string, files: Files): Promise<string> {
  const dir = await mkdtemp(join(root, 'chart-'));
  for (const [path, content] of Object.entries(files)) {
    if (content === null) continue; // (a deletion, in a Git commit's Files)
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

export interface HelmRepository {
  /** `http://127.0.0.1:<port>`: the repoURL of a chart of this repository. */
  readonly url: string;
  /** Packages the chart (files relative to it; its Chart.yaml names it and its version) and re-indexes. */
  publish(chart: Files): Promise<void>;
  /** Requests served so far (path and status), for assertions. */
  readonly requests: { path: string; status: number }[];
  stop(): Promise<void>;
}

/** Starts an empty Helm repository; with `auth`, every request needs HTTP basic auth with it. */
export async function startHelmRepository(options: {
  helm: string;
  auth?: { username: string; password: string };
}): Promise<HelmRepository> {
  const root = await mkdtemp(join(tmpdir(), 'helm-repository-'));
  const chartsDir = join(root, 'charts');
  await mkdir(chartsDir);
  const requests: { path: string; status: number }[] = [];
  const expected = options.auth
    ? `Basic ${Buffer.from(`${options.auth.username}:${options.auth.password}`).toString('base64')}`
    : undefined;

  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const answer = (status: number, body: Buffer | string, headers: Record<string, string> = {}) => {
      requests.push({ path, status });
      res.writeHead(status, headers);
      res.end(body);
    };
    if (expected && req.headers.authorization !== expected) {
      answer(401, 'authentication required\n', { 'WWW-Authenticate': 'Basic realm="charts"' });
      return;
    }
    const file = normalize(join(chartsDir, decodeURIComponent(path)));
    if (!file.startsWith(`${chartsDir}/`)) {
      answer(404, 'not found\n');
      return;
    }
    readFile(file).then(
      (content) => answer(200, content),
      () => answer(404, 'not found\n'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    async publish(chart) {
      const dir = await writeChart(root, chart);
      await helmCommand(options.helm, root, ['package', dir, '--destination', chartsDir]);
      await helmCommand(options.helm, root, ['repo', 'index', chartsDir, '--url', url]);
    },
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await rm(root, { recursive: true, force: true });
    },
  };
}
