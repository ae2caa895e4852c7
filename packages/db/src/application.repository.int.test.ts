import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { sql } from 'kysely';
import { describe, test } from 'vitest';
import { insertApiCrMapping } from './api-cr-mapping.repository.ts';
import {
  getApplication,
  insertApplication,
  listChartApplicationSpecsOfEngineInstance,
  startDueOperationsOfApplication,
} from './application.repository.ts';
import type { ClusterUserRow } from './database.ts';
import { ensureWorkspaceEnvironment, insertExternalEnvironment } from './managed-environment.repository.ts';
import { getOperation } from './operation.repository.ts';
import { startOperation } from './operation-lifecycle.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenOperation,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();

/** The application read as the agent reads it, by an instance with no operation of it (the read alone). */
async function readApplication(id: string) {
  return (await startDueOperationsOfApplication(testDb.db, randomUUID(), id)).read;
}

/** The application's GitOpsDeployment `web` in the tenant's namespace (its api_cr_mapping). */
async function givenOwner(application: { id: string }, tenant: ClusterUserRow) {
  await insertApiCrMapping(
    testDb.db,
    { uid: randomUUID(), name: 'web', namespace: tenant.namespace_name, namespaceUid: tenant.namespace_uid },
    { kind: 'GitOpsDeployment', applicationId: application.id },
  );
}

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
    await givenOwner(application, tenant);

    assert.deepEqual(await readApplication(application.id), {
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

    const workspaceRead = await readApplication(inWorkspace.id);
    assert.deepEqual(workspaceRead?.environment, {
      id: workspace.id,
      kind: 'Workspace',
      credentials: undefined,
    });
    assert.equal(workspaceRead?.owner, undefined);
    assert.deepEqual(await readApplication(nowhere.id), {
      application: nowhere,
      environment: undefined,
      owner: undefined,
    });
    assert.equal(await readApplication(randomUUID()), undefined);
  });
});

describe("an application's due operations started and the application read, in one statement", () => {
  test('gives what the start and the read give apart: the operations with their outcome, the row as stored', async () => {
    const { db } = testDb;
    const [instance, other, tenant] = await Promise.all([
      givenEngineInstance(db),
      givenEngineInstance(db),
      givenClusterUser(db),
    ]);
    const workspace = await ensureWorkspaceEnvironment(db, {
      id: tenant.id,
      namespaceName: tenant.namespace_name,
    });
    const application = await givenApplication(db, {
      clusterUser: tenant,
      engineInstance: instance,
      managedEnvironmentId: workspace.id,
    });
    // A timestamp with microseconds in every timestamp column: the row comes as JSON, and must come as stored.
    await db
      .updateTable('application')
      .set({ refresh_requested_at: sql<Date>`now() - interval '1.234567 seconds'` })
      .where('id', '=', application.id)
      .execute();
    await givenOwner(application, tenant);
    const request = {
      engineInstanceId: instance.id,
      resourceType: 'Application',
      resourceId: application.id,
    } as const;
    const earlier = await givenOperation(db, request);
    await startOperation(db, earlier.id);
    const later = await givenOperation(db, request);
    const elsewhere = await givenOperation(db, { ...request, engineInstanceId: other.id });

    const { found, read } = await startDueOperationsOfApplication(db, instance.id, application.id);
    assert.deepEqual(found, [
      { outcome: 'in-progress', operation: await getOperation(db, earlier.id) },
      { outcome: 'started', operation: await getOperation(db, later.id) },
    ]);
    assert.equal(found[1]?.operation.state, 'In_Progress');
    assert.deepEqual(
      read,
      await readApplication(application.id),
      'the same read with operations and without',
    );
    assert.deepEqual(read?.environment, { id: workspace.id, kind: 'Workspace', credentials: undefined });
    const stored = await getApplication(db, application.id);
    assert.ok(stored?.refresh_requested_at instanceof Date);
    assert.deepEqual(read?.application, stored);
    assert.deepEqual(read?.owner, { name: 'web', namespace: tenant.namespace_name });
    assert.equal(
      (await getOperation(db, elsewhere.id))?.state,
      'Waiting',
      "another instance's is left alone",
    );

    // Nothing due: the read alone. A row that is gone: its operation alone (it announces the delete).
    assert.deepEqual(await startDueOperationsOfApplication(db, other.id, randomUUID()), {
      found: [],
      read: undefined,
    });
    const noOperations = await startDueOperationsOfApplication(db, randomUUID(), application.id);
    assert.deepEqual(noOperations, { found: [], read });
    const gone = randomUUID();
    const deleteAnnounced = await givenOperation(db, { ...request, resourceId: gone });
    const afterDelete = await startDueOperationsOfApplication(db, instance.id, gone);
    assert.deepEqual(afterDelete, {
      found: [{ outcome: 'started', operation: await getOperation(db, deleteAnnounced.id) }],
      read: undefined,
    });
  });
});

describe('the chart repositories of an engine instance (issue 35)', () => {
  test('lists the applications deploying a chart of a Helm repository or an OCI registry, in a source or one of its sources', async () => {
    const { db } = testDb;
    const [instance, other, tenant] = await Promise.all([
      givenEngineInstance(db),
      givenEngineInstance(db),
      givenClusterUser(db),
    ]);
    const specs = {
      chart: { source: { repoURL: 'https://charts.example.com', chart: 'web', targetRevision: '1.0.0' } },
      oci: { source: { repoURL: 'OCI://registry.example.com/charts/web', path: '.' } },
      sources: {
        sources: [
          { repoURL: 'https://github.com/org/values', ref: 'values' },
          { repoURL: 'http://charts.example.com', chart: 'api' },
        ],
      },
      git: { source: { repoURL: 'https://github.com/org/repo', path: 'dev' } },
    };
    for (const spec of Object.values(specs)) {
      await insertApplication(db, {
        name: `gitopsdepl-${randomUUID()}`,
        clusterUserId: tenant.id,
        engineInstanceId: instance.id,
        managedEnvironmentId: null,
        spec,
      });
    }
    await insertApplication(db, {
      name: `gitopsdepl-${randomUUID()}`,
      clusterUserId: tenant.id,
      engineInstanceId: other.id,
      managedEnvironmentId: null,
      spec: specs.chart,
    });

    const found = await listChartApplicationSpecsOfEngineInstance(db, instance.id);
    assert.deepEqual(
      found.map((f) => f.clusterUserId),
      [tenant.id, tenant.id, tenant.id],
    );
    for (const spec of [specs.chart, specs.oci, specs.sources]) {
      assert.ok(
        found.some((f) => isDeepStrictEqual(f.spec, spec)),
        `${JSON.stringify(spec)} is listed`,
      );
    }
  });
});
