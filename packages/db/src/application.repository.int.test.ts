import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { describe, test } from 'vitest';
import { insertApiCrMapping } from './api-cr-mapping.repository.ts';
import {
  getApplication,
  getApplicationWithDestination,
  insertApplication,
  listChartApplicationSpecsOfEngineInstance,
} from './application.repository.ts';
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
