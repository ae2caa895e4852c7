import assert from 'node:assert/strict';
import { Finalizer, GitOpsDeploymentMessage, Label } from '@gitops/api';
import {
  completeOperation,
  failOperation,
  getApiCrMappingByUid,
  getApplicationByName,
  getApplicationDeletion,
  getClusterUser,
  getManagedEnvironment,
  startOperation,
} from '@gitops/db';
import { recordStatements } from '@gitops/db/testing';
import { HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually, listEvents, recordKubeRequests } from '@gitops/shared/testing';
import { describe, test } from 'vitest';
import { useStartedBackend } from '../testing/backend-fixture.ts';

const repoURL = 'https://github.com/redhat-appstudio/managed-gitops';
const automatedSpec = {
  source: { repoURL, path: 'resources/test-data/sample-gitops-repository/environments/overlays/dev' },
  type: 'automated',
};

describe('GitOpsDeployment reconciler', () => {
  // A failed delete is announced again after this long (default 1 minute).
  const { f, backend, tenant } = useStartedBackend({ GITOPS_OPERATION_RETRY_INTERVAL: '2s' });

  const applicationOf = (object: KubeObject) => f.applicationOf(object);
  const operationsOf = (resourceId: string) => f.operationsOf(resourceId);
  /** What the agent does with an operation: In_Progress, then Completed (or Failed). */
  const finishAsAgent = async (operationId: string, outcome: 'Completed' | 'Failed', message = '') => {
    const started = await startOperation(f.db, operationId);
    assert.equal(started.status, 'started');
    if (outcome === 'Completed') assert.ok(await completeOperation(f.db, operationId, message));
    else assert.ok(await failOperation(f.db, operationId, message));
  };

  test('creating an automated GitOpsDeployment writes the application, the mapping, one operation and an Operation CR', async () => {
    const cr = await f.createDeployment(tenant.name, 'automated', {
      ...automatedSpec,
      syncPolicy: { syncOptions: ['CreateNamespace=true'] },
    });
    const application = await applicationOf(cr);
    assert.deepEqual(application.spec, {
      source: { repoURL, path: automatedSpec.source.path, targetRevision: '' },
      destination: { namespace: tenant.name },
      syncPolicy: {
        automated: { prune: true, selfHeal: true, allowEmpty: true },
        syncOptions: ['PrunePropagationPolicy=background', 'CreateNamespace=true'],
        retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
      },
    });
    assert.equal(application.engine_instance_id, backend.engineInstance().id);

    const mapping = await getApiCrMappingByUid(f.db, cr.metadata.uid!);
    assert.equal(mapping?.application_id, application.id);
    assert.equal(mapping?.cr_name, 'automated');
    assert.equal(mapping?.cr_namespace, tenant.name);
    assert.equal(mapping?.cr_namespace_uid, tenant.uid);

    assert.equal((await getClusterUser(f.db, application.cluster_user_id))?.namespace_uid, tenant.uid);
    const environment = await getManagedEnvironment(f.db, application.managed_environment_id!);
    assert.equal(environment?.kind, 'Workspace');

    const operations = await operationsOf(application.id);
    assert.equal(operations.length, 1);
    const [operation] = operations;
    assert.equal(operation?.resource_type, 'Application');
    assert.equal(operation?.owner_kind, 'GitOpsDeployment');
    assert.equal(operation?.owner_uid, cr.metadata.uid);
    assert.equal(operation?.owner_name, 'automated');
    const operationCr = await eventually('Operation CR', () => f.getOperationCr(operation!.id));
    assert.deepEqual(operationCr.spec, { operationID: operation!.id });
    await eventually('operation marked delivered', async () =>
      (await operationsOf(application.id)).every((o) => o.delivered_at !== null),
    );
  });

  test('a GitOpsDeployment of a placed tenant costs the backend one statement about it (its application, mapping and operation together) and no API read', async () => {
    const placed = await f.createDeployment(tenant.name, 'placed-first', automatedSpec);
    await applicationOf(placed);
    const recorder = recordStatements('gitops-backend');
    const requests = recordKubeRequests();
    try {
      const cr = await f.createDeployment(tenant.name, 'counted', automatedSpec);
      const application = await applicationOf(cr);
      await eventually('operation marked delivered', async () =>
        (await operationsOf(application.id)).every((o) => o.delivered_at !== null),
      );
      // A reconcile that would follow its own write (a read of what it just wrote) has had its turn.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const about = recorder
        .about(cr.metadata.uid!, application.id)
        .map((s) => s.text.replace(/\s+/g, ' ').trim().split(' ').slice(0, 3).join(' '));
      // createApplicationOfNewDeployment: the name's lock, the placed tenant, the three inserts. A statement
      // more for a new deployment (a read of the tenant, of its environment, of the mapping) fails here.
      assert.deepEqual(about, ['with lock as']);
      // Nor any read of the API server: the namespace's uid comes from the backend's own cache of namespaces.
      const ownNamespace = `/api/v1/namespaces/${tenant.name}`;
      assert.deepEqual(
        requests.requests.filter(
          (r) => r.method === 'GET' && (r.path === ownNamespace || r.path.startsWith(`${ownNamespace}?`)),
        ),
        [],
      );
    } finally {
      recorder.stop();
      requests.stop();
    }
  });

  test('a Completed operation of a deployment without an error queues no reconcile; a Failed one does', async () => {
    const quiet = await f.applyDeployment(tenant.name, 'quiet', automatedSpec);
    const failing = await f.applyDeployment(tenant.name, 'fails-later', automatedSpec);
    const [quietOperation] = await operationsOf((await applicationOf(quiet)).id);
    const [failingOperation] = await operationsOf((await applicationOf(failing)).id);
    await backend.deployments.queue.whenIdle();
    // Record which keys the controller queues from here on (other tests' deployments may be queued by a
    // relist meanwhile; only these two keys matter).
    const queued: string[] = [];
    const queue = backend.deployments.queue;
    const add = queue.add.bind(queue);
    queue.add = (key: string) => {
      queued.push(key);
      add(key);
    };
    try {
      await finishAsAgent(quietOperation!.id, 'Completed');
      // The barrier: the later Failed operation must reach its owner (ErrorOccurred=True on it).
      await finishAsAgent(failingOperation!.id, 'Failed', 'the Application could not be applied');
      await eventually('ErrorOccurred on the failing deployment', async () => {
        const object = await f.getDeployment(tenant.name, 'fails-later');
        return (
          object &&
          (object.status?.conditions ?? []).some((c) => c.type === 'ErrorOccurred' && c.status === 'True')
        );
      });
      await queue.whenIdle();
    } finally {
      queue.add = add;
    }
    assert.ok(queued.includes(`${tenant.name}/fails-later`), 'the Failed operation queued its owner');
    assert.ok(!queued.includes(`${tenant.name}/quiet`), 'the Completed operation queued nothing');
    assert.deepEqual((await f.getDeployment(tenant.name, 'quiet'))?.status?.conditions ?? [], []);
  });

  test('a manual GitOpsDeployment has no automated policy, and sync option changes follow', async () => {
    const spec = { ...automatedSpec, type: 'manual' };
    const cr = await f.applyDeployment(tenant.name, 'manual', spec);
    const application = await applicationOf(cr);
    assert.deepEqual(application.spec, {
      source: { repoURL, path: spec.source.path, targetRevision: '' },
      destination: { namespace: tenant.name },
    });

    await finishAsAgent((await operationsOf(application.id))[0]!.id, 'Completed');
    await f.applyDeployment(tenant.name, 'manual', {
      ...spec,
      syncPolicy: { syncOptions: ['CreateNamespace=false'] },
    });
    await eventually('sync options in the application', async () => {
      const row = await getApplicationByName(f.db, application.name);
      return row && (row.spec as { syncPolicy?: unknown }).syncPolicy !== undefined ? row : undefined;
    });
    assert.deepEqual((await getApplicationByName(f.db, application.name))?.spec, {
      source: { repoURL, path: spec.source.path, targetRevision: '' },
      destination: { namespace: tenant.name },
      syncPolicy: { syncOptions: ['CreateNamespace=false'] },
    });

    await f.applyDeployment(tenant.name, 'manual', {
      ...spec,
      type: 'automated',
      source: { ...spec.source, targetRevision: 'main' },
    });
    const updated = await eventually('automated policy and revision', async () => {
      const row = await getApplicationByName(f.db, application.name);
      const s = row?.spec as
        | { syncPolicy?: { automated?: unknown }; source: { targetRevision: string } }
        | undefined;
      return s?.syncPolicy?.automated && s && s.source.targetRevision === 'main' ? s : undefined;
    });
    assert.deepEqual(updated.syncPolicy, {
      automated: { prune: true, selfHeal: true, allowEmpty: true },
      syncOptions: ['PrunePropagationPolicy=background'],
      retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
    });
    // Each change is announced: while the agent has not taken the Waiting operation it is reused, so the
    // first operation (finished by the "agent" above) and one Waiting operation for the later changes.
    const operations = await operationsOf(application.id);
    assert.equal(operations.filter((o) => o.state === 'Waiting').length, 1);
    assert.equal(operations.length, 2);
  });

  test('an identical re-apply creates no new operation', async () => {
    const cr = await f.applyDeployment(tenant.name, 'reapplied', automatedSpec);
    const application = await applicationOf(cr);
    await eventually('first operation delivered', async () =>
      (await operationsOf(application.id)).every((o) => o.delivered_at !== null),
    );
    const before = await operationsOf(application.id);
    assert.equal(before.length, 1);

    // Same spec with another field order and a label change (a new resourceVersion, same spec).
    const reapplied = await f.applyDeployment(tenant.name, 'reapplied', {
      type: 'automated',
      source: { path: automatedSpec.source.path, repoURL },
    });
    // The backend's cache holds the re-applied object before the reconciles below (else they would look at
    // the old one and prove nothing).
    await eventually('the re-applied object in the backend cache', () =>
      backend.informer.get(tenant.name, 'reapplied')?.metadata.resourceVersion ===
      reapplied.metadata.resourceVersion
        ? true
        : undefined,
    );
    await backend.deployments.queue.whenIdle();
    // A full resync delivers every object again.
    backend.deployments.enqueueAll();
    await backend.deployments.queue.whenIdle();
    const afterward = await operationsOf(application.id);
    assert.deepEqual(
      afterward.map((o) => o.id),
      before.map((o) => o.id),
    );
    assert.equal(
      (await getApplicationByName(f.db, application.name))?.updated_at.getTime(),
      application.updated_at.getTime(),
    );
  });

  test('deleting a GitOpsDeployment removes its rows and announces a delete operation', async () => {
    const cr = await f.applyDeployment(tenant.name, 'deleted', automatedSpec);
    const application = await applicationOf(cr);
    await f.deleteDeployment(tenant.name, 'deleted');
    await eventually(
      'application row deleted',
      async () => !(await getApplicationByName(f.db, application.name)),
    );
    assert.equal(await getApiCrMappingByUid(f.db, cr.metadata.uid!), undefined);
    const operations = await operationsOf(application.id);
    const last = operations.at(-1);
    assert.equal(last?.resource_type, 'Application');
    assert.equal(last?.owner_uid, cr.metadata.uid);
    assert.equal(last?.state, 'Waiting');
    await eventually('delete announced with an Operation CR', () => f.getOperationCr(last!.id));
  });

  test('a deleted GitOpsDeployment leaves the proof the agent needs to prune; one relabelled to another backend shard keeps its rows', async () => {
    const deleted = await applicationOf(await f.applyDeployment(tenant.name, 'proven', automatedSpec));
    await f.deleteDeployment(tenant.name, 'proven');
    const proof = await eventually('proof of the deletion recorded', () =>
      getApplicationDeletion(f.db, deleted.id),
    );
    assert.equal(proof.application_name, deleted.name);
    assert.equal(proof.engine_instance_id, deleted.engine_instance_id);
    assert.equal(proof.pruned_at, null);

    // Relabelled to another shard (which finds the rows by the object's uid): this backend leaves them, even
    // when its orphan sweep finds the object missing from its cache (a live read shows it is the other shard's).
    const moved = await applicationOf(await f.applyDeployment(tenant.name, 'resharded', automatedSpec));
    const before = (await operationsOf(moved.id)).length;
    await kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant.name}/gitopsdeployments/resharded`,
      body: { metadata: { labels: { [Label.BackendShard]: `elsewhere-${f.runLabel}` } } },
      contentType: 'application/merge-patch+json',
    });
    await eventually('the relabelled deployment has left this shard', async () =>
      backend.informer.get(tenant.name, 'resharded') ? undefined : true,
    );
    // The orphan sweep finds its mapping missing from the cache and queues it; its reconcile reads it live.
    assert.ok((await backend.deployments.sweepOrphans()) >= 1);
    await backend.deployments.queue.whenIdle();
    assert.equal((await getApplicationByName(f.db, moved.name))?.id, moved.id, 'its row was deleted');
    assert.equal((await operationsOf(moved.id)).length, before, 'a delete was announced');
    assert.equal(await getApplicationDeletion(f.db, moved.id), undefined);
  });

  test('deleting and re-creating a GitOpsDeployment with the same name three times replaces its application each time', async () => {
    const seen: string[] = [];
    for (let round = 0; round < 3; round++) {
      const cr = await f.createDeployment(tenant.name, 'recreated', automatedSpec);
      const application = await applicationOf(cr);
      seen.push(application.id);
      await f.deleteDeployment(tenant.name, 'recreated');
    }
    const cr = await f.createDeployment(tenant.name, 'recreated', automatedSpec);
    const current = await applicationOf(cr);
    for (const id of seen) {
      await eventually(
        `old application ${id} deleted`,
        async () =>
          !(await f.db.selectFrom('application').select('id').where('id', '=', id).executeTakeFirst()),
      );
      const ops = await operationsOf(id);
      assert.ok(ops.length >= 1, 'the delete was announced');
    }
    assert.equal(new Set([...seen, current.id]).size, 4);
    const mappings = await f.db
      .selectFrom('api_cr_mapping')
      .selectAll()
      .where('cr_namespace', '=', tenant.name)
      .where('cr_name', '=', 'recreated')
      .execute();
    assert.deepEqual(
      mappings.map((m) => m.cr_uid),
      [cr.metadata.uid],
    );
  });

  test('a reference to a ManagedEnvironment reports ErrorOccurred, and fixing it resolves the error', async () => {
    await f.applyDeployment(tenant.name, 'with-environment', {
      ...automatedSpec,
      destination: { environment: 'my-env', namespace: tenant.name },
    });
    const withError = await eventually('ErrorOccurred', async () => {
      const object = await f.getDeployment(tenant.name, 'with-environment');
      const condition = object && (object.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred');
      return condition?.status === 'True' ? condition : undefined;
    });
    assert.equal(withError.reason, 'ErrorOccurred');
    assert.equal(withError.message, GitOpsDeploymentMessage.ManagedEnvironmentUnusable);
    assert.ok(withError.lastTransitionTime);

    const events = await eventually('a Warning event', async () => {
      const events = await listEvents(f.kc, tenant.name, { name: 'with-environment' });
      const found = events.filter((e) => e.reason === 'ErrorOccurred');
      return found.length > 0 ? found : undefined;
    });
    assert.equal(events[0]?.type, 'Warning');

    await f.applyDeployment(tenant.name, 'with-environment', automatedSpec);
    const resolved = await eventually('ErrorOccurredResolved', async () => {
      const object = await f.getDeployment(tenant.name, 'with-environment');
      const condition = object && (object.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred');
      return condition?.status === 'False' ? condition : undefined;
    });
    assert.equal(resolved.reason, 'ErrorOccurredResolved');
    assert.equal(resolved.message, '');
  });

  test('the user finalizer is removed only after the delete operation is Completed; a Failed one keeps it until a retry succeeds', async () => {
    const cr = await f.createDeployment(tenant.name, 'finalized', automatedSpec, {
      finalizers: [Finalizer.GitOpsDeploymentResources],
    });
    const application = await applicationOf(cr);
    await finishAsAgent((await operationsOf(application.id))[0]!.id, 'Completed');

    await f.deleteDeployment(tenant.name, 'finalized');
    await eventually(
      'application row deleted',
      async () => !(await getApplicationByName(f.db, application.name)),
    );
    const deleteOperation = await eventually('delete operation', async () =>
      (await operationsOf(application.id)).find((o) => o.state === 'Waiting'),
    );
    await backend.deployments.queue.whenIdle();
    const waiting = await f.getDeployment(tenant.name, 'finalized');
    assert.deepEqual(waiting?.metadata.finalizers, [Finalizer.GitOpsDeploymentResources]);

    // The agent fails the delete: the finalizer stays and the failure is reported.
    await finishAsAgent(deleteOperation.id, 'Failed', 'Argo CD refused to delete the Application');
    const failed = await eventually('ErrorOccurred for the failed delete', async () => {
      const object = await f.getDeployment(tenant.name, 'finalized');
      const condition = object && (object.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred');
      return object && condition?.status === 'True' ? { object, condition } : undefined;
    });
    assert.match(failed.condition.message ?? '', /Argo CD refused to delete the Application/);
    assert.deepEqual(failed.object.metadata.finalizers, [Finalizer.GitOpsDeploymentResources]);

    // Second object: the agent completes the delete, the finalizer goes and the object with it.
    const second = await f.createDeployment(tenant.name, 'finalized-ok', automatedSpec, {
      finalizers: [Finalizer.GitOpsDeploymentResources],
    });
    const secondApplication = await applicationOf(second);
    await f.deleteDeployment(tenant.name, 'finalized-ok');
    const secondDelete = await eventually('second delete operation', async () => {
      if (await getApplicationByName(f.db, secondApplication.name)) return undefined;
      return (await operationsOf(secondApplication.id)).find((o) => o.state === 'Waiting');
    });
    await backend.deployments.queue.whenIdle();
    assert.ok(
      await f.getDeployment(tenant.name, 'finalized-ok'),
      'kept while the delete operation is Waiting',
    );
    await finishAsAgent(secondDelete.id, 'Completed');
    await eventually(
      'the GitOpsDeployment is gone',
      async () => !(await f.getDeployment(tenant.name, 'finalized-ok')),
    );

    // The failed delete is announced again (GITOPS_OPERATION_RETRY_INTERVAL after the failure); this time the
    // agent completes it, so the finalizer goes and the first object with it.
    const retry = await eventually('the delete announced again', async () =>
      (await operationsOf(application.id)).find((o) => o.state === 'Waiting' && o.id !== deleteOperation.id),
    );
    assert.equal(retry.owner_uid, cr.metadata.uid);
    await finishAsAgent(retry.id, 'Completed');
    await eventually(
      'the first GitOpsDeployment is gone after the retried delete',
      async () => !(await f.getDeployment(tenant.name, 'finalized')),
    );
    // One failure, one retry: no more operations were announced.
    assert.deepEqual(
      (await operationsOf(application.id)).map((o) => o.state),
      ['Completed', 'Failed', 'Completed'],
    );
  });
});
