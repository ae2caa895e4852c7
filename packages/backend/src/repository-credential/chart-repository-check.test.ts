import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedCertificate } from '@gitops/local-env';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { checkChartRepository } from './chart-repository-check.ts';

const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;

/**
 * A Helm repository at /charts (index.yaml behind basic auth u/p), and an OCI registry whose /v2/ asks for a
 * bearer token that /token gives for u/p, as a distribution registry with token auth does.
 */
function serve(req: IncomingMessage): { status: number; headers?: Record<string, string>; body?: string } {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const auth = req.headers.authorization;
  if (url.pathname === '/charts/index.yaml')
    return auth === basic('u', 'p')
      ? { status: 200, body: 'apiVersion: v1\nentries: {}\n' }
      : { status: 401 };
  if (url.pathname === '/token') {
    if (auth !== basic('u', 'p')) return { status: 401 };
    if (
      url.searchParams.get('scope') !== 'repository:charts/web:pull' ||
      url.searchParams.get('service') !== 'registry'
    )
      return { status: 400 };
    return { status: 200, body: JSON.stringify({ token: 'granted' }) };
  }
  if (url.pathname === '/v2/')
    return auth === 'Bearer granted'
      ? { status: 200, body: '{}' }
      : {
          status: 401,
          headers: { 'www-authenticate': `Bearer realm="https://${tlsHost}/token",service="registry"` },
        };
  return { status: 404 };
}

const handler = (req: IncomingMessage, res: ServerResponse) => {
  const answer = serve(req);
  res.writeHead(answer.status, answer.headers ?? {});
  res.end(answer.body ?? '');
};
let server: Server;
/** The same routes over HTTPS (an OCI registry is always reached over HTTPS), with its certificate. */
let tlsServer: Server;
let ca: string;
let dir: string;
let base = '';
let tlsHost = '';

const listen = async (s: Server) => {
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(s.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'chart-repository-check-'));
  const { cert, key } = await selfSignedCertificate(dir, '127.0.0.1');
  ca = await readFile(cert, 'utf8');
  server = createServer(handler);
  tlsServer = createHttpsServer({ cert: ca, key: await readFile(key) }, handler);
  base = `http://${await listen(server)}`;
  tlsHost = await listen(tlsServer);
});
afterAll(async () => {
  for (const s of [server, tlsServer]) await new Promise<void>((resolve) => s.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

describe('checkChartRepository', () => {
  it('a Helm repository: valid when its index answers with the credentials, invalidCredentials when it refuses them, invalidUrl when there is none', async () => {
    const good = { username: 'u', password: 'p' };
    assert.deepEqual(await checkChartRepository('helm', `${base}/charts/`, good), { result: 'valid' });
    assert.deepEqual(await checkChartRepository('helm', `${base}/charts`, { username: 'u', password: 'x' }), {
      result: 'invalidCredentials',
    });
    assert.deepEqual(await checkChartRepository('helm', `${base}/nowhere`, good), {
      result: 'invalidUrl',
      detail: 'the Helm repository answered HTTP 404',
    });
  });

  it('an OCI registry with token auth: the credentials buy a pull token for the repository; refused ones are invalidCredentials', async () => {
    const registry = `oci://${tlsHost}/charts/web`;
    assert.deepEqual(
      await checkChartRepository('oci', registry, { username: 'u', password: 'p' }, { ca: [ca] }),
      {
        result: 'valid',
      },
    );
    assert.deepEqual(
      await checkChartRepository('oci', registry, { username: 'u', password: 'x' }, { ca: [ca] }),
      { result: 'invalidCredentials' },
    );
    // A registry whose certificate is not trusted is no credential problem.
    const untrusted = await checkChartRepository(
      'oci',
      registry,
      { username: 'u', password: 'p' },
      { ca: [] },
    );
    assert.equal(untrusted.result, 'invalidUrl');
  });

  it('a host that does not answer is an invalidUrl naming why, never the credentials', async () => {
    const outcome = await checkChartRepository('helm', 'http://127.0.0.1:1/charts', {
      username: 'user',
      password: 'secret-password',
    });
    assert.equal(outcome.result, 'invalidUrl');
    assert.doesNotMatch(JSON.stringify(outcome), /secret-password/);
  });
});
