import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { beforeAll, describe, test } from 'vitest';
import {
  findApiCrMappingsByName,
  getApiCrMappingByUid,
  getApiCrMappingOfApplication,
  insertApiCrMapping,
  mappedRowOf,
} from './api-cr-mapping.repository.ts';
import { deleteApplication, getApplication, updateApplication } from './application.repository.ts';
import {
  getApplicationState,
  writeApplicationState,
  writeApplicationStates,
} from './application-state.repository.ts';
import {
  deleteClusterUser,
  getClusterUserByNamespaceUid,
  upsertClusterUser,
} from './cluster-user.repository.ts';
import type { Database } from './database.ts';
import { getEngineInstance, upsertEngineInstance } from './engine-instance.repository.ts';
import {
  deleteManagedEnvironment,
  ensureWorkspaceEnvironment,
  getManagedEnvironmentWithCredentials,
  insertExternalEnvironment,
  listClusterSecretEnvironmentIds,
  setWorkspaceCredentials,
  updateEnvironmentCredentials,
} from './managed-environment.repository.ts';
import { getRepositoryCredentials } from './repository-credentials.repository.ts';
import { createSealer } from './sealing.ts';
import {
  getSyncOperation,
  insertSyncOperation,
  listSyncOperationsOfApplication,
  setSyncOperationDesiredState,
  setSyncOperationOutcome,
} from './sync-operation.repository.ts';
import { useTestDatabase } from './testing/per-file-database.ts';
import {
  givenApplication,
  givenClusterUser,
  givenEngineInstance,
  givenRepositoryCredentials,
  givenSyncOperation,
  givenTenantApplication,
} from './testing/test-fixtures.ts';

const testDb = useTestDatabase();
let db: Kysely<Database>;
beforeAll(() => {
  db = testDb.db;
});

const sealer = createSealer({ keys: [{ id: 'test', key: randomBytes(32) }], activeKeyId: 'test' });

function credentials(token: string) {
  return {
    apiUrl: 'https://api.cluster.example:6443',
    bearerTokenSealed: sealer.seal(token, 'cluster_credentials.bearer_token'),
    allowInsecureSkipTlsVerify: false,
    namespaces: ['a', 'b'],
    clusterResources: false,
  };
}

async function givenExternalEnvironment(clusterUserId: string) {
  return await db
    .transaction()
    .execute((trx) =>
      insertExternalEnvironment(trx, { clusterUserId, name: 'staging', credentials: credentials('token-1') }),
    );
}

describe('tenants and engine instances', () => {
  test('a tenant is found by namespace uid and follows a namespace rename', async () => {
    const uid = randomUUID();
    const created = await upsertClusterUser(db, { uid, name: 'jane' });
    const renamed = await upsertClusterUser(db, { uid, name: 'jane-renamed' });
    assert.equal(renamed.id, created.id);
    assert.equal((await getClusterUserByNamespaceUid(db, uid))?.namespace_name, 'jane-renamed');
    // Under the same name it is only read: the same row version (xmin), no row lock (xmax).
    const version = () =>
      sql<{
        xmin: string;
        xmax: string;
      }>`select xmin::text, xmax::text from cluster_user where id = ${created.id}`
        .execute(db)
        .then((r) => r.rows[0]);
    const before = await version();
    assert.deepEqual(await upsertClusterUser(db, { uid, name: 'jane-renamed' }), renamed);
    assert.deepEqual(await version(), before);
  });

  test('a re-created Argo CD namespace keeps the engine instance row (stable configured name)', async () => {
    const first = await givenEngineInstance(db, 'argocd-main');
    const recreated = await upsertEngineInstance(db, {
      name: 'argocd-main',
      namespaceName: 'argocd',
      namespaceUid: randomUUID(),
      clusterIdentity: 'test-cluster',
    });
    assert.equal(recreated.id, first.id);
    assert.notEqual(recreated.namespace_uid, first.namespace_uid);
    assert.ok(recreated.updated_at >= first.updated_at);
  });

  test('an engine instance with applications on it cannot be deleted', async () => {
    const { engineInstance } = await givenTenantApplication(db);
    await assert.rejects(
      db.deleteFrom('engine_instance').where('id', '=', engineInstance.id).execute(),
      /application_engine_instance_id_fkey/,
    );
    assert.ok(await getEngineInstance(db, engineInstance.id));
  });
});

