import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'vitest';
import { ensureWorkspaceEnvironment, insertExternalEnvironment } from './managed-environment.repository.ts';
import { readTenantProjectRows } from './tenant-project.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenRepositoryCredentials,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

describe("what a tenant's AppProject is computed from, in one read", () => {
  test("gives the tenant's applications, credentials and cluster Secret environments on one instance only", async () => {
    const { db } = testDb;
    const [here, elsewhere] = await Promise.all([givenEngineInstance(db), givenEngineInstance(db)]);
    const [tenant, neighbour] = await Promise.all([
      givenClusterUser(db, { placedOn: here }),
      givenClusterUser(db, { placedOn: here }),
    ]);
    await ensureWorkspaceEnvironment(db, { id: tenant.id, namespaceName: tenant.namespace_name });
    const external = async (clusterUserId: string, name: string, namespaces: string[]) =>
      (
        await db.transaction().execute((trx) =>
          insertExternalEnvironment(trx, {
            clusterUserId,
            name,
            credentials: {
              apiUrl: `https://${name}.example:6443`,
              bearerTokenSealed: Buffer.from('sealed'),
              allowInsecureSkipTlsVerify: false,
              namespaces,
              clusterResources: namespaces.length === 0,
            },
          }),
        )
      ).environment;
    const [scoped, wide] = await Promise.all([
      external(tenant.id, 'staging', ['web']),
      external(tenant.id, 'prod', []),
      external(neighbour.id, 'theirs', ['x']),
    ]);
    const first = await givenApplication(db, {
      clusterUser: tenant,
      engineInstance: here,
      managedEnvironmentId: scoped?.id,
    });
    const second = await givenApplication(db, { clusterUser: tenant, engineInstance: here });
    await givenApplication(db, { clusterUser: tenant, engineInstance: elsewhere });
    await givenApplication(db, { clusterUser: neighbour, engineInstance: here });
    const owner = { clusterUserId: tenant.id, engineInstanceId: here.id };
    const [b, a] = [
      await givenRepositoryCredentials(db, owner, { url: 'https://git.example/b', secretName: 'b' }),
      await givenRepositoryCredentials(db, owner, { url: 'https://git.example/a', secretName: 'a' }),
    ];
    await givenRepositoryCredentials(
      db,
      { clusterUserId: tenant.id, engineInstanceId: elsewhere.id },
      { url: 'https://git.example/c', secretName: 'c' },
    );
    await givenRepositoryCredentials(
      db,
      { clusterUserId: neighbour.id, engineInstanceId: here.id },
      { url: 'https://git.example/d', secretName: 'd' },
    );

    const rows = await readTenantProjectRows(db, tenant.id, here.id);
    assert.ok(rows);
    assert.equal(rows.namespaceName, tenant.namespace_name);
    const byEnvironment = (x: { managedEnvironmentId: string | null }) => x.managedEnvironmentId ?? '';
    assert.deepEqual(
      [...rows.applications].sort((x, y) => byEnvironment(x).localeCompare(byEnvironment(y))),
      [
        { spec: second.spec, managedEnvironmentId: null },
        { spec: first.spec, managedEnvironmentId: scoped?.id },
      ],
    );
    assert.deepEqual(
      rows.repositoryCredentialUrls,
      [a, b].sort((x, y) => x.id.localeCompare(y.id)).map((c) => c.normalized_repository_url),
    );
    // The Workspace environment has no credentials (no cluster Secret): not listed.
    assert.deepEqual(
      rows.clusterSecretEnvironments,
      [
        { id: scoped?.id, namespaces: ['web'], cluster_resources: false },
        { id: wide?.id, namespaces: [], cluster_resources: true },
      ].sort((x, y) => String(x.id).localeCompare(String(y.id))),
    );

    // On the other instance: its own rows only; there the environments' cluster Secrets do not belong.
    const there = await readTenantProjectRows(db, tenant.id, elsewhere.id);
    assert.equal(there?.applications.length, 1);
    assert.deepEqual(there?.repositoryCredentialUrls, ['https://git.example/c']);
    assert.deepEqual(there?.clusterSecretEnvironments, []);
    assert.equal(await readTenantProjectRows(db, randomUUID(), here.id), undefined);
  });
});
