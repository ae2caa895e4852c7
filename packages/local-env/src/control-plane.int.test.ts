import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { eventually } from '@gitops/shared/testing';
import { ApiException, ApisApi, AppsV1Api, CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, describe, it } from 'vitest';

const isNotFound = (e: unknown) => e instanceof ApiException && e.code === 404;

/** Waits up to 120 s until `read` answers 404 (the controller manager deletes in the background). */
const eventuallyGone = (what: string, read: () => Promise<unknown>) =>
  eventually(
    what,
    async () => {
      try {
        await read();
        return undefined;
      } catch (e) {
        if (isNotFound(e)) return true;
        throw e;
      }
    },
    120_000,
  );

describe('the local control plane is a real Kubernetes API server', () => {
  const kc = new KubeConfig();
  kc.loadFromFile(process.env.KUBECONFIG ?? '');
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const ns = `cp-test-${randomBytes(4).toString('hex')}`;

  afterAll(async () => {
    await core.deleteNamespace({ name: ns }).catch(() => {});
  });

  it('creates, watches and deletes objects', async () => {
    await core.createNamespace({ body: { metadata: { name: ns } } });
    const seen: string[] = [];
    const watch = new Watch(kc);
    const { promise: deleted, resolve: resolveDeleted, reject: rejectWatch } = Promise.withResolvers<void>();
    // watch() resolves once the API server answered the watch request, so every write below is an event
    // of this watch (a fixed pause could end before it was established, and the writes before it would
    // arrive as one synthetic ADDED).
    const controller = await watch.watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      {},
      (type: string, obj: { metadata?: { name?: string } }) => {
        seen.push(`${type} ${obj.metadata?.name}`);
        if (type === 'DELETED') resolveDeleted();
      },
      (err: unknown) => {
        if (err) rejectWatch(err);
      },
    );
    void deleted.finally(() => controller.abort()).catch(() => {});
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'cm' }, data: { a: '1' } },
    });
    await core.patchNamespacedConfigMap({
      namespace: ns,
      name: 'cm',
      body: [{ op: 'replace', path: '/data/a', value: '2' }],
    });
    const read = await core.readNamespacedConfigMap({ namespace: ns, name: 'cm' });
    assert.equal(read.data?.a, '2');
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'cm' });
    await deleted;
    assert.deepEqual(seen, ['ADDED cm', 'MODIFIED cm', 'DELETED cm']);
  });

  it('garbage-collects a child whose owner is deleted', async () => {
    const owner = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'owner' } },
    });
    await core.createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: {
          name: 'child',
          ownerReferences: [
            { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata?.uid ?? '' },
          ],
        },
        stringData: { k: 'v' },
      },
    });
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });
    await eventuallyGone('the child Secret to be garbage-collected', () =>
      core.readNamespacedSecret({ namespace: ns, name: 'child' }),
    );
  });

  it('finishes deleting a namespace that still holds objects', async () => {
    const doomed = `${ns}-doomed`;
    await core.createNamespace({ body: { metadata: { name: doomed } } });
    await core.createNamespacedConfigMap({ namespace: doomed, body: { metadata: { name: 'a' } } });
    await apps.createNamespacedDeployment({
      namespace: doomed,
      body: {
        metadata: { name: 'd' },
        spec: {
          selector: { matchLabels: { app: 'd' } },
          template: {
            metadata: { labels: { app: 'd' } },
            spec: { containers: [{ name: 'c', image: 'busybox' }] },
          },
        },
      },
    });
    await core.deleteNamespace({ name: doomed });
    await eventuallyGone('the namespace to disappear', () => core.readNamespace({ name: doomed }));
  });

  it('enforces RBAC for the non-admin test user', async () => {
    const user = new KubeConfig();
    user.loadFromFile(process.env.GITOPS_TEST_USER_KUBECONFIG ?? '');
    const userCore = user.makeApiClient(CoreV1Api);
    await assert.rejects(
      () => userCore.listNamespacedConfigMap({ namespace: ns }),
      (e: unknown) => e instanceof ApiException && e.code === 403,
    );
  });

  it('serves the Argo CD and managed-gitops CRDs', async () => {
    const groups = await kc.makeApiClient(ApisApi).getAPIVersions();
    const names = groups.groups.map((g) => g.name);
    assert.ok(names.includes('argoproj.io'), `argoproj.io missing from ${names.join(',')}`);
    assert.ok(
      names.includes('managed-gitops.redhat.com'),
      `managed-gitops.redhat.com missing from ${names.join(',')}`,
    );
  });
});
