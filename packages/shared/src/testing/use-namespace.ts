import { afterAll, beforeAll } from 'vitest';
import { HttpMethod, type KubeConfig, kubeRequest } from '../kube-client.ts';

/**
 * Namespace `name` on the test run's API server for the tests of the enclosing file or describe block:
 * created before them, deleted after them (a failed delete is left to the run's teardown).
 */
export function useNamespace(kc: KubeConfig, name: string): void {
  beforeAll(async () => {
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: '/api/v1/namespaces',
      body: { metadata: { name } },
    });
  });
  afterAll(async () => {
    await kubeRequest(kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(() => {});
  });
}
