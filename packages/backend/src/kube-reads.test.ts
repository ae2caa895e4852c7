import assert from 'node:assert/strict';
import { type ApiServerDouble, startApiServerDouble } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { GitOpsDeploymentCr } from './kinds.ts';
import { readCurrentObject } from './kube-reads.ts';

// A one-function double of an API server (or a proxy in front of it) whose answer is not an object: the real
// API server never answers so (kube-reads.int.test.ts reads it), which is why this needs a double.
describe('a live read of a custom resource answered with something that is not an object', () => {
  let answer = '';
  let double: ApiServerDouble;
  const read = () =>
    readCurrentObject(
      double.kc,
      { get: () => undefined },
      GitOpsDeploymentCr,
      { namespace: 'tenant', name: 'app' },
      { signal: new AbortController().signal },
    );

  beforeAll(async () => {
    double = await startApiServerDouble((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(answer);
    });
  });
  afterAll(() => double.close());

  it('is an error, never "it does not exist" (rows would be deleted for an object that may exist)', async () => {
    for (const body of ['[]', '{}', '{"kind":"Status","metadata":{}}', 'null']) {
      answer = body;
      await assert.rejects(read(), /with something that is not an object/, body);
    }
    // An object whose spec is not an object is refused by the kind's parser: an error too.
    answer = '{"metadata":{"name":"app"},"spec":"nonsense"}';
    await assert.rejects(read(), /spec is not an object/);
    answer =
      '{"apiVersion":"managed-gitops.redhat.com/v1alpha1","kind":"GitOpsDeployment","metadata":{"name":"app"},"spec":{"type":"manual"}}';
    assert.equal((await read())?.metadata.name, 'app');
  });
});
