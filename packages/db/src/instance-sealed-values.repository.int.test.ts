/**
 * Credentials sealed for the instance that uses them (migration 0013): the backend seals, for each instance,
 * what its role may read, with that instance's published key; the instance's agent opens them with its private
 * key; another instance can neither read them nor open their bytes; a move re-seals for the new instance and
 * the old one loses its copy once its release is done; a new key re-seals everything with nothing down.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createDb } from './connection.ts';
import type { Database } from './database.ts';
import {
  type AdmittedEngineInstance,
  admitEngineInstance,
  agentDatabaseUrl,
} from './engine-instance-role.repository.ts';
import {
  getInstanceKeyState,
  instanceSealContext,
  listInstanceSealedValues,
  publishInstanceKey,
  requestInstanceKeyRotation,
  sealCredentialsForInstances,
} from './instance-sealed-values.repository.ts';
import { createInstanceKeyring, generateInstanceKeyPair, type InstanceKeyPair } from './instance-sealing.ts';
import { createSealer, SealContext } from './sealing.ts';
import { completeApplicationRelease, moveTenant } from './tenant-move.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import { givenApplication, givenClusterUser } from './testing/test-fixtures.ts';

const testDb = useTestDatabase();
const backendSealer = createSealer({
  keys: [{ id: 'backend', key: randomBytes(32) }],
  activeKeyId: 'backend',
});

interface Instance {
  admitted: AdmittedEngineInstance;
  id: string;
  /** Connected with the instance's own role, as its agent is. */
  db: Kysely<Database>;
  key: InstanceKeyPair;
}

