/**
 * The deletion guard against a real PostgreSQL (each agent with its instance's own role) and a real API server
 * (no Argo CD controller: the tests play its part by removing the resources finalizer, and a deletionTimestamp
 * on an Application is the moment Argo CD would start pruning). Without the guard, every Application below
 * whose delete is held would be deleted.
 */
import assert from 'node:assert/strict';
import {
  type ApplicationRow,
  type ClusterUserRow,
  confirmDeletionHolds,
  deleteApplication,
  getDeletionHold,
  getOperation,
  insertApplication,
  listDeletionHolds,
  listEngineInstanceOverviews,
  updateApplication,
} from '@gitops/db';
import { givenOperation, givenOwnedOperation } from '@gitops/db/testing';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { beforeAll, describe, it } from 'vitest';
import { useAgentFixture } from '../testing/agent-fixture.ts';

/**
 * The agent fixture of one describe block, its agent started before the block's tests (RESYNC_INTERVAL 1 s and
 * `env`), and what a test needs of that agent and its instance (`h`).
 */
function useGuardHarness(prefix: string, env: Record<string, string>) {
  const f = useAgentFixture({ prefix });
  let engineInstanceId = '';
  beforeAll(async () => {
    const agent = await f.startAgent(f.config({ RESYNC_INTERVAL: '1s', ...env }));
    engineInstanceId = agent.engineInstance()!.id;
  });
  const harness = {
    get engineInstanceId() {
      return engineInstanceId;
    },
    async tenant(name: string): Promise<ClusterUserRow> {
      const namespace = `${name}-${f.suffix}`;
      await f.createNamespace(namespace);
      return await f.givenTenant(namespace);
    },
    /** `count` deployments of `tenant`, their Applications created by the agent. */
    async deploy(tenant: ClusterUserRow, count: number): Promise<{ row: ApplicationRow; uid: string }[]> {
      const deployed: { row: ApplicationRow; uid: string }[] = [];
      for (let i = 0; i < count; i++) {
        const { application, operation } = await f.givenDeployment(
          tenant,
          tenant.namespace_name,
          engineInstanceId,
        );
        await f.relay(operation);
        const live = await eventually(`Application ${application.name} created`, () =>
          f.getApplication(application.name),
        );
        deployed.push({ row: application, uid: live.metadata.uid! });
      }
      return deployed;
    },
    /** What the backend writes when a GitOpsDeployment is found gone: the row deleted with its proof, announced. */
    async undeploy(row: ApplicationRow): Promise<string> {
      const operation = await givenOperation(
        f.db,
        {
          engineInstanceId,
          resourceType: 'Application',
          resourceId: row.id,
          ownerUserId: row.cluster_user_id,
        },
        (trx) => deleteApplication(trx, row.id, { proven: true }),
      );
      await f.relay(operation);
      return operation.id;
    },
    /** The live Application, asserted not deleted and still the one deployed (same uid). */
    async intact(name: string, uid: string): Promise<KubeObject> {
      const live = await f.getApplication(name);
      assert.ok(live, `Application ${name} was deleted`);
      assert.equal(live.metadata.deletionTimestamp, undefined, `Application ${name} is being deleted`);
      assert.equal(live.metadata.uid, uid, `Application ${name} was re-created`);
      return live;
    },
    deleting: async (name: string) =>
      (await f.getApplication(name))?.metadata.deletionTimestamp !== undefined,
    /** Plays Argo CD: after pruning, it removes its finalizer. */
    pruned: (name: string) => f.patchApplication(name, { metadata: { finalizers: null } }),
    async heldCount(): Promise<number> {
      const [overview] = await listEngineInstanceOverviews(f.db, { name: f.engineInstanceName });
      return overview?.deletionsHeld ?? -1;
    },
  };
  return { f, h: harness };
}

