import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpMethod, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { KubeApiError } from './errors.ts';
import { kubeRequest } from './kube.ts';

// A one-function double of the API server's throttling answer (429 + Retry-After); the real API server
// is used by kube.int.test.ts.
describe('kubeRequest on a throttled API server', () => {
  let answers: number[] = [];
  let requests = 0;
  const server = createServer((_req, res) => {
    requests++;
    const status = answers.shift() ?? 200;
    res.writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' });
    res.end(
      JSON.stringify(
        status === 200 ? { kind: 'ConfigMap', ok: true } : { message: 'storage is (re)initializing' },
      ),
    );
  });
  const kc = new KubeConfig();

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

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