describe('managed environments', () => {
  test('the workspace environment exists once per tenant', async () => {
    const user = await givenClusterUser(db);
    const first = await ensureWorkspaceEnvironment(db, { id: user.id, namespaceName: user.namespace_name });
    const second = await ensureWorkspaceEnvironment(db, { id: user.id, namespaceName: user.namespace_name });
    assert.deepEqual(second, first);
    assert.equal(first.kind, 'Workspace');
    assert.equal(first.cluster_credentials_id, null);
    // Ensured by several at once (placements racing in their transactions): one row, the same for all.
    const other = await givenClusterUser(db);
    const racing = await Promise.all(
      [1, 2, 3, 4].map(() =>
        ensureWorkspaceEnvironment(db, { id: other.id, namespaceName: other.namespace_name }),
      ),
    );
    assert.equal(new Set(racing.map((e) => e.id)).size, 1);
  });

  test('credentials are stored sealed and rotate in place', async () => {
    const user = await givenClusterUser(db);
    const { environment, credentials: stored } = await givenExternalEnvironment(user.id);
    assert.ok(!stored.bearer_token_sealed.includes(Buffer.from('token-1')), 'no plaintext in the column');
    assert.deepEqual(stored.namespaces, ['a', 'b']);
    await updateEnvironmentCredentials(db, environment.id, credentials('token-2'));
    const loaded = await getManagedEnvironmentWithCredentials(db, environment.id);
    assert.equal(loaded?.credentials?.id, stored.id);
    assert.equal(
      sealer.openString(loaded!.credentials!.bearer_token_sealed, 'cluster_credentials.bearer_token'),
      'token-2',
    );
  });

  test('deleting an environment keeps its applications, with no environment, and deletes its credentials', async () => {
    const clusterUser = await givenClusterUser(db);
    const engineInstance = await givenEngineInstance(db);
    const { environment, credentials: stored } = await givenExternalEnvironment(clusterUser.id);
    const application = await givenApplication(db, {
      clusterUser,
      engineInstance,
      managedEnvironmentId: environment.id,
    });
    const result = await db.transaction().execute((trx) => deleteManagedEnvironment(trx, environment.id));
    assert.deepEqual(result, { deleted: true, affectedApplicationIds: [application.id] });
    const kept = await getApplication(db, application.id);
    assert.equal(kept?.managed_environment_id, null, 'ON DELETE SET NULL');
    const credentialRows = await db
      .selectFrom('cluster_credentials')
      .where('id', '=', stored.id)
      .selectAll()
      .execute();
    assert.deepEqual(credentialRows, []);
  });

  test('credentials still used by an environment cannot be deleted', async () => {
    const user = await givenClusterUser(db);
    const { credentials: stored } = await givenExternalEnvironment(user.id);
    await assert.rejects(
      db.deleteFrom('cluster_credentials').where('id', '=', stored.id).execute(),
      /managed_environment_cluster_credentials_id_fkey/,
    );
  });

  test('an External environment needs credentials', async () => {
    const user = await givenClusterUser(db);
    await assert.rejects(
      db
        .insertInto('managed_environment')
        .values({ cluster_user_id: user.id, kind: 'External', name: 'x' })
        .execute(),
      /managed_environment_credentials_check/,
    );
  });

  test('a Workspace environment holds credentials only while given them, and is then reached through a cluster Secret', async () => {
    const user = await givenClusterUser(db);
    const tenant = { id: user.id, namespaceName: user.namespace_name };
    const { environment: external } = await givenExternalEnvironment(user.id);
    const workspace = await ensureWorkspaceEnvironment(db, tenant);
    assert.deepEqual(await listClusterSecretEnvironmentIds(db, { clusterUserId: user.id }), [external.id]);

    const given = await db
      .transaction()
      .execute((trx) => setWorkspaceCredentials(trx, tenant, credentials('workspace-1')));
    assert.equal(given.changed, true);
    assert.equal(given.environment.id, workspace.id);
    const stored = await getManagedEnvironmentWithCredentials(db, workspace.id);
    assert.equal(
      sealer.openString(
        stored?.credentials?.bearer_token_sealed ?? Buffer.alloc(0),
        'cluster_credentials.bearer_token',
      ),
      'workspace-1',
    );
    assert.deepEqual(
      [...(await listClusterSecretEnvironmentIds(db, { clusterUserId: user.id }))].sort(),
      [external.id, workspace.id].sort(),
    );
    // Given again: replaced in place, one credentials row.
    await db.transaction().execute((trx) => setWorkspaceCredentials(trx, tenant, credentials('workspace-2')));
    const replaced = await getManagedEnvironmentWithCredentials(db, workspace.id);
    assert.equal(replaced?.credentials?.id, stored?.credentials?.id);
    assert.equal(
      sealer.openString(
        replaced?.credentials?.bearer_token_sealed ?? Buffer.alloc(0),
        'cluster_credentials.bearer_token',
      ),
      'workspace-2',
    );

    const taken = await db.transaction().execute((trx) => setWorkspaceCredentials(trx, tenant, null));
    assert.equal(taken.changed, true);
    assert.equal(taken.environment.cluster_credentials_id, null);
    assert.deepEqual(await listClusterSecretEnvironmentIds(db, { clusterUserId: user.id }), [external.id]);
    const left = await db
      .selectFrom('cluster_credentials')
      .select('id')
      .where('cluster_user_id', '=', user.id)
      .execute();
    assert.equal(left.length, 1, "only the External environment's credentials are left");
    const again = await db.transaction().execute((trx) => setWorkspaceCredentials(trx, tenant, null));
    assert.equal(again.changed, false);
  });
});

