import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@gitops/shared';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { readCurrentObject } from './kube-reads.ts';

// A one-function double of an API server (or a proxy in front of it) whose answer is not an object: the real
// API server never answers so (kube-reads.int.test.ts reads it), which is why this needs a double.
describe('a live read of a custom resource answered with something that is not an object', () => {
  let answer = '';
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer);
  });
  const kc = new KubeConfig();
  const read = () =>
    readCurrentObject(
      kc,
      { get: () => undefined },
      { apiVersion: 'managed-gitops.redhat.com/v1alpha1', plural: 'gitopsdeployments' },
      { namespace: 'tenant', name: 'app' },
      { signal: new AbortController().signal },
    );

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

  it('is an error, never "it does not exist" (rows would be deleted for an object that may exist)', async () => {
    for (const body of ['[]', '{}', '{"kind":"Status","metadata":{}}', 'null']) {
      answer = body;
      await assert.rejects(read(), /with something that is not an object/, body);
    }
    answer =
      '{"apiVersion":"managed-gitops.redhat.com/v1alpha1","kind":"GitOpsDeployment","metadata":{"name":"app"}}';
    assert.equal((await read())?.metadata.name, 'app');
  });
});
