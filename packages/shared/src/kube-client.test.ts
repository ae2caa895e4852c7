import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpMethod, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { KubeApiError } from './errors.ts';
import { kubeRequest } from './kube-client.ts';
import { type ApiServerDouble, startApiServerDouble } from './testing/index.ts';

// A one-function double of the API server's throttling answer (429 + Retry-After); the real API server
// is used by kube.int.test.ts.
describe('kubeRequest on a throttled API server', () => {
  let answers: number[] = [];
  let requests = 0;
  let double: ApiServerDouble;
  let kc: KubeConfig;

  beforeAll(async () => {
    double = await startApiServerDouble((_req, res) => {
      requests++;
      const status = answers.shift() ?? 200;
      res.writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' });
      res.end(
        JSON.stringify(
          status === 200 ? { kind: 'ConfigMap', ok: true } : { message: 'storage is (re)initializing' },
        ),
      );
    });
    kc = double.kc;
  });
  afterAll(() => double.close());

  it('sends the request again after a 429 and returns the answer', async () => {
    answers = [429, 429];
    requests = 0;
    const body = await kubeRequest(kc, { method: HttpMethod.GET, path: '/api/v1/namespaces/a/configmaps/b' });
    assert.deepEqual(body, { kind: 'ConfigMap', ok: true });
    assert.equal(requests, 3);
  });

  it('gives up with a KubeApiError when the API server keeps throttling', async () => {
    answers = Array.from({ length: 20 }, () => 429);
    requests = 0;
    await assert.rejects(
      kubeRequest(kc, { method: HttpMethod.GET, path: '/api/v1/namespaces/a/configmaps/b' }),
      (e: unknown) => e instanceof KubeApiError && e.statusCode === 429,
    );
    assert.equal(requests, 6);
  });
});

// The same kind of one-function double: it refuses the first token it is shown, and accepts any other.
describe('kubeRequest with credentials the API server refuses', () => {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers.authorization ?? '');
    const ok = req.headers.authorization !== seen[0];
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
    res.end(JSON.stringify(ok ? { kind: 'ConfigMap' } : { message: 'Unauthorized', reason: 'Unauthorized' }));
  });
  let issued = 0;
  const kc = new KubeConfig();

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    // A plugin whose token changes each time it is asked (as an exec plugin after its token expired).
    kc.addAuthenticator({
      isAuthProvider: (user) => user.authProvider?.name === 'rotating',
      applyAuthentication: async (_user, opts) => {
        issued++;
        opts.headers = { ...opts.headers, Authorization: `Bearer token-${issued}` };
      },
    });
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', authProvider: { name: 'rotating', config: {} } }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('takes the credentials afresh after a 401 instead of reusing them', async () => {
    const path = '/api/v1/namespaces/a/configmaps/b';
    await assert.rejects(
      kubeRequest(kc, { method: HttpMethod.GET, path }),
      (e: unknown) => e instanceof KubeApiError && e.statusCode === 401,
    );
    assert.deepEqual(await kubeRequest(kc, { method: HttpMethod.GET, path }), { kind: 'ConfigMap' });
    assert.equal(seen.length, 2);
    assert.match(seen[1] ?? '', /^Bearer token-\d+$/);
    assert.notEqual(seen[1], seen[0]);
  });
});
