/**
 * End to end: the RHOAS operator as a process (src/main.ts) against the real API server and the local
 * cloud services API, walking the console's flow (token Secret → CloudServiceAccountRequest →
 * CloudServicesRequest → KafkaConnection → binding Secret); deleting the CRs removes the Secrets they own.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { RHOAS_API_GROUP_VERSION, RhoasPlural } from '@gitops/api';
import {
  type CloudServicesApi,
  freePort,
  startCloudServicesApi,
  startProcess,
  waitFor,
} from '@gitops/local-env';
import { getPathIfExists, HttpMethod, type KubeObject, kubeRequest, loadKubeConfig } from '@gitops/shared';
import { randomSuffix, useNamespace } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { eventually, OFFLINE_TOKEN } from './testing/rhoas-fixture.ts';

const mainPath = fileURLToPath(new URL('./main.ts', import.meta.url));
const kc = loadKubeConfig(process.env.KUBECONFIG);
const namespace = `rhoas-main-${randomSuffix()}`;
let api: CloudServicesApi;

const cr = (plural: string, name = '') =>
  `/apis/${RHOAS_API_GROUP_VERSION}/namespaces/${namespace}/${plural}${name ? `/${name}` : ''}`;
const secret = (name = '') => `/api/v1/namespaces/${namespace}/secrets${name ? `/${name}` : ''}`;
type Cr = KubeObject & {
  status?: Record<string, unknown> & { conditions?: { type: string; status: string }[] };
};
const get = async (path: string) =>
  (await getPathIfExists(kc, path)) as (Cr & { data?: Record<string, string> }) | undefined;
const finished = (path: string) =>
  eventually(`${path} Finished=True`, async () => {
    const object = await get(path);
    return object?.status?.conditions?.some((c) => c.type === 'Finished' && c.status === 'True')
      ? object
      : undefined;
  });
const post = (path: string, body: Record<string, unknown>) =>
  kubeRequest(kc, { method: HttpMethod.POST, path, body: { apiVersion: RHOAS_API_GROUP_VERSION, ...body } });

describe('the rhoas-operator process', () => {
  useNamespace(kc, namespace);
  beforeAll(async () => {
    api = await startCloudServicesApi();
  });
  afterAll(async () => {
    await api?.close();
  });

  it('serves the console flow, then deleting the CRs removes the Secrets they own', async () => {
    const port = await freePort();
    const lines: string[] = [];
    let clientSecret = '';
    const child = startProcess('rhoas-operator', process.execPath, [mainPath], {
      env: {
        ...process.env,
        HTTP_PORT: String(port),
        HTTP_HOST: '127.0.0.1',
        CLOUD_SERVICES_API: api.url,
        CLOUD_SERVICES_SSO: api.ssoUrl,
        RHOAS_WATCH_NAMESPACE: namespace,
        LOG_LEVEL: 'debug',
      },
      onLine: (l) => lines.push(l),
    });
    try {
      await waitFor('/readyz', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).ok, {
        process: child,
        timeoutMs: 60_000,
      });
      // 1. The token Secret the console writes.
      await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: secret(),
        body: {
          metadata: { name: 'rh-managed-services-api-accesstoken' },
          stringData: { value: OFFLINE_TOKEN },
        },
      });
      // 2. A service account and its Secret.
      await post(cr(RhoasPlural.CloudServiceAccountRequest), {
        kind: 'CloudServiceAccountRequest',
        metadata: { name: 'rhoas-operator-x1y2' },
        spec: {
          serviceAccountName: 'rhoas-operator-x1y2',
          serviceAccountDescription: 'console',
          serviceAccountSecretName: 'rh-managed-services-service-account',
          accessTokenSecretName: 'rh-managed-services-api-accesstoken',
        },
      });
      await finished(cr(RhoasPlural.CloudServiceAccountRequest, 'rhoas-operator-x1y2'));
      const sa = await get(secret('rh-managed-services-service-account'));
      clientSecret = Buffer.from(sa?.data?.['client-secret'] ?? '', 'base64').toString('utf8');
      assert.ok(clientSecret);
      // 3. Which kafkas can the token see?
      await post(cr(RhoasPlural.CloudServicesRequest), {
        kind: 'CloudServicesRequest',
        metadata: { name: 'cloud-services' },
        spec: { accessTokenSecretName: 'rh-managed-services-api-accesstoken' },
      });
      const csr = await finished(cr(RhoasPlural.CloudServicesRequest, 'cloud-services'));
      const kafkaId = ((csr.status?.userKafkas ?? []) as { id: string }[])[0]?.id;
      assert.equal(kafkaId, api.seed.kafkas[0]?.id);
      // 4. Connect the chosen one.
      await post(cr(RhoasPlural.KafkaConnection), {
        kind: 'KafkaConnection',
        metadata: { name: 'orders' },
        spec: {
          kafkaId,
          accessTokenSecretName: 'rh-managed-services-api-accesstoken',
          credentials: { serviceAccountSecretName: 'rh-managed-services-service-account' },
        },
      });
      const kc1 = await finished(cr(RhoasPlural.KafkaConnection, 'orders'));
      assert.equal(kc1.status?.bootstrapServerHost, api.seed.kafkas[0]?.bootstrap_server_host);
      // 5. The binding Secret carries the credentials for servicebinding.io.
      const binding = await get(secret('orders-binding'));
      assert.equal(
        Buffer.from(binding?.data?.['client-secret'] ?? '', 'base64').toString('utf8'),
        clientSecret,
      );

      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      assert.match(metrics, /controller_runtime_reconcile_total\{[^}]*controller="kafkaconnection"/);

      // Deleting the CRs: the garbage collector removes what they own.
      await kubeRequest(kc, { method: HttpMethod.DELETE, path: cr(RhoasPlural.KafkaConnection, 'orders') });
      await kubeRequest(kc, {
        method: HttpMethod.DELETE,
        path: cr(RhoasPlural.CloudServiceAccountRequest, 'rhoas-operator-x1y2'),
      });
      await eventually('the owned Secrets are gone', async () =>
        (await get(secret('orders-binding'))) === undefined &&
        (await get(secret('rh-managed-services-service-account'))) === undefined
          ? true
          : undefined,
      );
      // The token Secret is the user's: untouched.
      assert.ok(await get(secret('rh-managed-services-api-accesstoken')));
    } finally {
      child.child.kill('SIGTERM');
    }
    assert.equal(await child.exited, 0);
    // Read once its output is closed, so every line it wrote is there.
    await child.closed;
    const output = lines.join('\n');
    assert.ok(!output.includes(OFFLINE_TOKEN), 'the offline token is never logged');
    assert.ok(!output.includes(clientSecret), 'the client secret is never logged');
    assert.ok(!/local-at-[0-9a-f]{32}/.test(output), 'no access token is logged');
  });

  it('refuses a bad configuration with a clear message and exits 1', async () => {
    const lines: string[] = [];
    const child = startProcess('rhoas-operator', process.execPath, [mainPath], {
      env: { ...process.env, CLOUD_SERVICES_API: 'not a url', RHOAS_REQUEST_TIMEOUT: '1ms' },
      onLine: (l) => lines.push(l),
    });
    assert.equal(await child.exited, 1);
    await child.closed; // every line it wrote has been read
    const output = lines.join('\n');
    assert.match(output, /CLOUD_SERVICES_API must be a URL/);
    assert.match(output, /RHOAS_REQUEST_TIMEOUT must be between 100ms and 5m/);
  });
});