describe('credentials sealed for the instance that uses them', () => {
  const instances: Instance[] = [];
  const given = async (name: string): Promise<Instance> => {
    const admitted = await admitEngineInstance(testDb.db, {
      name: `${name}-${randomUUID().slice(0, 6)}`,
      namespaceName: name,
    });
    const db = createDb(agentDatabaseUrl(testDb.url, admitted), { max: 1 });
    const key = await generateInstanceKeyPair();
    await publishInstanceKey(db, key);
    const instance = { admitted, id: admitted.instance.id, db, key };
    instances.push(instance);
    return instance;
  };
  /** A tenant placed on `instance` with an External environment (token) and repository credentials (password). */
  const givenTenant = async (instance: Instance, token: string, password: string) => {
    const tenant = await givenClusterUser(testDb.db, { placedOn: instance });
    const credentials = await testDb.db
      .insertInto('cluster_credentials')
      .values({
        cluster_user_id: tenant.id,
        api_url: 'https://c.example:6443',
        bearer_token_sealed: backendSealer.seal(token, SealContext.bearerToken),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    const environment = await testDb.db
      .insertInto('managed_environment')
      .values({
        cluster_user_id: tenant.id,
        kind: 'External',
        name: 'e',
        cluster_credentials_id: credentials.id,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const repository = await testDb.db
      .insertInto('repository_credentials')
      .values({
        cluster_user_id: tenant.id,
        engine_instance_id: instance.id,
        repository_url: 'https://git.example/r.git',
        normalized_repository_url: 'https://git.example/r',
        secret_name: `r-${randomUUID().slice(0, 8)}`,
        password_sealed: backendSealer.seal(password, SealContext.password),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return {
      tenant,
      credentialsId: credentials.id,
      environmentId: environment.id,
      repositoryCredentialsId: repository.id,
    };
  };
  /** What an agent of `instance` reads and opens for the token of `credentialsId` (undefined: nothing visible). */
  const tokenFor = async (
    instance: Instance,
    credentialsId: string,
    keys: InstanceKeyPair[] = [instance.key],
  ) => {
    const values = await listInstanceSealedValues(instance.db, instance.id, {
      clusterCredentialsId: credentialsId,
    });
    const value = values.find((v) => v.field === 'bearer_token');
    return (
      value &&
      (await createInstanceKeyring(keys).open(
        value.sealed,
        instanceSealContext('bearer_token', credentialsId),
      ))
    );
  };

  let a: Instance;
  let b: Instance;
  beforeAll(async () => {
    a = await given('seal-a');
    b = await given('seal-b');
  });
  afterAll(async () => {
    for (const instance of instances) await instance.db.destroy();
  });

  test('each instance reads and opens exactly its tenants’ credentials; the other’s bytes do not open with its key', async () => {
    const ofA = await givenTenant(a, 'token-of-a', 'password-of-a');
    const ofB = await givenTenant(b, 'token-of-b', 'password-of-b');
    const result = await sealCredentialsForInstances(testDb.db, backendSealer, 'all');
    assert.ok(result.sealed >= 4);
    assert.equal(await tokenFor(a, ofA.credentialsId), 'token-of-a');
    assert.equal(await tokenFor(b, ofB.credentialsId), 'token-of-b');
    const [password] = await listInstanceSealedValues(a.db, a.id, {
      repositoryCredentialsId: ofA.repositoryCredentialsId,
    });
    assert.equal(
      await createInstanceKeyring([a.key]).open(
        password!.sealed,
        instanceSealContext('password', ofA.repositoryCredentialsId),
      ),
      'password-of-a',
    );
    // B's role sees nothing of A's values…
    assert.deepEqual(
      await listInstanceSealedValues(b.db, a.id, { clusterCredentialsId: ofA.credentialsId }),
      [],
    );
    assert.equal(await tokenFor(b, ofA.credentialsId), undefined);
    // …and given the bytes (read as the backend), B's key does not open them, nor does the backend's own key.
    const [stolen] = await listInstanceSealedValues(testDb.db, a.id, {
      clusterCredentialsId: ofA.credentialsId,
    });
    await assert.rejects(
      createInstanceKeyring([b.key]).open(
        stolen!.sealed,
        instanceSealContext('bearer_token', ofA.credentialsId),
      ),
    );
    assert.throws(() => backendSealer.open(stolen!.sealed, SealContext.bearerToken));
    // Done: a second pass seals nothing.
    assert.equal((await sealCredentialsForInstances(testDb.db, backendSealer, 'all')).sealed, 0);
  });

  test('a changed credential is sealed again; until then the instance can tell its copy is stale', async () => {
    const ofA = await givenTenant(a, 'old-token', 'p');
    await sealCredentialsForInstances(testDb.db, backendSealer, { clusterUserIds: [ofA.tenant.id] });
    await testDb.db
      .updateTable('cluster_credentials')
      .set({ bearer_token_sealed: backendSealer.seal('new-token', SealContext.bearerToken) })
      .where('id', '=', ofA.credentialsId)
      .execute();
    const row = await a.db
      .selectFrom('cluster_credentials')
      .select('updated_at')
      .where('id', '=', ofA.credentialsId)
      .executeTakeFirstOrThrow();
    const [stale] = await listInstanceSealedValues(a.db, a.id, { clusterCredentialsId: ofA.credentialsId });
    assert.notEqual(stale!.sourceUpdatedAt.getTime(), row.updated_at.getTime());
    await sealCredentialsForInstances(testDb.db, backendSealer, { clusterUserIds: [ofA.tenant.id] });
    const [fresh] = await listInstanceSealedValues(a.db, a.id, { clusterCredentialsId: ofA.credentialsId });
    assert.equal(fresh!.sourceUpdatedAt.getTime(), row.updated_at.getTime());
    assert.equal(await tokenFor(a, ofA.credentialsId), 'new-token');
  });

  test('a move seals for the new instance; the old one keeps its copy while it releases, and loses it after', async () => {
    const ofA = await givenTenant(a, 'moving-token', 'p');
    const application = await givenApplication(testDb.db, {
      clusterUser: ofA.tenant,
      engineInstance: a.admitted.instance,
      managedEnvironmentId: ofA.environmentId,
    });
    await sealCredentialsForInstances(testDb.db, backendSealer, { clusterUserIds: [ofA.tenant.id] });
    await testDb.db.transaction().execute((trx) => moveTenant(trx, ofA.tenant.id, b.id));
    await sealCredentialsForInstances(testDb.db, backendSealer, { clusterUserIds: [ofA.tenant.id] });
    assert.equal(await tokenFor(b, ofA.credentialsId), 'moving-token');
    assert.equal(await tokenFor(a, ofA.credentialsId), 'moving-token');
    // Repository credentials move at once: only the new instance has them.
    assert.equal(
      (await listInstanceSealedValues(b.db, b.id, { repositoryCredentialsId: ofA.repositoryCredentialsId }))
        .length,
      1,
    );
    assert.equal(
      (
        await listInstanceSealedValues(testDb.db, a.id, {
          repositoryCredentialsId: ofA.repositoryCredentialsId,
        })
      ).length,
      0,
    );
    assert.equal(await completeApplicationRelease(a.db, application.id, a.id), true);
    await sealCredentialsForInstances(testDb.db, backendSealer, { clusterUserIds: [ofA.tenant.id] });
    assert.equal(
      (await listInstanceSealedValues(testDb.db, a.id, { clusterCredentialsId: ofA.credentialsId })).length,
      0,
    );
    assert.equal(await tokenFor(b, ofA.credentialsId), 'moving-token');
  });

  test('a rotated key: the request is cleared when the new key is published, everything is re-sealed with it, the old key is no longer in use', async () => {
    const ofA = await givenTenant(a, 'rotating-token', 'p');
    await sealCredentialsForInstances(testDb.db, backendSealer, 'all');
    assert.equal(await requestInstanceKeyRotation(testDb.db, a.admitted.instance.name), true);
    assert.equal((await getInstanceKeyState(a.db, a.id)).rotationRequested, true);
    const next = await generateInstanceKeyPair();
    await publishInstanceKey(a.db, next);
    const state = await getInstanceKeyState(a.db, a.id);
    assert.equal(state.rotationRequested, false);
    assert.equal(state.sealingKeyId, next.keyId);
    // Until the backend re-seals, values sealed with the old key still open with the old key.
    assert.equal(await tokenFor(a, ofA.credentialsId, [a.key, next]), 'rotating-token');
    await sealCredentialsForInstances(testDb.db, backendSealer, { engineInstanceIds: [a.id] });
    assert.deepEqual((await getInstanceKeyState(a.db, a.id)).keyIdsInUse, [next.keyId]);
    assert.equal(await tokenFor(a, ofA.credentialsId, [next]), 'rotating-token');
    a.key = next;
    // A key id cannot be published again with another public key (nobody replaces an instance's key).
    await assert.rejects(
      publishInstanceKey(a.db, { keyId: next.keyId, publicKey: (await generateInstanceKeyPair()).publicKey }),
      { code: '42501' },
    );
    await assert.rejects(publishInstanceKey(testDb.db, next), { code: '42501' });
  });

  test('an instance without a published key is reported waiting, and sealed for once it publishes one', async () => {
    const admitted = await admitEngineInstance(testDb.db, {
      name: `seal-c-${randomUUID().slice(0, 6)}`,
      namespaceName: 'seal-c',
    });
    const c: Instance = {
      admitted,
      id: admitted.instance.id,
      db: createDb(agentDatabaseUrl(testDb.url, admitted), { max: 1 }),
      key: await generateInstanceKeyPair(),
    };
    instances.push(c);
    const ofC = await givenTenant(c, 'token-of-c', 'p');
    const waiting = await sealCredentialsForInstances(testDb.db, backendSealer, {
      clusterUserIds: [ofC.tenant.id],
    });
    assert.deepEqual(waiting.waitingForKey, [c.id]);
    assert.equal(waiting.sealed, 0);
    await publishInstanceKey(c.db, c.key);
    await sealCredentialsForInstances(testDb.db, backendSealer, { engineInstanceIds: [c.id] });
    assert.equal(await tokenFor(c, ofC.credentialsId), 'token-of-c');
  });
});
