/**
 * A local OCI registry for tests: Debian's `docker-registry` (the distribution registry, from
 * scripts/setup-machine.sh) started with a configuration of its own (filesystem storage in a temp folder, a
 * free loopback port, TLS with a self-signed certificate for 127.0.0.1: OCI clients, Argo CD's among them,
 * speak HTTPS unless told otherwise). Charts are pushed with `helm push`.
 */
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Files } from './git-repo.ts';
import { helmCommand, writeChart } from './helm-repository.ts';
import { selfSignedCertificate } from './pki.ts';
import { freePort } from './ports.ts';
import { type ManagedProcess, startProcess, waitFor } from './process.ts';

/** Where Debian's docker-registry package puts the registry. */
export const DOCKER_REGISTRY_BINARY = '/usr/bin/docker-registry';

export interface OciRegistry {
  /** `127.0.0.1:<port>` */
  readonly host: string;
  /** PEM of the certificate the registry presents (trust it for host 127.0.0.1). */
  readonly certificate: string;
  /** Packages the chart and pushes it to `oci://<host>/<repository>/<chart name>`; returns that URL. */
  pushChart(repository: string, chart: Files): Promise<string>;
  stop(): Promise<void>;
}

/** Starts an empty registry; fails naming the Debian package when it is not installed. */
export async function startOciRegistry(options: {
  helm: string;
  onLine?: (line: string) => void;
}): Promise<OciRegistry> {
  await access(DOCKER_REGISTRY_BINARY).catch(() => {
    throw new Error(
      `${DOCKER_REGISTRY_BINARY} not found: install Debian's docker-registry package (scripts/setup-machine.sh)`,
    );
  });
  const root = await mkdtemp(join(tmpdir(), 'oci-registry-'));
  const { cert, key } = await selfSignedCertificate(root, '127.0.0.1');
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const config = join(root, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(root, 'data')}`,
      'http:',
      `  addr: ${host}`,
      '  tls:',
      `    certificate: ${cert}`,
      `    key: ${key}`,
      '',
    ].join('\n'),
  );
  const certificate = await readFile(cert, 'utf8');
  const process: ManagedProcess = startProcess('docker-registry', DOCKER_REGISTRY_BINARY, ['serve', config], {
    ...(options.onLine ? { onLine: options.onLine } : {}),
  });
  const answers = () =>
    new Promise<boolean>((resolve) => {
      const req = request(`https://${host}/v2/`, { ca: certificate }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      });
      req.on('error', () => resolve(false));
      req.end();
    });
  try {
    await waitFor('the OCI registry', answers, { timeoutMs: 30_000, process });
  } catch (error) {
    await process.stop();
    await rm(root, { recursive: true, force: true });
    throw error;
  }

  return {
    host,
    certificate,
    async pushChart(repository, chart) {
      const dir = await writeChart(root, chart);
      const out = join(root, 'packaged');
      const packaged = await helmCommand(options.helm, root, ['package', dir, '--destination', out]);
      // "Successfully packaged chart and saved it to: <path>"
      const archive = packaged.trim().split(': ').at(-1) ?? '';
      await helmCommand(options.helm, root, [
        'push',
        archive,
        `oci://${host}/${repository}`,
        '--ca-file',
        cert,
      ]);
      const name = /^name:\s*(\S+)/m.exec(chart['Chart.yaml'] ?? '')?.[1] ?? '';
      return `oci://${host}/${repository}/${name}`;
    },
    async stop() {
      await process.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}
