import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createInformer, type Informer, type InformerOptions } from './informer.ts';
import { namespacedIndexValue } from './informer-indexes.ts';
import { deleteIfExists, type KubeObject, serverSideApply } from './kube.ts';
import { type KubeConfig, loadKubeConfig } from './kube-client.ts';
import { createSilentLogger } from './logger.ts';
import { createMetricsRegistry, type Registry } from './metrics.ts';

const kubeconfigPath = process.env.KUBECONFIG;
const localEnvEntry = new URL('../../local-env/src/index.ts', import.meta.url);
const testLabel = 'shared-informer-test';

async function counter(registry: Registry, name: string, resource = 'configmaps'): Promise<number> {
  const metric = registry.getSingleMetric(name);
  const values = metric ? (await metric.get()).values : [];
  return values.find((value) => value.labels.resource === resource)?.value ?? 0;
}

function configMap(
  namespace: string,
  name: string,
  data: Record<string, string>,
  labelled = true,
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace, labels: labelled ? { 'app.kubernetes.io/part-of': testLabel } : {} },
    data,
  };
}

/** An informer on labelled ConfigMaps of one namespace that records what its handlers saw. */
function recordingInformer(
  kc: KubeConfig,
  namespace: string,
  options: Partial<InformerOptions<KubeObject>> = {},
) {
  const registry = createMetricsRegistry({ defaultMetrics: false });
  const seen: string[] = [];
  const informer: Informer<KubeObject> = createInformer({
    kubeConfig: kc,
    resource: { apiVersion: 'v1', plural: 'configmaps' },
    namespace,
    labelSelector: `app.kubernetes.io/part-of=${testLabel}`,
    registry,
    logger: createSilentLogger(),
    backoff: { initialMs: 100, maxMs: 1_000 },
    ...options,
  });
  const data = (object: KubeObject) => JSON.stringify(object.data ?? {});
  informer.onAdd((object) => seen.push(`add ${object.metadata.name} ${data(object)}`));
  informer.onUpdate((old, object) =>
    seen.push(`update ${object.metadata.name} ${data(old)}->${data(object)}`),
  );
  informer.onDelete((object) => seen.push(`delete ${object.metadata.name}`));
  return { informer, registry, seen, has: (entry: string) => seen.includes(entry) || undefined };
}

async function createNamespace(kc: KubeConfig, name: string) {
  await serverSideApply(
    kc,
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
    { fieldManager: 'shared-test' },
  );
}

