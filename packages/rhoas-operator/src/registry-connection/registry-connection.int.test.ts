/**
 * ServiceRegistryConnection against the real API server and the local cloud services API: the golden path
 * (`registryUrl + "/apis/registry/v2"`, the oauthTokenUrl from MAS_AUTH_URL/MAS_AUTH_REALM, the binding
 * Secret), its own condition list (on a failure too, unlike the original), and a 404 registry.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  createRhoasFixture,
  OFFLINE_TOKEN,
  type RhoasFixture,
  TOKEN_SECRET,
} from '../testing/rhoas-fixture.ts';

const KIND = 'ServiceRegistryConnection';
const SA_SECRET = 'rh-cloud-services-service-account';

describe('ServiceRegistryConnection', () => {
  let f: RhoasFixture;
  beforeAll(async () => {
    f = await createRhoasFixture({
      env: { MAS_AUTH_URL: 'https://identity.example.test/auth/', MAS_AUTH_REALM: 'local' },
    });
    await f.createSecret(TOKEN_SECRET, { value: OFFLINE_TOKEN });
    await f.createSecret(SA_SECRET, { 'client-id': 'srvc-acct-2', 'client-secret': 'registry-secret-value' });
  });
  afterAll(async () => {
    await f?.cleanup();
  });

  const spec = (serviceRegistryId: string) => ({
    serviceRegistryId,
    accessTokenSecretName: TOKEN_SECRET,
    credentials: { serviceAccountSecretName: SA_SECRET },
  });

  it('publishes the registry URL, the metadata map, the labels and a binding Secret', async () => {
    const registry = f.seed.registries[0];
    assert.ok(registry);
    await f.create(KIND, 'schemas', spec(registry.id));
    const cr = await f.waitFinished(KIND, 'schemas', 'True');
    const tokenUrl = 'https://identity.example.test/auth/realms/local/protocol/openid-connect/token';
    assert.equal(cr.status?.registryUrl, `${registry.registryUrl}/apis/registry/v2`);
    assert.equal(cr.status?.message, 'Created');
    assert.equal(cr.status?.serviceAccountSecretName, SA_SECRET);
    assert.deepEqual(cr.status?.metadata, {
      provider: 'rhoas',
      type: 'serviceregistry',
      oauthTokenUrl: tokenUrl,
    });
    assert.deepEqual(
      cr.status?.conditions?.map((c) => [c.type, c.status]),
      [
        ['AcccesTokenSecretValid', 'True'],
        ['FoundServiceRegistryById', 'True'],
        ['Finished', 'True'],
      ],
    );
    assert.equal(cr.metadata.labels?.['app.kubernetes.io/component'], 'external-service');
    const binding = await f.getSecret('schemas-binding');
    assert.equal(binding?.type, 'servicebinding.io/serviceregistry');
    const data = Object.fromEntries(
      Object.entries(binding?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );
    assert.deepEqual(data, {
      type: 'serviceregistry',
      provider: 'rhoas',
      'registry-url': `${registry.registryUrl}/apis/registry/v2`,
      'oauth-token-url': tokenUrl,
      'client-id': 'srvc-acct-2',
      'client-secret': 'registry-secret-value',
    });
    await f.settled();
    assert.ok(!(JSON.stringify(cr) + f.logText()).includes('registry-secret-value'));
  });

  it('reports an unknown registry on its own condition, FoundServiceRegistryById, also after a success', async () => {
    const registry = f.seed.registries[0];
    assert.ok(registry);
    await f.create(KIND, 'moved', spec(registry.id));
    await f.waitFinished(KIND, 'moved', 'True');
    await f.patchSpec(KIND, 'moved', { serviceRegistryId: 'gone' });
    const cr = await f.waitFinished(KIND, 'moved', 'False');
    assert.deepEqual(
      cr.status?.conditions?.map((c) => [c.type, c.status, c.message]),
      [
        ['AcccesTokenSecretValid', 'True', ''],
        ['FoundServiceRegistryById', 'False', "Error 404: The requested resource doesn't exist"],
        ['Finished', 'False', "Error 404: The requested resource doesn't exist"],
      ],
    );
  });
});
