import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  ErrorCode,
  isAlreadyExists,
  isConflict,
  isNamespaceTerminating,
  isTransientError,
  KubeApiError,
} from './errors.ts';
import {
  clusterIdentity,
  deleteIfExists,
  getObject,
  type KubeObject,
  patchStatus,
  serverSideApply,
} from './kube.ts';
import { HttpMethod, KubeConfig, kubeRequest, loadKubeConfig } from './kube-client.ts';
import { createEventRecorder } from './kube-events.ts';

const kubeconfigPath = process.env.KUBECONFIG;
const suffix = randomBytes(4).toString('hex');
const namespace = `shared-kube-${suffix}`;
const group = `t${suffix}.shared-test.gitops.example`;

describe('Kubernetes helpers against the API server', () => {
  let kc: KubeConfig;

  beforeAll(async () => {
    kc = loadKubeConfig(kubeconfigPath);
    await serverSideApply(
      kc,
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
      { fieldManager: 'shared-test' },
    );
  });

  afterAll(async () => {
    if (!kc) return;
    await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
    await deleteIfExists(kc, {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      name: `widgets.${group}`,
    });
  });

  it('server-side applies with our field manager, and conflicts with another manager unless forced', async () => {
    const configMap = (value: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'applied', namespace, labels: { team: 'gitops' } },
      data: { key: value },
    });
    const created = await serverSideApply(kc, configMap('one'), { fieldManager: 'gitops-test-agent' });
    assert.deepEqual(created.data, { key: 'one' });
    const managers = (created.metadata.managedFields as Array<{ manager: string; operation: string }>).map(
      (entry) => `${entry.manager}/${entry.operation}`,
    );
    assert.deepEqual(managers, ['gitops-test-agent/Apply']);

    const err = await serverSideApply(kc, configMap('two'), { fieldManager: 'someone-else' }).catch((e) => e);
    assert.ok(err instanceof KubeApiError, String(err));
    assert.equal(err.statusCode, 409);
    assert.equal(err.code, ErrorCode.kubeConflict);

    const forced = await serverSideApply(kc, configMap('two'), { fieldManager: 'someone-else', force: true });
    assert.deepEqual(forced.data, { key: 'two' });

    // Dropping a field from our applied configuration removes it (we own it again after a force).
    const owned = await serverSideApply(
      kc,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'applied', namespace }, data: { other: 'x' } },
      { fieldManager: 'someone-else' },
    );
    assert.deepEqual(owned.data, { other: 'x' });
    assert.equal(owned.metadata.labels?.team, 'gitops', 'fields of the other manager stay');
  });

  it('server-side applies only at the resourceVersion given as a precondition', async () => {
    const applied = (value: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'preconditioned', namespace, resourceVersion: '1' },
      data: { key: value },
    });
    // The object's own resourceVersion is never sent: this one would be refused.
    const first = await serverSideApply(kc, applied('one'), { fieldManager: 'gitops-test-agent' });
    const stale = first.metadata.resourceVersion;
    const second = await serverSideApply(kc, applied('two'), {
      fieldManager: 'gitops-test-agent',
      resourceVersion: stale,
    });
    assert.deepEqual(second.data, { key: 'two' });
    const err = await serverSideApply(kc, applied('three'), {
      fieldManager: 'gitops-test-agent',
      resourceVersion: stale,
    }).catch((e) => e);
    assert.ok(err instanceof KubeApiError, String(err));
    assert.equal(err.statusCode, 409);
    const live = await getObject(kc, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'preconditioned',
      namespace,
    });
    assert.deepEqual(live?.data, { key: 'two' }, 'a refused apply wrote nothing');
  });

  it('reads, and deletes only if the object exists', async () => {
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'to-delete', namespace };
    assert.equal(await getObject(kc, ref), undefined);
    assert.equal(await deleteIfExists(kc, ref), false);
    await serverSideApply(
      kc,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: ref.name, namespace } },
      { fieldManager: 'shared-test' },
    );
    const live = await getObject(kc, ref);
    assert.equal(live?.metadata.name, 'to-delete');
    assert.equal(
      await deleteIfExists(kc, ref, { uid: live?.metadata.uid, propagationPolicy: 'Background' }),
      true,
    );
    assert.equal(await getObject(kc, ref), undefined);
    assert.equal(await deleteIfExists(kc, ref), false);
  });

  it('deletes only the version looked at: one changed since is refused as a conflict and stays', async () => {
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'changed-before-delete', namespace };
    const apply = (value: string) =>
      serverSideApply(
        kc,
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: ref.name, namespace },
          data: { key: value },
        },
        { fieldManager: 'shared-test' },
      );
    const seen = await apply('one');
    const changed = await apply('two');
    const stale = await deleteIfExists(kc, ref, {
      uid: seen.metadata.uid,
      resourceVersion: seen.metadata.resourceVersion,
    }).catch((err: unknown) => err);
    assert.ok(isConflict(stale), 'refused as a conflict');
    assert.deepEqual((await getObject(kc, ref))?.data, { key: 'two' });
    assert.equal(
      await deleteIfExists(kc, ref, {
        uid: changed.metadata.uid,
        resourceVersion: changed.metadata.resourceVersion,
      }),
      true,
    );
    assert.equal(await getObject(kc, ref), undefined);
  });

  it('merge-patches only the status subresource', async () => {
    await serverSideApply(
      kc,
      {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: `widgets.${group}` },
        spec: {
          group,
          names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: { type: 'object', properties: { size: { type: 'integer' } } },
                    status: { type: 'object', properties: { phase: { type: 'string' } } },
                  },
                },
              },
            },
          ],
        },
      },
      { fieldManager: 'shared-test' },
    );
    await eventually('the Widget CRD to be established', async () => {
      const crd = (await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${group}`,
      })) as { status?: { conditions?: Array<{ type: string; status: string }> } };
      return (
        crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') || undefined
      );
    });
    const widget = {
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      metadata: { name: 'w', namespace },
      spec: { size: 1 },
    };
    await eventually('the Widget kind to be served', () =>
      serverSideApply(kc, widget, { fieldManager: 'shared-test' }),
    );
    const ref = { apiVersion: `${group}/v1`, kind: 'Widget', name: 'w', namespace };
    const patched = await patchStatus(kc, ref, { status: { phase: 'Ready' }, spec: { size: 99 } });
    assert.deepEqual(patched.status, { phase: 'Ready' });
    assert.deepEqual(patched.spec, { size: 1 }, 'the status subresource ignores spec changes');
  });

  it('records an event once and bumps its count when it repeats', async () => {
    const involved = await serverSideApply(
      kc,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'with-events', namespace } },
      { fieldManager: 'shared-test' },
    );
    const recorder = createEventRecorder(kc, { component: 'gitops-test', instance: 'test-pod' });
    await Promise.all([
      recorder.event(involved, 'Normal', 'Created', 'Application created in Argo CD'),
      recorder.event(involved, 'Normal', 'Created', 'Application created in Argo CD'),
    ]);
    await recorder.event(involved, 'Normal', 'Created', 'Application created in Argo CD');
    await recorder.event(involved, 'Warning', 'SyncFailed', 'sync failed: boom');

    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/api/v1/namespaces/${namespace}/events`,
      query: { fieldSelector: `involvedObject.name=with-events` },
    })) as { items: Array<Record<string, unknown>> };
    const summary = list.items
      .map((event) => ({
        type: event.type,
        reason: event.reason,
        message: event.message,
        count: event.count,
        uid: (event.involvedObject as { uid?: string }).uid,
        component: (event.source as { component?: string }).component,
      }))
      .sort((a, b) => String(a.reason).localeCompare(String(b.reason)));
    assert.deepEqual(summary, [
      {
        type: 'Normal',
        reason: 'Created',
        message: 'Application created in Argo CD',
        count: 3,
        uid: involved.metadata.uid,
        component: 'gitops-test',
      },
      {
        type: 'Warning',
        reason: 'SyncFailed',
        message: 'sync failed: boom',
        count: 1,
        uid: involved.metadata.uid,
        component: 'gitops-test',
      },
    ]);
  });

  it('tells a create that met an existing object (isAlreadyExists) from a stale write (a conflict only)', async () => {
    const path = `/api/v1/namespaces/${namespace}/configmaps`;
    const body = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'exists' }, data: { a: '1' } };
    const created = (await kubeRequest(kc, { method: HttpMethod.POST, path, body })) as KubeObject;
    const again = await kubeRequest(kc, { method: HttpMethod.POST, path, body }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isConflict(again));
    assert.equal(isAlreadyExists(again), true);
    await kubeRequest(kc, {
      method: HttpMethod.PUT,
      path: `${path}/exists`,
      body: { ...body, data: { a: '2' }, metadata: { ...created.metadata } },
    });
    const stale = await kubeRequest(kc, {
      method: HttpMethod.PUT,
      path: `${path}/exists`,
      body: { ...body, data: { a: '3' }, metadata: { ...created.metadata } },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isConflict(stale), 'a stale resourceVersion is a conflict');
    assert.equal(isAlreadyExists(stale), false);
  });

  it('tells a create refused because its namespace is being deleted (isNamespaceTerminating) by the Status cause, not by a 403 alone', async () => {
    const doomed = `shared-kube-doomed-${suffix}`;
    const configMap = (name: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: doomed },
    });
    await serverSideApply(
      kc,
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: doomed } },
      {
        fieldManager: 'shared-test',
      },
    );
    // A 403 of another kind (RBAC) is not it.
    assert.equal(
      isNamespaceTerminating(
        new KubeApiError({ statusCode: 403, method: 'POST', path: '/x', message: 'being terminated' }),
      ),
      false,
    );
    // The namespace stays Terminating while its `kubernetes` finalizer is there (no namespace controller runs
    // here to remove it; the test removes it at the end, as that controller would).
    await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name: doomed });
    try {
      const refusal = await eventually('a create in the terminating namespace refused', async () => {
        try {
          await kubeRequest(kc, {
            method: HttpMethod.POST,
            path: `/api/v1/namespaces/${doomed}/configmaps`,
            body: configMap(`late-${randomBytes(3).toString('hex')}`),
          });
          return undefined;
        } catch (err) {
          return err instanceof KubeApiError && err.statusCode === 403 ? err : undefined;
        }
      });
      assert.deepEqual(refusal.causes, ['NamespaceTerminating']);
      assert.equal(isNamespaceTerminating(refusal), true);
    } finally {
      await kubeRequest(kc, {
        method: HttpMethod.PUT,
        path: `/api/v1/namespaces/${doomed}/finalize`,
        body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: doomed }, spec: { finalizers: [] } },
      }).catch(() => undefined);
    }
  });

  it('reports an unknown kind as a retryable error', async () => {
    const err = await getObject(kc, {
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      name: 'x',
      namespace,
    }).catch((e) => e);
    assert.equal(err.code, ErrorCode.kubeUnknownKind);
    assert.equal(err.retryable, true);
  });

  it("identifies the cluster by kube-system's uid, by the URL when RBAC hides it, and never by a silent API server", async () => {
    const kubeSystem = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: 'kube-system' });
    assert.ok(kubeSystem?.metadata.uid);
    assert.equal(await clusterIdentity(kc), kubeSystem.metadata.uid);
    // A user who may not read namespaces (403): the API server URL, always the same for that user.
    const user = loadKubeConfig(process.env.GITOPS_TEST_USER_KUBECONFIG);
    assert.equal(await clusterIdentity(user), user.getCurrentCluster()?.server);
    // Nothing listens at the address (an API server restarting): an error to retry, not another cluster's URL.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as { port: number };
    await new Promise((resolve) => closed.close(resolve));
    const away = new KubeConfig();
    away.loadFromOptions({
      clusters: [{ ...kc.getCurrentCluster(), name: 'away', server: `https://127.0.0.1:${port}` }],
      users: [kc.getCurrentUser() ?? { name: 'none' }],
      contexts: [{ name: 'away', cluster: 'away', user: kc.getCurrentUser()?.name ?? 'none' }],
      currentContext: 'away',
    });
    const err = await clusterIdentity(away).then(
      (identity) => assert.fail(`an identity without an API server: ${identity}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof KubeApiError && isTransientError(err), String(err));
  });
});