describe('informer against the API server', () => {
  let kc: KubeConfig;
  const namespace = `shared-informer-${randomBytes(4).toString('hex')}`;
  const informers: Informer<KubeObject>[] = [];
  const apply = (object: KubeObject) =>
    serverSideApply(kc, object, { fieldManager: 'shared-test', force: true });

  beforeAll(async () => {
    kc = loadKubeConfig(kubeconfigPath);
    await createNamespace(kc, namespace);
  });

  afterAll(async () => {
    await Promise.all(informers.map((informer) => informer.stop()));
    if (kc) await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
  });

  it('lists existing objects, then sees adds, updates and deletes of the selected objects only', async () => {
    await apply(configMap(namespace, 'before-start', { a: '0' }));
    const t = recordingInformer(kc, namespace);
    informers.push(t.informer);
    t.informer.start();
    assert.equal(await t.informer.waitForSync(), true);
    assert.ok(t.informer.hasSynced());
    assert.deepEqual(t.seen, ['add before-start {"a":"0"}']);

    await apply(configMap(namespace, 'cm', { a: '1' }));
    await apply(configMap(namespace, 'unselected', { a: '1' }, false));
    await eventually('add of cm', () => t.has('add cm {"a":"1"}'));
    const cached = t.informer.get(namespace, 'cm');
    assert.deepEqual(cached?.data, { a: '1' });
    assert.equal(cached?.metadata.managedFields, undefined, 'managedFields are stripped');

    await apply(configMap(namespace, 'cm', { a: '2' }));
    await eventually('update of cm', () => t.has('update cm {"a":"1"}->{"a":"2"}'));
    assert.deepEqual(t.informer.get(namespace, 'cm')?.data, { a: '2' });

    await deleteIfExists(kc, { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', namespace });
    await eventually('delete of cm', () => t.has('delete cm'));
    assert.equal(t.informer.get(namespace, 'cm'), undefined);
    assert.deepEqual(
      t.informer.list(namespace).map((object) => object.metadata.name),
      ['before-start'],
    );
    assert.ok(!t.seen.some((entry) => entry.includes('unselected')), 'the label selector is applied');
  });

  it('caches objects as the transform leaves them, for listed and watched objects alike', async () => {
    const keepKeyA = (object: KubeObject): KubeObject => ({
      ...object,
      data: { a: String((object.data as Record<string, string> | undefined)?.a) },
    });
    await apply(configMap(namespace, 'trim-listed', { a: '1', big: 'x'.repeat(1000) }));
    const t = recordingInformer(kc, namespace, { transform: keepKeyA });
    informers.push(t.informer);
    t.informer.start();
    assert.equal(await t.informer.waitForSync(), true);
    assert.deepEqual(t.informer.get(namespace, 'trim-listed')?.data, { a: '1' });
    await apply(configMap(namespace, 'trim-watched', { a: '2', big: 'y'.repeat(1000) }));
    await eventually('add of trim-watched', () => t.has('add trim-watched {"a":"2"}'));
    assert.deepEqual(t.informer.get(namespace, 'trim-watched')?.data, { a: '2' });
  });

  it('keeps its indexes in step with listed, watched, changed, deleted and relisted objects', async () => {
    const parentOf = (object: KubeObject) => {
      const parent = (object.data as Record<string, string> | undefined)?.parent;
      return parent ? [namespacedIndexValue(object.metadata.namespace, parent)] : [];
    };
    const names = (objects: KubeObject[]) => objects.map((o) => o.metadata.name).sort();
    await apply(configMap(namespace, 'child-listed', { parent: 'p1' }));
    const t = recordingInformer(kc, namespace, {
      indexers: { parent: parentOf },
      resyncPeriodMs: 500,
      resyncJitter: 0,
    });
    informers.push(t.informer);
    t.informer.start();
    assert.equal(await t.informer.waitForSync(), true);
    const p1 = namespacedIndexValue(namespace, 'p1');
    const p2 = namespacedIndexValue(namespace, 'p2');
    assert.deepEqual(names(t.informer.byIndex('parent', p1)), ['child-listed']);

    await apply(configMap(namespace, 'child-watched', { parent: 'p1' }));
    await eventually('child-watched indexed under p1', () => t.informer.byIndex('parent', p1).length === 2);
    // An index added after the start is built from what is cached.
    t.informer.addIndexers({ hasParent: (o) => (parentOf(o).length > 0 ? ['yes'] : []) });
    assert.deepEqual(names(t.informer.byIndex('hasParent', 'yes')), ['child-listed', 'child-watched']);

    await apply(configMap(namespace, 'child-watched', { parent: 'p2' }));
    await eventually('child-watched moved to p2', () => t.informer.byIndex('parent', p2).length === 1);
    assert.deepEqual(names(t.informer.byIndex('parent', p1)), ['child-listed']);

    await deleteIfExists(kc, { apiVersion: 'v1', kind: 'ConfigMap', name: 'child-watched', namespace });
    await eventually(
      'child-watched gone from the index',
      () => t.informer.byIndex('parent', p2).length === 0,
    );
    assert.deepEqual(names(t.informer.byIndex('hasParent', 'yes')), ['child-listed']);

    // A periodic relist rebuilds the indexes from the new list: still the same answers.
    const relists = await counter(t.registry, 'informer_relists_total');
    await eventually(
      'a periodic relist',
      async () => (await counter(t.registry, 'informer_relists_total')) > relists,
    );
    assert.deepEqual(names(t.informer.byIndex('parent', p1)), ['child-listed']);
    assert.deepEqual(t.informer.byIndex('parent', p2), []);
    assert.ok(
      names(t.informer.list(namespace)).includes('child-listed'),
      'list(namespace) reads the namespace index',
    );
    assert.deepEqual(t.informer.list('another-namespace'), []);
    assert.throws(() => t.informer.byIndex('unknown', p1), /no index named unknown/);
    await t.informer.stop();
  });

  it('relists when the watch stays silent, and keeps delivering', async () => {
    // No object changes and no bookmark within 1 s (the API server sends bookmarks about once a minute).
    const t = recordingInformer(kc, namespace, { silentWatchTimeoutMs: 1_000 });
    informers.push(t.informer);
    t.informer.start();
    await t.informer.waitForSync();
    await eventually(
      'a relist after silence',
      async () => (await counter(t.registry, 'informer_relists_total')) >= 1,
    );
    await apply(configMap(namespace, 'after-silence', { b: '1' }));
    await eventually('add after the relist', () => t.has('add after-silence {"b":"1"}'));
    await t.informer.stop();
  });

  it('relists periodically and delivers every object again as an update (resync)', async () => {
    const t = recordingInformer(kc, namespace, { resyncPeriodMs: 300, resyncJitter: 0 });
    informers.push(t.informer);
    t.informer.start();
    await t.informer.waitForSync();
    await eventually('a resync update of before-start', () =>
      t.has('update before-start {"a":"0"}->{"a":"0"}'),
    );
    assert.ok((await counter(t.registry, 'informer_relists_total')) >= 1);
    assert.ok((await counter(t.registry, 'watch_restarts_total')) >= 1);
    await t.informer.stop();
  });

  it('advances a quiet watch through bookmarks, without relisting', async () => {
    const t = recordingInformer(kc, namespace, {
      labelSelector: 'app.kubernetes.io/part-of=nothing-matches',
    });
    informers.push(t.informer);
    t.informer.start();
    await t.informer.waitForSync();
    const listed = t.informer.lastResourceVersion();
    // Writes the watch does not select move the store's resourceVersion; only a bookmark can tell
    // the informer (the API server sends one about once a minute).
    await apply(configMap(namespace, 'unselected', { tick: String(Date.now()) }, false));
    await eventually(
      'a bookmark with a newer resourceVersion',
      () => t.informer.lastResourceVersion() !== listed || undefined,
      150_000,
    );
    assert.deepEqual(t.seen, []);
    assert.equal(await counter(t.registry, 'informer_relists_total'), 0);
    assert.equal(await counter(t.registry, 'watch_restarts_total'), 0);
    await t.informer.stop();
  });

  it('exposes the age of the last watch event', async () => {
    const t = recordingInformer(kc, namespace);
    informers.push(t.informer);
    t.informer.start();
    await t.informer.waitForSync();
    await eventually('the watch to connect', async () => {
      const text = await t.registry.metrics();
      return /^watch_last_event_age_seconds\{resource="configmaps"\} [0-9.e-]+$/m.test(text) || undefined;
    });
    await t.informer.stop();
  });
});

describe('informer across an API server restart', () => {
  it('keeps delivering after the API server is stopped and started again', async () => {
    const { startControlPlane } = (await import(
      localEnvEntry.href
    )) as typeof import('../../local-env/src/index.ts');
    // A control plane of our own: stopping the shared one would break every other test file.
    const controlPlane = await startControlPlane({ installCrds: false, controllerManager: false });
    const namespace = 'informer-restart';
    let informer: Informer<KubeObject> | undefined;
    try {
      const kc = loadKubeConfig(controlPlane.kubeconfigPath);
      const apply = (object: KubeObject) =>
        serverSideApply(kc, object, { fieldManager: 'shared-test', force: true });
      await createNamespace(kc, namespace);
      const recording = recordingInformer(kc, namespace);
      informer = recording.informer;
      informer.start();
      await informer.waitForSync();
      await apply(configMap(namespace, 'before-restart', { v: '1' }));
      await eventually('add before the restart', () => recording.has('add before-restart {"v":"1"}'));

      await controlPlane.stopApiServer();
      await eventually(
        'the broken watch to be noticed',
        async () => (await counter(recording.registry, 'watch_restarts_total')) >= 1,
      );
      await controlPlane.startApiServer();

      await apply(configMap(namespace, 'after-restart', { v: '1' }));
      await eventually('add after the restart', () => recording.has('add after-restart {"v":"1"}'), 120_000);
      await apply(configMap(namespace, 'before-restart', { v: '2' }));
      await eventually('update after the restart', () =>
        recording.has('update before-restart {"v":"1"}->{"v":"2"}'),
      );
      await deleteIfExists(kc, { apiVersion: 'v1', kind: 'ConfigMap', name: 'after-restart', namespace });
      await eventually('delete after the restart', () => recording.has('delete after-restart'));
      assert.ok(informer.hasSynced());
      assert.deepEqual(
        informer.list().map((object) => object.metadata.name),
        ['before-restart'],
      );
    } finally {
      await informer?.stop();
      await controlPlane.stop();
    }
  });
});