describe('applications', () => {
  test('deleting an application deletes its state and mapping and unlinks its sync operations', async () => {
    const { clusterUser, application } = await givenTenantApplication(db);
    await writeApplicationState(db, application.id, { health: { status: 'Healthy' } });
    const crUid = randomUUID();
    await insertApiCrMapping(
      db,
      {
        uid: crUid,
        name: 'my-depl',
        namespace: clusterUser.namespace_name,
        namespaceUid: clusterUser.namespace_uid,
      },
      { kind: 'GitOpsDeployment', applicationId: application.id },
    );
    const syncOperation = await insertSyncOperation(db, {
      clusterUserId: clusterUser.id,
      applicationId: application.id,
      deploymentName: 'my-depl',
      revision: 'main',
    });

    assert.equal(await deleteApplication(db, application.id, { proven: true }), true);
    assert.equal(await getApplicationState(db, application.id), undefined);
    assert.equal(await getApiCrMappingByUid(db, crUid), undefined);
    const unlinked = await getSyncOperation(db, syncOperation.id);
    assert.equal(unlinked?.application_id, null);
    assert.equal(unlinked?.deployment_name, 'my-depl');
  });

  test('application state for a deleted application is not written', async () => {
    assert.equal(
      await writeApplicationState(db, randomUUID(), { health: { status: 'Healthy' } }),
      'application-missing',
    );
  });

  test('several states in one write: each answered in order as changed, unchanged, missing or not held here', async () => {
    const clusterUser = await givenClusterUser(db);
    const [here, elsewhere] = [await givenEngineInstance(db), await givenEngineInstance(db)];
    const fresh = await givenApplication(db, { clusterUser, engineInstance: here });
    const same = await givenApplication(db, { clusterUser, engineInstance: here });
    const moved = await givenApplication(db, { clusterUser, engineInstance: elsewhere });
    await writeApplicationState(db, same.id, { health: { status: 'Healthy' } });
    const results = await writeApplicationStates(
      db,
      [
        { applicationId: fresh.id, state: { health: { status: 'Progressing' } } },
        { applicationId: same.id, state: { health: { status: 'Healthy' } } },
        { applicationId: randomUUID(), state: { health: { status: 'Healthy' } } },
        { applicationId: moved.id, state: { health: { status: 'Degraded' } } },
      ],
      { engineInstanceId: here.id },
    );
    assert.deepEqual(results, ['changed', 'unchanged', 'application-missing', 'application-missing']);
    assert.deepEqual((await getApplicationState(db, fresh.id))?.state, { health: { status: 'Progressing' } });
    assert.equal(await getApplicationState(db, moved.id), undefined, "another instance's is not written");
  });

  test('the spec is stored as a JSON object and read back as one', async () => {
    const { application } = await givenTenantApplication(db);
    const spec = {
      source: { repoURL: 'https://x', path: 'p', targetRevision: '' },
      destination: { namespace: 'n' },
    };
    const updated = await updateApplication(db, application.id, { managedEnvironmentId: null, spec });
    assert.deepEqual(updated?.spec, spec);
    // Compared in SQL: JS Dates only keep milliseconds.
    const { rows } = await sql<{ bumped: boolean }>`
      select updated_at > created_at as bumped from application where id = ${application.id}`.execute(db);
    assert.equal(rows[0]?.bumped, true, 'updated_at is maintained by the trigger');
    await assert.rejects(
      sql`update application set spec = '[]'::jsonb where id = ${application.id}`.execute(db),
      /application_spec_is_object/,
    );
  });
});

