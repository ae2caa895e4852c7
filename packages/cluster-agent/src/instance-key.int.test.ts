/**
 * The engine instance's own key (instance-key.ts, docs/threat-model.md): the agent makes it at first start in a
 * Secret of its Argo CD namespace and publishes only the public key; repository credentials reach Argo CD opened
 * with it; a rotation asked for by an operator adds a new key, everything is re-sealed with it and the old key
 * goes, while the credentials keep working; a second replica uses the same key.
 */
import assert from 'node:assert/strict';
import {
  createSealer,
  decodeSealingKey,
  getEngineInstance,
  requestInstanceKeyRotation,
  SealContext,
  updateRepositoryCredentials,
} from '@gitops/db';
import { givenOperation, givenRepositoryCredentials } from '@gitops/db/testing';
import { createMetricsRegistry, createSilentLogger, getObject, type KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { buildAgent } from './app.ts';
import { INSTANCE_KEY_SECRET, parseStoredKeys } from './instance-key.ts';
import { useAgentFixture } from './testing/agent-fixture.ts';

describe("the engine instance's own key", () => {
  const f = useAgentFixture({ prefix: 'agent-key' });
  let engineInstanceId: string;
  const keySecret = () =>
    getObject(f.kc, {
      apiVersion: 'v1',
      kind: 'Secret',
      name: INSTANCE_KEY_SECRET,
      namespace: f.argoCdNamespace,
    });
  const storedKeys = async () => parseStoredKeys(await keySecret());
  const backend = () =>
    createSealer({ keys: [{ id: 'test', key: decodeSealingKey(f.encryptionKey) }], activeKeyId: 'test' });
  /** The password Argo CD's repository Secret of `id` holds. */
  const passwordInArgoCd = async (id: string) => {
    const secret = (await getObject(f.kc, {
      apiVersion: 'v1',
      kind: 'Secret',
      name: `repo-cred-${id}`,
      namespace: f.argoCdNamespace,
    })) as (KubeObject & { data?: Record<string, string> }) | undefined;
    const password = secret?.data?.password;
    return password === undefined ? undefined : Buffer.from(password, 'base64').toString('utf8');
  };

  beforeAll(async () => {
    const agent = await f.startAgent(f.config({ OPERATION_SWEEP_INTERVAL: '500ms' }));
    engineInstanceId = agent.engineInstance()!.id;
  });

  it('is made at first start in the Argo CD namespace; only its public key is in the database', async () => {
    const keys = await storedKeys();
    assert.ok(keys, 'the key Secret');
    assert.equal(keys.keys.length, 1);
    const instance = await getEngineInstance(f.db, engineInstanceId);
    assert.equal(instance?.sealing_key_id, keys.active);
    const published = await f.db
      .selectFrom('engine_instance_key')
      .selectAll()
      .where('engine_instance_id', '=', engineInstanceId)
      .execute();
    assert.deepEqual(
      published.map((k) => [k.key_id, k.public_key.toString('base64')]),
      [[keys.active, keys.keys[0]!.publicKey]],
    );
    const privateKey = Buffer.from(keys.keys[0]!.privateKey, 'base64');
    const dump = await f.db.selectFrom('engine_instance_key').select('public_key').execute();
    assert.ok(
      dump.every((k) => !k.public_key.equals(privateKey)),
      'a private key is in the database',
    );
  });

  it('opens repository credentials with it; after a rotation the old key goes and credentials keep working', async () => {
    const tenantNamespace = `agent-key-tenant-${f.suffix}`;
    await f.createNamespace(tenantNamespace);
    const tenant = await f.givenTenant(tenantNamespace);
    const sealer = backend();
    const row = await givenRepositoryCredentials(
      f.db,
      { clusterUserId: tenant.id, engineInstanceId },
      { url: 'https://git.example.test/org/keyed', secretName: 'keyed' },
      { sealer, username: 'user', password: 'first-password' },
    );
    const announce = async () => {
      const operation = await givenOperation(f.db, {
        engineInstanceId,
        resourceType: 'RepositoryCredentials',
        resourceId: row.id,
        ownerUserId: tenant.id,
      });
      await f.relay(operation);
    };
    await announce();
    await eventually('the first password in Argo CD', async () =>
      (await passwordInArgoCd(row.id)) === 'first-password' ? true : undefined,
    );

    const before = await storedKeys();
    assert.equal(await requestInstanceKeyRotation(f.db, f.engineInstanceName), true);
    // A new key is made and sealed with; the backend (played by the fixture) re-seals; then the old key goes.
    const after = await eventually('the rotation done: one key left, not the old one', async () => {
      const keys = await storedKeys();
      const instance = await getEngineInstance(f.db, engineInstanceId);
      return keys &&
        keys.keys.length === 1 &&
        keys.active !== before?.active &&
        instance?.sealing_key_id === keys.active &&
        instance.key_rotation_requested_at === null
        ? keys
        : undefined;
    });
    const sealedWith = await f.db
      .selectFrom('instance_sealed_value')
      .select('key_id')
      .distinct()
      .where('engine_instance_id', '=', engineInstanceId)
      .execute();
    assert.deepEqual(
      sealedWith.map((r) => r.key_id),
      [after.active],
    );

    // A change after the rotation reaches Argo CD, opened with the new key.
    await updateRepositoryCredentials(f.db, row.id, {
      repositoryUrl: 'https://git.example.test/org/keyed',
      normalizedRepositoryUrl: 'https://git.example.test/org/keyed',
      secretName: 'keyed',
      usernameSealed: sealer.seal('user', SealContext.username),
      passwordSealed: sealer.seal('second-password', SealContext.password),
      sshPrivateKeySealed: null,
    });
    await announce();
    await eventually('the second password in Argo CD', async () =>
      (await passwordInArgoCd(row.id)) === 'second-password' ? true : undefined,
    );
  });

  it('a second replica of the instance uses the same key', async () => {
    const keys = await storedKeys();
    // It waits as the standby (the first one holds the active lock), its key loaded.
    const standby = buildAgent(await f.withOwnRole(f.config()), {
      logger: createSilentLogger(),
      registry: createMetricsRegistry({ defaultMetrics: false }),
    });
    standby.start().catch(() => undefined);
    try {
      await eventually('the second replica ready as the standby', () => (standby.ready() ? true : undefined));
      assert.equal(standby.engineInstance()?.id, engineInstanceId);
      assert.deepEqual(await storedKeys(), keys);
      const published = await f.db
        .selectFrom('engine_instance_key')
        .select('key_id')
        .where('engine_instance_id', '=', engineInstanceId)
        .execute();
      // No key of its own was made: the published keys are the first replica's (the first one and its rotation).
      assert.equal(published.length, 2);
      assert.ok(published.some((k) => k.key_id === keys?.active));
      assert.equal((await getEngineInstance(f.db, engineInstanceId))?.sealing_key_id, keys?.active);
    } finally {
      await standby.close();
    }
  });
});
