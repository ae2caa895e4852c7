import assert from 'node:assert/strict';
import { completeOperation, failOperation, getApplicationByName, startOperation } from '@gitops/db';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, test } from 'vitest';
import { useBackendFixture } from '../testing/backend-fixture.ts';

const spec = { source: { repoURL: 'https://github.com/org/repo', path: 'env/dev' }, type: 'automated' };

describe('GitOpsDeployment reconciler: replicas, restarts and failed operations', () => {
  const f = useBackendFixture();
  let tenant: { name: string; uid: string };

  beforeAll(async () => {
    tenant = await f.createNamespace();
  });

  test('two backend replicas write exactly one application, one operation and one Operation CR per GitOpsDeployment', async () => {
    const replicas = [await f.startBackend(), await f.startBackend()];
    const names = Array.from({ length: 6 }, (_, i) => `replicated-${i}`);
    const crs = await Promise.all(names.map((name) => f.createDeployment(tenant.name, name, spec)));
    const applications = await Promise.all(crs.map((cr) => f.applicationOf(cr)));
    for (const replica of replicas) {
      // Each replica reconciles every object to the end (its cache holds them all first), so the counts
      // below include whatever the slower replica would write.
      await eventually('every GitOpsDeployment in the replica cache', () =>
        names.every((name) => replica.informer.get(tenant.name, name)) ? true : undefined,
      );
      replica.deployments.enqueueAll();
      await replica.deployments.queue.whenIdle();
    }
    for (const application of applications) {
      const operations = await f.operationsOf(application.id);
      assert.equal(operations.length, 1, `one operation for ${application.name}`);
      await f.deliveredOperation(operations[0]!.id);
      assert.ok(await f.getOperationCr(operations[0]!.id));
    }
    const mappings = await f.db
      .selectFrom('api_cr_mapping')
      .selectAll()
      .where('cr_namespace', '=', tenant.name)
      .execute();
    assert.equal(mappings.length, names.length);
    for (const replica of replicas) await f.stopBackend(replica);
  });

  test('a GitOpsDeployment deleted while no backend ran is cleaned up when one starts', async () => {
    const first = await f.startBackend();
    const cr = await f.createDeployment(tenant.name, 'deleted-while-down', spec);
    const application = await f.applicationOf(cr);
    await f.stopBackend(first);
    await f.deleteDeployment(tenant.name, 'deleted-while-down');
    await eventually('CR gone', async () => !(await f.getDeployment(tenant.name, 'deleted-while-down')));

    const second = await f.startBackend();
    await eventually(
      'orphaned application deleted',
      async () => !(await getApplicationByName(f.db, application.name)),
    );
    const operations = await f.operationsOf(application.id);
    assert.ok(
      operations.some((o) => o.owner_uid === cr.metadata.uid && o.state === 'Waiting'),
      'the delete is announced',
    );
    await f.stopBackend(second);
  });

  test('a Failed operation of a live GitOpsDeployment is reported in ErrorOccurred; the next change resolves it', async () => {
    const backend = await f.startBackend();
    const cr = await f.createDeployment(tenant.name, 'failing', spec);
    const application = await f.applicationOf(cr);
    const [operation] = await f.operationsOf(application.id);
    assert.ok(operation, 'the application is announced');
    assert.equal((await startOperation(f.db, operation.id)).status, 'started');
    await failOperation(
      f.db,
      operation.id,
      'the Application was rejected: spec.source.repoURL is not permitted',
    );
    const failed = await eventually('ErrorOccurred', async () => {
      const object = await f.getDeployment(tenant.name, 'failing');
      const condition = object && (object.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred');
      return condition?.status === 'True' ? condition : undefined;
    });
    assert.match(failed.message ?? '', /spec.source.repoURL is not permitted/);

    await f.applyDeployment(tenant.name, 'failing', {
      ...spec,
      source: { ...spec.source, targetRevision: 'v2' },
    });
    const next = await eventually(
      'a new operation',
      async () =>
        await f.db
          .selectFrom('operation')
          .selectAll()
          .where('resource_id', '=', application.id)
          .where('state', '=', 'Waiting')
          .executeTakeFirst(),
    );
    assert.equal((await startOperation(f.db, next.id)).status, 'started');
    await completeOperation(f.db, next.id);
    const resolved = await eventually('ErrorOccurredResolved', async () => {
      const object = await f.getDeployment(tenant.name, 'failing');
      const condition = object && (object.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred');
      return condition?.status === 'False' ? condition : undefined;
    });
    assert.equal(resolved.reason, 'ErrorOccurredResolved');
    await f.stopBackend(backend);
  });
});
