/**
 * A local OCI registry for tests: Debian's `docker-registry` (the distribution registry, from
 * scripts/setup-machine.sh) started with a configuration of its own (filesystem storage in a temp folder, a
 * free loopback port, TLS with a self-signed certificate for 127.0.0.1: OCI clients, Argo CD's among them,
 * speak HTTPS unless told otherwise). Charts are pushed with `helm push`.
 *
 * With `auth`, the registry wants a bearer token (its `token` authentication, as hosted registries do): a
 * token service of the test's own (node's https server, same certificate) gives one for those credentials,
 * a JWT signed with the certificate's key, its chain in the `x5c` header, granting pull and push on what is
 * asked; other credentials get 401.
 */
import { createPrivateKey, randomUUID, sign, X509Certificate } from 'node:crypto';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
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
  /** The same certificate as a file (GIT_SSL_CAINFO of a process that checks the registry). */
  readonly caFile: string;
  /** Packages the chart and pushes it to `oci://<host>/<repository>/<chart name>`; returns that URL. */
  pushChart(repository: string, chart: Files): Promise<string>;
  stop(): Promise<void>;
}

/** Starts an empty registry; fails naming the Debian package when it is not installed. */
export async function startOciRegistry(options: {
  helm: string;
  auth?: { username: string; password: string };
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
  const certificate = await readFile(cert, 'utf8');
  const tokens = options.auth
    ? await startTokenService(options.auth, certificate, await readFile(key, 'utf8'))
    : undefined;
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
      ...(tokens
        ? [
            'auth:',
            '  token:',
            `    realm: ${tokens.realm}`,
            `    service: ${TOKEN_SERVICE}`,
            `    issuer: ${TOKEN_ISSUER}`,
            `    rootcertbundle: ${cert}`,
          ]
        : []),
      '',
    ].join('\n'),
  );
  const process: ManagedProcess = startProcess('docker-registry', DOCKER_REGISTRY_BINARY, ['serve', config], {
    ...(options.onLine ? { onLine: options.onLine } : {}),
  });
  const answers = () =>
    new Promise<boolean>((resolve) => {
      const req = request(`https://${host}/v2/`, { ca: certificate }, (res) => {
        res.resume();
        resolve(res.statusCode === 200 || (options.auth !== undefined && res.statusCode === 401));
      });
      req.on('error', () => resolve(false));
      req.end();
    });
  try {
    await waitFor('the OCI registry', answers, { timeoutMs: 30_000, process });
  } catch (error) {
    await process.stop();
    await tokens?.stop();
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  if (options.auth) {
    await helmCommand(options.helm, root, [
      'registry',
      'login',
      host,
      '--username',
      options.auth.username,
      '--password',
      options.auth.password,
      '--ca-file',
      cert,
    ]);
  }

  return {
    host,
    certificate,
    caFile: cert,
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
      await tokens?.stop();
      await rm(root, { recursive: true, force: true });
    },
  };
}

const TOKEN_SERVICE = 'local-registry';
const TOKEN_ISSUER = 'local-token-service';

const base64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

/**
 * The registry's token service: `GET /token?service=...&scope=repository:<name>:<actions>` with basic auth
 * gives `{token}` granting the scopes asked for, 401 otherwise.
 */
async function startTokenService(
  auth: { username: string; password: string },
  certificate: string,
  keyPem: string,
): Promise<{ realm: string; stop(): Promise<void> }> {
  const expected = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
  const key = createPrivateKey(keyPem);
  const chain = [new X509Certificate(certificate).raw.toString('base64')];
  const server: Server = createServer({ cert: certificate, key: keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    if (url.pathname !== '/token' || req.headers.authorization !== expected) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="token"' });
      res.end();
      return;
    }
    const access = url.searchParams.getAll('scope').flatMap((scope) => {
      const [type, name, actions] = scope.split(':');
      return type && name && actions ? [{ type, name, actions: actions.split(',') }] : [];
    });
    const now = Math.floor(Date.now() / 1000);
    const header = base64url(JSON.stringify({ typ: 'JWT', alg: 'RS256', x5c: chain }));
    const claims = base64url(
      JSON.stringify({
        iss: TOKEN_ISSUER,
        sub: auth.username,
        aud: url.searchParams.get('service') ?? TOKEN_SERVICE,
        exp: now + 300,
        nbf: now - 10,
        iat: now,
        jti: randomUUID(),
        access,
      }),
    );
    const signature = base64url(sign('RSA-SHA256', Buffer.from(`${header}.${claims}`), key));
    const token = `${header}.${claims}.${signature}`;
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ token, access_token: token, expires_in: 300 }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    realm: `https://127.0.0.1:${(server.address() as AddressInfo).port}/token`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