describe('deletion guard: no cascading delete without proof that the GitOpsDeployment is gone', () => {
  const { f, h } = useGuardHarness('guard', {});
  /** An operation announcing a change of the row, as the backend writes one. */
  const announce = (row: ApplicationRow) =>
    givenOperation(f.db, {
      engineInstanceId: h.engineInstanceId,
      resourceType: 'Application',
      resourceId: row.id,
      ownerUserId: row.cluster_user_id,
    });

  it('a row gone without a recorded deletion (a database restored from an older backup) is held; the row rebuilt from its CR adopts the same Application', async () => {
    const tenant = await h.tenant('restored');
    const [deployed] = await h.deploy(tenant, 1);
    const { row, uid } = deployed!;
    // The restore: the row is simply not there (no proof, no operation); the drift resync finds the orphan.
    await deleteApplication(f.db, row.id, { proven: false });
    const hold = await eventually('the delete is held', () => getDeletionHold(f.db, row.id));
    assert.equal(hold.reason, 'Unproven');
    assert.equal(hold.application_name, row.name);
    assert.match(hold.message, /no deletion of its GitOpsDeployment was recorded/);
    assert.equal(hold.message.includes('kubectl gitops instances confirm-deletions'), true);
    await h.intact(row.name, uid);
    assert.equal(await h.heldCount(), 1);

    // The backend rebuilds the row from the GitOpsDeployment: a new id under the same Application name.
    const { operation, rebuilt } = await f.db.transaction().execute(async (trx) => {
      const rebuilt = await insertApplication(trx, {
        name: row.name,
        clusterUserId: tenant.id,
        engineInstanceId: h.engineInstanceId,
        managedEnvironmentId: row.managed_environment_id,
        spec: row.spec as Parameters<typeof insertApplication>[1]['spec'],
      });
      const operation = await givenOwnedOperation(trx, {
        tenant,
        engineInstanceId: h.engineInstanceId,
        cr: { uid: crypto.randomUUID(), name: 'rebuilt', namespace: tenant.namespace_name },
        row: { kind: 'GitOpsDeployment', applicationId: rebuilt.id },
      });
      return { operation, rebuilt };
    });
    await f.relay(operation);
    await eventually('the Application carries the rebuilt row', async () => {
      const live = await h.intact(row.name, uid);
      return live.metadata.labels?.['managed-gitops.redhat.com/database-id'] === rebuilt.id
        ? true
        : undefined;
    });
    await eventually('the hold is forgotten', async () =>
      (await getDeletionHold(f.db, row.id)) ? undefined : true,
    );
    assert.equal(await h.heldCount(), 0);
    await h.intact(row.name, uid);
  });

  it('an operator confirms a held delete: the Application is deleted (pruning), and the hold goes with it', async () => {
    const tenant = await h.tenant('confirmed');
    const [deployed] = await h.deploy(tenant, 1);
    const { row, uid } = deployed!;
    await deleteApplication(f.db, row.id, { proven: false });
    await eventually('the delete is held', () => getDeletionHold(f.db, row.id));
    await h.intact(row.name, uid);

    const confirmed = await confirmDeletionHolds(f.db, h.engineInstanceId);
    assert.deepEqual(
      confirmed.map((c) => c.application_name),
      [row.name],
    );
    await eventually('the confirmed delete goes ahead', async () =>
      (await h.deleting(row.name)) ? true : undefined,
    );
    await h.pruned(row.name);
    await eventually('the hold is gone once the Application is', async () =>
      (await getDeletionHold(f.db, row.id)) || (await f.getApplication(row.name)) ? undefined : true,
    );
    assert.equal(await h.heldCount(), 0);
  });

  it('a row older than the one its Application was applied from (a database gone back in time) is not applied over it; the row written again is', async () => {
    const tenant = await h.tenant('older');
    const [deployed] = await h.deploy(tenant, 1);
    const { row, uid } = deployed!;
    // A change after the backup: the Application is applied from the changed row.
    const changed = await updateApplication(f.db, row.id, {
      managedEnvironmentId: row.managed_environment_id,
      spec: {
        ...(row.spec as object),
        source: { repoURL: 'https://github.com/example/repo', path: 'changed', targetRevision: 'main' },
      },
    });
    assert.ok(changed);
    await f.relay(await announce(row));
    await eventually('the Application at the changed path', async () => {
      const live = await h.intact(row.name, uid);
      return (live.spec as { source?: { path?: string } }).source?.path === 'changed' ? live : undefined;
    });
    // The restore: the row is back as it was before the change, its older spec and update time (what a copy of
    // the database from before the change holds; the trigger that keeps updated_at is what a restore bypasses).
    await f.db.transaction().execute(async (trx) => {
      await sql`alter table application disable trigger application_set_updated_at`.execute(trx);
      await trx
        .updateTable('application')
        .set({ spec: JSON.stringify(row.spec), updated_at: row.updated_at })
        .where('id', '=', row.id)
        .execute();
      await sql`alter table application enable trigger application_set_updated_at`.execute(trx);
    });
    const operation = await announce(row);
    await f.relay(operation);
    // The agent looks at it (its operation stays In_Progress, waiting) and leaves the Application as it is.
    await eventually('the operation taken and waiting', async () => {
      const o = await getOperation(f.db, operation.id);
      return o?.state === 'In_Progress' ? o : undefined;
    });
    const kept = await h.intact(row.name, uid);
    assert.equal((kept.spec as { source?: { path?: string } }).source?.path, 'changed');
    // The backend writes the row again from its GitOpsDeployment: newer, so it is applied.
    await updateApplication(f.db, row.id, {
      managedEnvironmentId: row.managed_environment_id,
      spec: {
        ...(row.spec as object),
        source: { repoURL: 'https://github.com/example/repo', path: 'rebuilt', targetRevision: 'main' },
      },
    });
    await f.relay(await announce(row));
    await eventually('the rebuilt row applied', async () => {
      const live = await h.intact(row.name, uid);
      return (live.spec as { source?: { path?: string } }).source?.path === 'rebuilt' ? live : undefined;
    });
  });

  it('a proven delete within budget goes ahead at once, and its proof is stamped', async () => {
    const tenant = await h.tenant('proven');
    const [deployed] = await h.deploy(tenant, 1);
    const operationId = await h.undeploy(deployed!.row);
    await eventually('deleted', async () => ((await h.deleting(deployed!.row.name)) ? true : undefined));
    await h.pruned(deployed!.row.name);
    const done = await eventually('operation finished', async () => {
      const operation = await getOperation(f.db, operationId);
      return operation?.state === 'Completed' ? operation : undefined;
    });
    assert.equal(done.state, 'Completed');
    assert.equal(await getDeletionHold(f.db, deployed!.row.id), undefined);
  });
});

