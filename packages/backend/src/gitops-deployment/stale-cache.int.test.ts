/**
 * A backend replica whose GitOpsDeployment cache is behind (its watch has not delivered a delete or a re-create
 * yet) writes no row for a GitOpsDeployment that is gone, and deletes none of the rows of the name's current
 * incarnation. Seen in test:chaos: a GitOpsDeployment deleted 0.1 s after its create got a second application
 * row from the replica that had not seen the delete, and its Argo CD Application was created again. Replica B's
 * cache is made to lag by stopping its watch once it holds the object; replica A sees everything.
 */
import assert from 'node:assert/strict';
import { Finalizer } from '@gitops/api';
import { completeOperation, getApplicationByName, startOperation } from '@gitops/db';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, test } from 'vitest';
import type { Backend } from '../app.ts';
import type { GitOpsDeploymentObject } from '../kinds.ts';
import { useStartedBackend } from '../testing/backend-fixture.ts';

const spec = { source: { repoURL: 'https://github.com/org/repo', path: 'env/dev' }, type: 'automated' };

describe('a backend replica whose cache is behind', () => {
  // Replica A; each test starts its B (the fixture's cleanup stops any left running).
  const { f, tenant } = useStartedBackend();

  /** Replica B, once its cache holds `name` as `holds` wants it: then its watch stops, so nothing newer reaches it. */
  async function replicaBehind(
    name: string,
    holds: (object: GitOpsDeploymentObject) => boolean = () => true,
  ): Promise<Backend> {
    const b = await f.startBackend();
    await eventually(`replica B caches ${name}`, () => {
      const cached = b.informer.get(tenant.name, name);
      return cached && holds(cached) ? true : undefined;
    });
    await b.informer.stop();
    return b;
  }

  /** B reconciles every GitOpsDeployment its cache holds, to the end; then it stops. */
  async function reconcileEverything(b: Backend) {
    b.deployments.enqueueAll();
    await b.deployments.queue.whenIdle();
    await f.stopBackend(b);
  }

  const rowOf = (cr: KubeObject) => getApplicationByName(f.db, `gitopsdepl-${cr.metadata.uid}`);
  const mappingsOf = (name: string) =>
    f.db
      .selectFrom('api_cr_mapping')
      .select(['cr_uid', 'application_id'])
      .where('cr_namespace', '=', tenant.name)
      .where('cr_name', '=', name)
      .execute();

  async function deleteAndWaitForRows(name: string, cr: KubeObject) {
    await f.deleteDeployment(tenant.name, name);
    await eventually(`${name}: its application row deleted`, async () => !(await rowOf(cr)));
  }

  /** `name` deleted and created again; A wrote the new incarnation's row. */
  async function recreated(name: string, first: KubeObject) {
    await deleteAndWaitForRows(name, first);
    await eventually(`${name} gone`, async () => !(await f.getDeployment(tenant.name, name)));
    const second = await f.createDeployment(tenant.name, name, spec);
    const row = await f.applicationOf(second);
    return { second, row };
  }

  test('a GitOpsDeployment deleted since gets no row again', async () => {
    const cr = await f.createDeployment(tenant.name, 'deleted', spec);
    await f.applicationOf(cr);
    const b = await replicaBehind('deleted');
    await deleteAndWaitForRows('deleted', cr);

    await reconcileEverything(b);
    assert.equal(await rowOf(cr), undefined, 'B wrote an application row for a deleted GitOpsDeployment');
    assert.deepEqual(await mappingsOf('deleted'), []);
  });

  test('an edit is not undone by a replica that has not seen it', async () => {
    const cr = await f.createDeployment(tenant.name, 'edited', spec);
    await f.applicationOf(cr);
    const b = await replicaBehind('edited');
    const edited = await f.applyDeployment(tenant.name, 'edited', {
      ...spec,
      source: { ...spec.source, path: 'env/prod' },
    });
    assert.ok((edited.metadata.generation ?? 0) > (cr.metadata.generation ?? 0));
    const row = await eventually('A writes the edit', async () => {
      const written = await rowOf(cr);
      return (written?.spec as { source?: { path?: string } } | undefined)?.source?.path === 'env/prod'
        ? written
        : undefined;
    });

    await reconcileEverything(b);
    assert.deepEqual(await rowOf(cr), row, 'B wrote the previous spec back');
  });

  test("the name's next incarnation keeps its row", async () => {
    const first = await f.createDeployment(tenant.name, 'recreated', spec);
    await f.applicationOf(first);
    const b = await replicaBehind('recreated');
    const { second, row } = await recreated('recreated', first);

    await reconcileEverything(b);
    assert.deepEqual(await rowOf(second), row, "B deleted or changed the current incarnation's row");
    assert.equal(await rowOf(first), undefined);
    assert.deepEqual(await mappingsOf('recreated'), [
      { cr_uid: second.metadata.uid, application_id: row.id },
    ]);
  });

  test("without the deleted record (written by a previous version, or expired), a live read keeps the next incarnation's row", async () => {
    const first = await f.createDeployment(tenant.name, 'unrecorded', spec);
    await f.applicationOf(first);
    const b = await replicaBehind('unrecorded');
    const { second, row } = await recreated('unrecorded', first);
    await f.db.deleteFrom('deleted_cr').where('cr_uid', '=', first.metadata.uid!).execute();

    await reconcileEverything(b);
    assert.deepEqual(await rowOf(second), row, "B deleted or changed the current incarnation's row");
    assert.equal(await rowOf(first), undefined, 'B wrote a row for the incarnation it holds');
  });

  test("an earlier incarnation that cannot deploy does not take the next one's row for stale", async () => {
    // Its environment does not exist, so it never has a row: B's reconcile only removes other incarnations' rows.
    const first = await f.createDeployment(tenant.name, 'invalid-first', {
      ...spec,
      destination: { environment: 'no-such-environment' },
    });
    const b = await replicaBehind('invalid-first');
    await f.deleteDeployment(tenant.name, 'invalid-first');
    await eventually(
      'invalid-first gone',
      async () => !(await f.getDeployment(tenant.name, 'invalid-first')),
    );
    const second = await f.createDeployment(tenant.name, 'invalid-first', spec);
    const row = await f.applicationOf(second);
    assert.notEqual(first.metadata.uid, second.metadata.uid);

    await reconcileEverything(b);
    assert.deepEqual(await rowOf(second), row, "B deleted the current incarnation's row");
  });

  test("an earlier incarnation seen being deleted leaves the next one's row alone", async () => {
    const first = await f.createDeployment(tenant.name, 'finalized', spec, {
      finalizers: [Finalizer.GitOpsDeploymentResources],
    });
    const firstRow = await f.applicationOf(first);
    await f.deleteDeployment(tenant.name, 'finalized');
    const b = await replicaBehind('finalized', (o) => o.metadata.deletionTimestamp !== undefined);
    // What the agent does with the delete: then A removes the finalizer and the object goes.
    const deleteOperation = await eventually('the delete announced', async () =>
      (await f.operationsOf(firstRow.id)).find((o) => o.state === 'Waiting'),
    );
    assert.equal((await startOperation(f.db, deleteOperation.id)).status, 'started');
    assert.ok(await completeOperation(f.db, deleteOperation.id, ''));
    await eventually('finalized gone', async () => !(await f.getDeployment(tenant.name, 'finalized')));
    const second = await f.createDeployment(tenant.name, 'finalized', spec);
    const row = await f.applicationOf(second);

    await reconcileEverything(b);
    assert.deepEqual(await rowOf(second), row, "B deleted the current incarnation's row");
  });
});