describe('sync operations', () => {
  test('sync operations of an application list in creation order and record desired state and outcome', async () => {
    const { clusterUser, application } = await givenTenantApplication(db);
    const input = {
      clusterUserId: clusterUser.id,
      applicationId: application.id,
      deploymentName: 'd',
      revision: '',
    };
    const first = await insertSyncOperation(db, input);
    const second = await insertSyncOperation(db, input);
    assert.deepEqual(
      (await listSyncOperationsOfApplication(db, application.id)).map((s) => s.id),
      [first.id, second.id],
    );
    assert.equal(first.desired_state, 'Running');
    assert.equal(first.outcome, null);
    assert.equal(
      (await setSyncOperationDesiredState(db, first.id, 'Terminated'))?.desired_state,
      'Terminated',
    );
    const finished = await setSyncOperationOutcome(db, second.id, 'Succeeded', '');
    assert.equal(finished?.outcome, 'Succeeded');
    await assert.rejects(
      sql`update sync_operation set desired_state = 'Paused' where id = ${first.id}`.execute(db),
      /sync_operation_desired_state_check/,
    );
  });
});

describe('api_cr_mapping', () => {
  test('a mapping must point at the row kind of its CR kind', async () => {
    const { application } = await givenTenantApplication(db);
    await assert.rejects(
      db
        .insertInto('api_cr_mapping')
        .values({
          cr_kind: 'GitOpsDeploymentSyncRun',
          cr_uid: randomUUID(),
          cr_name: 'x',
          cr_namespace: 'ns',
          cr_namespace_uid: randomUUID(),
          application_id: application.id,
        })
        .execute(),
      /api_cr_mapping_row_matches_kind_check/,
    );
  });

  test('a delete-recreate with the same name gives two mappings, told apart by uid', async () => {
    const { clusterUser, engineInstance, application: oldApplication } = await givenTenantApplication(db);
    const newApplication = await givenApplication(db, { clusterUser, engineInstance });
    const cr = {
      name: 'same-name',
      namespace: clusterUser.namespace_name,
      namespaceUid: clusterUser.namespace_uid,
    };
    const oldUid = randomUUID();
    const newUid = randomUUID();
    await insertApiCrMapping(
      db,
      { ...cr, uid: oldUid },
      { kind: 'GitOpsDeployment', applicationId: oldApplication.id },
    );
    await insertApiCrMapping(
      db,
      { ...cr, uid: newUid },
      { kind: 'GitOpsDeployment', applicationId: newApplication.id },
    );
    const byName = await findApiCrMappingsByName(db, { kind: 'GitOpsDeployment', ...cr });
    assert.deepEqual(byName.map((m) => m.cr_uid).sort(), [oldUid, newUid].sort());
    const mapping = await getApiCrMappingOfApplication(db, newApplication.id);
    assert.deepEqual(mappedRowOf(mapping!), { kind: 'GitOpsDeployment', applicationId: newApplication.id });
  });
});

describe('deleting a tenant', () => {
  test('deleting a tenant deletes all its rows', async () => {
    const clusterUser = await givenClusterUser(db);
    const engineInstance = await givenEngineInstance(db);
    const { environment } = await givenExternalEnvironment(clusterUser.id);
    const application = await givenApplication(db, {
      clusterUser,
      engineInstance,
      managedEnvironmentId: environment.id,
    });
    const repositoryCredentials = await givenRepositoryCredentials(
      db,
      { clusterUserId: clusterUser.id, engineInstanceId: engineInstance.id },
      {
        url: 'https://github.com/org/private.git',
        normalizedUrl: 'https://github.com/org/private',
        secretName: 'private-repo-creds',
      },
      { sealer, username: 'user', password: 'pass' },
    );
    const syncOperation = await givenSyncOperation(db, { clusterUser, application });
    assert.equal(await deleteClusterUser(db, clusterUser.id), true);
    assert.equal(await getApplication(db, application.id), undefined);
    assert.equal(await getRepositoryCredentials(db, repositoryCredentials.id), undefined);
    assert.equal(await getSyncOperation(db, syncOperation.id), undefined);
    assert.equal(await getManagedEnvironmentWithCredentials(db, environment.id), undefined);
    const credentialRows = await db
      .selectFrom('cluster_credentials')
      .where('cluster_user_id', '=', clusterUser.id)
      .selectAll()
      .execute();
    assert.deepEqual(credentialRows, []);
    assert.ok(await getEngineInstance(db, engineInstance.id), 'the engine instance is not the tenant’s');
  });
});

describe('connection type parsing', () => {
  test('bigint results are numbers, timestamptz values are Dates, bytea values are Buffers', async () => {
    const { rows } = await sql<{ count: unknown; at: unknown; bytes: unknown }>`
      select count(*) as count, now() as at, '\\x0102'::bytea as bytes`.execute(db);
    assert.equal(rows[0]?.count, 1);
    assert.ok(rows[0]?.at instanceof Date);
    assert.deepEqual(rows[0]?.bytes, Buffer.from([1, 2]));
  });

  test('a bigint beyond the safe integer range fails instead of losing precision', async () => {
    await assert.rejects(sql`select 9007199254740993::bigint as big`.execute(db), /does not fit/);
  });
});
