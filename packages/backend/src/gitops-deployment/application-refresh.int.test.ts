/**
 * The refresh of applications whose spec did not change (issue 34 item 4): which rows a pushed branch or a
 * tenant's new repository credentials concern, and the one transaction that stamps them and announces each
 * to its engine instance (real PostgreSQL).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  type ApplicationInput,
  type ApplicationRow,
  type ClusterUserRow,
  createSealer,
  type Database,
  type EngineInstanceRow,
  getApplication,
  insertApplication,
} from '@gitops/db';
import {
  givenClusterUser,
  givenEngineInstance,
  givenOwnedOperation,
  useTestDatabase,
} from '@gitops/db/testing';
import type { Kysely } from 'kysely';
import { describe, test } from 'vitest';
import { applyRepositoryCredentials } from '../repository-credential/repository-credential.store.ts';
import { refreshApplicationsOfBranch } from './application-refresh.ts';

const testDb = useTestDatabase();
const REPO = 'https://git.example/shop/gitops';

async function givenTenant(db: Kysely<Database>) {
  const instance = await givenEngineInstance(db);
  const tenant = await givenClusterUser(db, { placedOn: instance });
  return { instance, tenant };
}

type Tenant = { instance: EngineInstanceRow; tenant: ClusterUserRow };

/** A GitOpsDeployment `name` of the tenant with its application row (source as given) and its operation. */
const givenDeployment = (db: Kysely<Database>, ours: Tenant, name: string, source: Record<string, string>) =>
  givenDeploymentOfSpec(db, ours, name, { source: { path: 'components/web/overlays/dev', ...source } });

/** The same GitOpsDeployment of another tenant, following `main` of REPO: what no change of ours may touch. */
const givenElsewhere = async (db: Kysely<Database>) =>
  givenDeployment(db, await givenTenant(db), 'web-dev', { repoURL: REPO, targetRevision: 'main' });

/** A GitOpsDeployment `name` of the tenant with its application row of the stored spec `spec` and its operation. */
async function givenDeploymentOfSpec(
  db: Kysely<Database>,
  { instance, tenant }: Tenant,
  name: string,
  spec: ApplicationInput['spec'],
): Promise<{ application: ApplicationRow; uid: string }> {
  const application = await insertApplication(db, {
    name: `gitopsdepl-${randomUUID()}`,
    clusterUserId: tenant.id,
    engineInstanceId: instance.id,
    managedEnvironmentId: null,
    spec,
  });
  const uid = randomUUID();
  await db.transaction().execute((trx) =>
    givenOwnedOperation(trx, {
      tenant,
      engineInstanceId: instance.id,
      cr: { uid, name, namespace: tenant.namespace_name },
      row: { kind: 'GitOpsDeployment', applicationId: application.id },
    }),
  );
  return { application, uid };
}

/** The application's operations still Waiting for the agent, oldest first. */
async function waitingOperationsOf(db: Kysely<Database>, applicationId: string) {
  return await db
    .selectFrom('operation')
    .selectAll()
    .where('resource_type', '=', 'Application')
    .where('resource_id', '=', applicationId)
    .where('state', '=', 'Waiting')
    .orderBy('created_at')
    .execute();
}

/** The operations of the application finished, as the agent leaves them. */
async function completeOperations(db: Kysely<Database>, applicationId: string) {
  await db
    .updateTable('operation')
    .set({ state: 'Completed', finished_at: new Date() })
    .where('resource_id', '=', applicationId)
    .execute();
}

