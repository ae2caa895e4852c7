/**
 * ServiceRegistryConnection against the real API server and the local cloud services API: the golden path
 * (`registryUrl + "/apis/registry/v2"`, the oauthTokenUrl from MAS_AUTH_URL/MAS_AUTH_REALM, the binding
 * Secret `<name>-binding-registry`), its own condition list (on a failure too, unlike the original), a 404
 * registry, a KafkaConnection of the same name (a binding Secret each), the longest name, the binding
 * Secret of an earlier version, and answers that are not a registry (MalformedResponse).
 */
import assert from 'node:assert/strict';
import { RHOAS_API_GROUP_VERSION } from '@gitops/api';
import { describe, it } from 'vitest';
import {
  condition,
  conditionFields,
  connectionSpec,
  decode,
  eventually,
  type RhoasCr,
  SA_SECRET,
  useRhoasFixture,
} from '../testing/rhoas-fixture.ts';

const KIND = 'ServiceRegistryConnection';
const controller = (secret: { metadata: Record<string, unknown> } | undefined) =>
  (secret?.metadata.ownerReferences as { kind: string; uid: string; controller?: boolean }[] | undefined)
    ?.filter((o) => o.controller)
    .map((o) => [o.kind, o.uid]);
const bindingName = (cr: RhoasCr) => (cr.status?.binding as { name?: string } | undefined)?.name ?? '';

