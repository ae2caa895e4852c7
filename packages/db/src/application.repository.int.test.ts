import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'vitest';
import { insertApiCrMapping } from './api-cr-mapping.repository.ts';
import { getApplication, getApplicationWithDestination } from './application.repository.ts';
import { ensureWorkspaceEnvironment, insertExternalEnvironment } from './managed-environment.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import { givenApplication, givenClusterUser, givenEngineInstance } from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

describe('an application with its destination in one read', () => {
  test('gives the row, its environment with the credentials scope, and its owner', async () => {
    const { db } = testDb;
    const [instance, tenant] = await Promise.all([givenEngineInstance(db), givenClusterUser(db)]);
    const { environment } = await db.transaction().execute((trx) =>
      insertExternalEnvironment(trx, {
        clusterUserId: tenant.id,
        name: 'staging',
        credentials: {
          apiUrl: 'https://staging.example:6443',
          bearerTokenSealed: Buffer.from('sealed'),
          allowInsecureSkipTlsVerify: false,
          namespaces: ['web', 'db'],
          clusterResources: true,
        },
      }),
    );
    const application = await givenApplication(db, {
      clusterUser: tenant,
      engineInstance: instance,
      managedEnvironmentId: environment.id,
    });
    await insertApiCrMapping(
      db,
      {
        uid: randomUUID(),
        name: 'web',
        namespace: tenant.namespace_name,
        namespaceUid: tenant.namespace_uid,
      },
      { kind: 'GitOpsDeployment', applicationId: application.id },
    );

    assert.deepEqual(await getApplicationWithDestination(db, application.id), {
      application: await getApplication(db, application.id),
      environment: {
        id: environment.id,
        kind: 'External',
        credentials: { namespaces: ['web', 'db'], cluster_resources: true },
      },
      owner: { name: 'web', namespace: tenant.namespace_name },
    });
  });

  test('a Workspace environment has no credentials; no environment and no mapping give neither', async () => {
    const { db } = testDb;
    const [instance, tenant] = await Promise.all([givenEngineInstance(db), givenClusterUser(db)]);
    const workspace = await ensureWorkspaceEnvironment(db, {
      id: tenant.id,
      namespaceName: tenant.namespace_name,
    });
    const inWorkspace = await givenApplication(db, {
      clusterUser: tenant,
      engineInstance: instance,
      managedEnvironmentId: workspace.id,
    });
    const nowhere = await givenApplication(db, { clusterUser: tenant, engineInstance: instance });

    const workspaceRead = await getApplicationWithDestination(db, inWorkspace.id);
    assert.deepEqual(workspaceRead?.environment, {
      id: workspace.id,
      kind: 'Workspace',
      credentials: undefined,
    });
    assert.equal(workspaceRead?.owner, undefined);
    assert.deepEqual(await getApplicationWithDestination(db, nowhere.id), {
      application: nowhere,
      environment: undefined,
      owner: undefined,
    });
    assert.equal(await getApplicationWithDestination(db, randomUUID()), undefined);
  });
});