describe("deletion guard: an instance's deletion budget", () => {
  // At most 2 cascading deletes per window on this instance, whatever its size; tenants unbounded here.
  const { f, h } = useGuardHarness('budget', {
    GITOPS_DELETION_BUDGET_MIN: '2',
    GITOPS_DELETION_BUDGET_PERCENT: '0',
    GITOPS_TENANT_DELETION_BUDGET_MIN: '1000',
  });

  it('five proven deletes at once: two go, three are held until an operator confirms them', async () => {
    const tenant = await h.tenant('mass');
    const deployed = await h.deploy(tenant, 5);
    const operations: string[] = [];
    for (const { row } of deployed) operations.push(await h.undeploy(row));

    const holds = await eventually('three deletes held', async () => {
      const rows = await listDeletionHolds(f.db, h.engineInstanceId);
      return rows.length === 3 ? rows : undefined;
    });
    assert.deepEqual(new Set(holds.map((hold) => hold.reason)), new Set(['InstanceBudget']));
    assert.match(holds[0]!.message, /deleted 2 of its \d+ Applications within 10m, its deletion budget/);
    const heldNames = new Set(holds.map((hold) => hold.application_name));
    for (const { row, uid } of deployed) {
      if (heldNames.has(row.name)) await h.intact(row.name, uid);
      else assert.equal(await h.deleting(row.name), true, `${row.name} was not deleted`);
    }
    assert.equal(await h.heldCount(), 3);
    // The held ones' operations wait (they are neither Completed nor Failed).
    for (const hold of holds) {
      const index = deployed.findIndex((d) => d.row.id === hold.application_id);
      const operation = await getOperation(f.db, operations[index]!);
      assert.notEqual(operation?.state, 'Completed');
      assert.notEqual(operation?.state, 'Failed');
    }

    await confirmDeletionHolds(f.db, h.engineInstanceId);
    for (const { row } of deployed) {
      await eventually(`${row.name} deleted`, async () => ((await h.deleting(row.name)) ? true : undefined));
      await h.pruned(row.name);
    }
    await eventually('every operation completed', async () => {
      for (const id of operations)
        if ((await getOperation(f.db, id))?.state !== 'Completed') return undefined;
      return true;
    });
    assert.deepEqual(await listDeletionHolds(f.db, h.engineInstanceId), []);
  });
});

describe("deletion guard: a tenant's deletion budget", () => {
  // A tenant may lose at most 1 Application per window here; the instance's budget is out of the way.
  const { f, h } = useGuardHarness('tbudget', {
    GITOPS_DELETION_BUDGET_MIN: '1000',
    GITOPS_TENANT_DELETION_BUDGET_MIN: '1',
    GITOPS_TENANT_DELETION_BUDGET_PERCENT: '0',
  });

  it("three of one tenant's deletes: one goes, two are held; another tenant's delete is not held", async () => {
    const tenant = await h.tenant('big');
    const other = await h.tenant('small');
    const deployed = await h.deploy(tenant, 3);
    const [otherDeployed] = await h.deploy(other, 1);
    for (const { row } of deployed) await h.undeploy(row);
    const holds = await eventually('two deletes held', async () => {
      const rows = await listDeletionHolds(f.db, h.engineInstanceId);
      return rows.length === 2 ? rows : undefined;
    });
    assert.deepEqual(new Set(holds.map((hold) => hold.reason)), new Set(['TenantBudget']));
    assert.deepEqual(new Set(holds.map((hold) => hold.cluster_user_id)), new Set([tenant.id]));
    assert.match(holds[0]!.message, new RegExp(`Applications of tenant ${tenant.id} within 10m`));

    await h.undeploy(otherDeployed!.row);
    await eventually("the other tenant's Application deleted", async () =>
      (await h.deleting(otherDeployed!.row.name)) ? true : undefined,
    );
    for (const hold of holds) {
      const { uid } = deployed.find((d) => d.row.id === hold.application_id)!;
      await h.intact(hold.application_name, uid);
    }
  });
});