describe('ServiceRegistryConnection', () => {
  const f = useRhoasFixture({
    env: { MAS_AUTH_URL: 'https://identity.example.test/auth/', MAS_AUTH_REALM: 'local' },
    secrets: { [SA_SECRET]: { 'client-id': 'srvc-acct-2', 'client-secret': 'registry-secret-value' } },
  });

  const spec = (serviceRegistryId: string) => connectionSpec('serviceRegistryId', serviceRegistryId);
  const kafkaSpec = () => connectionSpec('kafkaId', f.seed.kafkas[0]?.id);

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
    assert.deepEqual(conditionFields(cr, 'type', 'status'), [
      ['AcccesTokenSecretValid', 'True'],
      ['FoundServiceRegistryById', 'True'],
      ['Finished', 'True'],
    ]);
    assert.equal(cr.metadata.labels?.['app.kubernetes.io/component'], 'external-service');
    assert.deepEqual(cr.status?.binding, { name: 'schemas-binding-registry' });
    const binding = await f.getSecret('schemas-binding-registry');
    assert.deepEqual(controller(binding), [['ServiceRegistryConnection', cr.metadata.uid]]);
    assert.equal(binding?.type, 'servicebinding.io/serviceregistry');
    assert.deepEqual(decode(binding?.data), {
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
    assert.deepEqual(conditionFields(cr, 'type', 'status', 'message'), [
      ['AcccesTokenSecretValid', 'True', ''],
      ['FoundServiceRegistryById', 'False', "Error 404: The requested resource doesn't exist"],
      ['Finished', 'False', "Error 404: The requested resource doesn't exist"],
    ]);
  });

  it('gives a KafkaConnection and a ServiceRegistryConnection of the same name a binding Secret each', async () => {
    const registry = f.seed.registries[0];
    assert.ok(registry);
    await Promise.all([
      f.create('KafkaConnection', 'shared', kafkaSpec()),
      f.create(KIND, 'shared', spec(registry.id)),
    ]);
    const [kafka, sr] = await Promise.all([
      f.waitFinished('KafkaConnection', 'shared', 'True'),
      f.waitFinished(KIND, 'shared', 'True'),
    ]);
    assert.equal(bindingName(kafka), 'shared-binding');
    assert.equal(bindingName(sr), 'shared-binding-registry');
    const kafkaBinding = await f.getSecret('shared-binding');
    const registryBinding = await f.getSecret('shared-binding-registry');
    assert.equal(kafkaBinding?.type, 'servicebinding.io/kafka');
    assert.deepEqual(controller(kafkaBinding), [['KafkaConnection', kafka.metadata.uid]]);
    assert.equal(registryBinding?.type, 'servicebinding.io/serviceregistry');
    assert.deepEqual(controller(registryBinding), [['ServiceRegistryConnection', sr.metadata.uid]]);
    // A KafkaConnection whose name ends like the registry's Secret does not meet it either.
    await f.create('KafkaConnection', 'shared-binding-registry', kafkaSpec());
    const tricky = await f.waitFinished('KafkaConnection', 'shared-binding-registry', 'True');
    assert.equal(bindingName(tricky), 'shared-binding-registry-binding');
    assert.deepEqual(controller(await f.getSecret('shared-binding-registry')), [
      ['ServiceRegistryConnection', sr.metadata.uid],
    ]);
  });

  it('gives the longest valid name (253 characters) valid binding Secrets, one per kind', async () => {
    const registry = f.seed.registries[0];
    assert.ok(registry);
    const name = `${'d'.repeat(244)}.${'e'.repeat(8)}`;
    await f.create(KIND, name, spec(registry.id));
    await f.create('KafkaConnection', name, kafkaSpec());
    const sr = await f.waitFinished(KIND, name, 'True');
    const kafka = await f.waitFinished('KafkaConnection', name, 'True');
    assert.match(bindingName(sr), /^d{225}-[0-9a-f]{10}-binding-registry$/);
    assert.match(bindingName(kafka), /^d{234}-[0-9a-f]{10}-binding$/);
    assert.equal((await f.getSecret(bindingName(sr)))?.type, 'servicebinding.io/serviceregistry');
    assert.equal((await f.getSecret(bindingName(kafka)))?.type, 'servicebinding.io/kafka');
  });

  it('says so in a Warning Event when the binding Secret of an earlier version (<name>-binding) is still there', async () => {
    const registry = f.seed.registries[0];
    assert.ok(registry);
    const cr = await f.create(KIND, 'older', spec(registry.id));
    await f.waitFinished(KIND, 'older', 'True');
    // What an earlier version wrote: <name>-binding, owned by the ServiceRegistryConnection.
    await f.createSecret(
      'older-binding',
      { type: 'serviceregistry', 'registry-url': 'https://stale.example.test' },
      [
        {
          apiVersion: RHOAS_API_GROUP_VERSION,
          kind: KIND,
          name: 'older',
          uid: cr.metadata.uid,
          controller: true,
          blockOwnerDeletion: false,
        },
      ],
      { type: 'servicebinding.io/serviceregistry' },
    );
    const stale = await f.getSecret('older-binding');
    await f.forceRefresh(KIND, 'older');
    await f.waitFinished(KIND, 'older', 'True');
    await eventually('the LegacyBindingSecret Event', async () =>
      (await f.events('older')).some(
        (e) =>
          e.type === 'Warning' &&
          e.reason === 'LegacyBindingSecret' &&
          e.message ===
            'Secret older-binding was written by an earlier version and is no longer updated: the binding is now Secret older-binding-registry. older-binding is deleted with this ServiceRegistryConnection; delete it sooner once nothing reads it',
      ),
    );
    assert.deepEqual(await f.getSecret('older-binding'), stale);
    // Until then a KafkaConnection of that name finds its Secret name taken, and says so.
    await f.create('KafkaConnection', 'older', kafkaSpec());
    const blocked = await f.waitFinished('KafkaConnection', 'older', 'False');
    assert.equal(condition(blocked, 'Finished')?.reason, 'SecretConflict');
    // Deleting the ServiceRegistryConnection takes both its Secrets; the KafkaConnection's next processing
    // writes its own.
    await f.delete(KIND, 'older');
    await eventually('both Secrets of the ServiceRegistryConnection are gone', async () =>
      (await f.getSecret('older-binding')) === undefined &&
      (await f.getSecret('older-binding-registry')) === undefined
        ? true
        : undefined,
    );
    await f.forceRefresh('KafkaConnection', 'older');
    const kafka = await f.waitFinished('KafkaConnection', 'older', 'True');
    assert.deepEqual(controller(await f.getSecret('older-binding')), [
      ['KafkaConnection', kafka.metadata.uid],
    ]);
  });

  it('reports a 200 answer that is not a registry as MalformedResponse on FoundServiceRegistryById', async () => {
    const registry = f.seed.registries[0];
    assert.ok(registry);
    const cases: [name: string, body: unknown, message: string][] = [
      ['m-string', 'a string', 'get registry: the answer is not a JSON object'],
      ['m-list', { items: [registry] }, 'get registry: id is not a non-empty string (undefined)'],
      ['m-url', { ...registry, registryUrl: 7 }, 'get registry: registryUrl is not a string (number)'],
    ];
    for (const [name, body, message] of cases) {
      f.api.inject('getRegistry', { status: 200, body });
      try {
        await f.create(KIND, name, spec(registry.id));
        const cr = await f.waitFinished(KIND, name, 'False');
        assert.deepEqual(conditionFields(cr, 'type', 'status', 'reason', 'message'), [
          ['AcccesTokenSecretValid', 'True', '', ''],
          ['FoundServiceRegistryById', 'False', 'MalformedResponse', message],
          ['Finished', 'False', 'MalformedResponse', message],
        ]);
        assert.equal(cr.status?.registryUrl, undefined);
        assert.equal(await f.getSecret(`${name}-binding-registry`), undefined);
      } finally {
        f.api.clearFaults();
      }
    }
  });
});