describe('a commit pushed to a branch', () => {
  test('refreshes the applications of the namespace that follow that branch of that repository, and only those', async () => {
    const { db } = testDb;
    const ours = await givenTenant(db);
    const same = await givenDeployment(db, ours, 'web-dev', {
      repoURL: 'HTTPS://git.example/shop/gitops.git/',
      targetRevision: 'main',
    });
    const head = await givenDeployment(db, ours, 'web-head', { repoURL: REPO, targetRevision: '' });
    const otherBranch = await givenDeployment(db, ours, 'web-feature', {
      repoURL: REPO,
      targetRevision: 'feature',
    });
    const otherRepo = await givenDeployment(db, ours, 'api-dev', {
      repoURL: 'https://git.example/shop/other',
      targetRevision: 'main',
    });
    const elsewhere = await givenElsewhere(db);
    for (const d of [same, head, otherBranch, otherRepo, elsewhere])
      await completeOperations(db, d.application.id);

    const refreshed = await refreshApplicationsOfBranch(db, {
      namespace: ours.tenant.namespace_name,
      repoURL: REPO,
      branch: 'main',
    });

    assert.equal(refreshed, 2);
    for (const d of [same, head]) {
      const row = await getApplication(db, d.application.id);
      assert.ok(row?.refresh_requested_at, 'stamped');
      // The desired Application is the same: its row version does not move.
      assert.equal(row?.updated_at.getTime(), d.application.updated_at.getTime());
      const waiting = await waitingOperationsOf(db, d.application.id);
      assert.equal(waiting.length, 1);
      assert.equal(waiting[0]?.engine_instance_id, ours.instance.id);
      assert.equal(waiting[0]?.owner_kind, 'GitOpsDeployment');
      assert.equal(waiting[0]?.owner_uid, d.uid);
    }
    for (const d of [otherBranch, otherRepo, elsewhere]) {
      assert.equal((await getApplication(db, d.application.id))?.refresh_requested_at, null);
      assert.equal((await waitingOperationsOf(db, d.application.id)).length, 0);
    }
  });

  test('a second push before the agent served the first reuses the Waiting operation with a later stamp', async () => {
    const { db } = testDb;
    const ours = await givenTenant(db);
    const d = await givenDeployment(db, ours, 'web-dev', { repoURL: REPO, targetRevision: 'main' });
    const push = { namespace: ours.tenant.namespace_name, repoURL: REPO, branch: 'main' };
    await refreshApplicationsOfBranch(db, push);
    const first = (await getApplication(db, d.application.id))?.refresh_requested_at;
    await refreshApplicationsOfBranch(db, push);
    const second = (await getApplication(db, d.application.id))?.refresh_requested_at;
    assert.ok(first && second && second.getTime() > first.getTime());
    assert.equal((await waitingOperationsOf(db, d.application.id)).length, 1);
  });

  test('a malformed stored spec or an empty branch refreshes nothing and throws nothing', async () => {
    const { db } = testDb;
    const ours = await givenTenant(db);
    await givenDeploymentOfSpec(db, ours, 'odd', { source: 'not an object', sources: 7 });
    const push = { namespace: ours.tenant.namespace_name, repoURL: REPO, branch: 'main' };
    assert.equal(await refreshApplicationsOfBranch(db, push), 0);
    assert.equal(await refreshApplicationsOfBranch(db, { ...push, branch: ' ' }), 0);
  });
});

describe('a tenant repository credential written', () => {
  const sealer = createSealer({ keys: [{ id: 'k', key: randomBytes(32) }], activeKeyId: 'k' });
  const desired = (tenant: ClusterUserRow, password: string) => ({
    cr: { namespace: tenant.namespace_name, name: 'shop-gitops', uid: randomUUID() },
    namespaceUid: tenant.namespace_uid,
    requestedEngineInstance: undefined,
    repositoryUrl: `${REPO}.git`,
    repositoryType: 'git' as const,
    secretName: 'git-creds',
    credentials: { username: 'jane', password },
  });

  test('refreshes, in its transaction, the applications of the tenant with a source in that repository (any revision)', async () => {
    const { db } = testDb;
    const ours = await givenTenant(db);
    const main = await givenDeployment(db, ours, 'web-dev', { repoURL: REPO, targetRevision: 'main' });
    const tag = await givenDeployment(db, ours, 'web-prod', { repoURL: REPO, targetRevision: 'v1.2.0' });
    const other = await givenDeployment(db, ours, 'api', {
      repoURL: 'https://git.example/shop/other',
      targetRevision: 'main',
    });
    const elsewhere = await givenElsewhere(db);
    for (const d of [main, tag, other, elsewhere]) await completeOperations(db, d.application.id);

    const want = desired(ours.tenant, 'first');
    await db.transaction().execute((trx) => applyRepositoryCredentials(trx, sealer, want));
    for (const d of [main, tag])
      assert.ok((await getApplication(db, d.application.id))?.refresh_requested_at);
    for (const d of [other, elsewhere])
      assert.equal((await getApplication(db, d.application.id))?.refresh_requested_at, null);

    // A new password: refreshed again; the same one again: nothing written, nothing refreshed.
    const waiting = async () => (await waitingOperationsOf(db, main.application.id)).length;
    const before = (await getApplication(db, main.application.id))?.refresh_requested_at?.getTime() ?? 0;
    await completeOperations(db, main.application.id);
    const second = { ...want, credentials: { username: 'jane', password: 'second' } };
    await db.transaction().execute((trx) => applyRepositoryCredentials(trx, sealer, second));
    const after = (await getApplication(db, main.application.id))?.refresh_requested_at?.getTime() ?? 0;
    assert.ok(after > before);
    assert.equal(await waiting(), 1);
    await completeOperations(db, main.application.id);
    const unchanged = await db
      .transaction()
      .execute((trx) => applyRepositoryCredentials(trx, sealer, second));
    assert.equal(unchanged.change, 'none');
    assert.equal((await getApplication(db, main.application.id))?.refresh_requested_at?.getTime(), after);
    assert.equal(await waiting(), 0);
  });
});
