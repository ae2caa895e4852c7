import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { controllerOwnerKeys, keysFromIndex, newController } from './builder.ts';
import { createCacheIndexes, namespacedIndexValue } from './informer-indexes.ts';
import { type KubeObject, objectKey } from './kube.ts';
import { createSilentLogger } from './logger.ts';
import { createMetricsRegistry } from './metrics.ts';
import { anyOf, generationChanged, relist } from './predicates.ts';
import { handInformer, recordingController as recording } from './testing/hand-informer.ts';

function obj(
  name: string,
  rv: string,
  extra: Partial<KubeObject> & { generation?: number } = {},
): KubeObject {
  const { generation = 1, metadata, ...rest } = extra;
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, generation, resourceVersion: rv, ...metadata },
    ...rest,
  };
}

const deps = () => ({
  registry: createMetricsRegistry({ defaultMetrics: false }),
  logger: createSilentLogger(),
});

describe('controller builder', () => {
  it('for(): creates and deletes wake the object; updates only when the predicates pass', async () => {
    const source = handInformer();
    const { controller, drain } = recording((reconcile) =>
      newController('things', deps())
        .for(source.informer, { predicates: [generationChanged] })
        .complete(reconcile),
    );
    const c = controller;
    c.start();
    source.put(obj('a', '1'));
    assert.deepEqual(await drain(), ['ns/a']);
    source.put(obj('a', '2', { status: { phase: 'x' } })); // a status write: same generation
    assert.deepEqual(await drain(), []);
    source.put(obj('a', '3', { generation: 2 }));
    assert.deepEqual(await drain(), ['ns/a']);
    source.remove(obj('a', '3', { generation: 2 }));
    assert.deepEqual(await drain(), ['ns/a']);
    await c.stop();
  });

  it('owns(): an object with a controller owner reference of the for() kind wakes its owner, others nobody', async () => {
    const owners = handInformer();
    const secrets = handInformer();
    const type = { apiVersion: 'rhoas.redhat.com/v1alpha1', kind: 'KafkaConnection' };
    const ref = (kind: string, controllerRef: boolean, apiVersion = type.apiVersion) => ({
      apiVersion,
      kind,
      name: 'kafka',
      uid: 'u',
      controller: controllerRef,
    });
    const secret = (name: string, refs: unknown[]) =>
      obj(name, '1', { metadata: { name, ownerReferences: refs } });
    assert.deepEqual(controllerOwnerKeys(type, secret('s1', [ref('KafkaConnection', true)])), ['ns/kafka']);
    assert.deepEqual(controllerOwnerKeys(type, secret('s2', [ref('KafkaConnection', false)])), []);
    assert.deepEqual(controllerOwnerKeys(type, secret('s3', [ref('ServiceRegistryConnection', true)])), []);
    assert.deepEqual(
      controllerOwnerKeys(type, secret('s4', [ref('KafkaConnection', true, 'other.io/v1')])),
      [],
    );
    assert.deepEqual(controllerOwnerKeys(type, secret('s5', [])), []);

    // Through the builder: the owned Secret's events reach the owner's key, and only through a controller ref.
    const reconciled: string[] = [];
    const watching = newController('owners-2', deps())
      .for(owners.informer, { type })
      .owns(secrets.informer)
      .complete(async (key) => {
        reconciled.push(key);
      });
    watching.start();
    secrets.put(secret('s1', [ref('KafkaConnection', true)]));
    secrets.put(secret('s2', [ref('KafkaConnection', false)]));
    await watching.queue.whenIdle();
    assert.deepEqual(reconciled, ['ns/kafka']);
    assert.throws(
      () => newController('untyped', deps()).for(owners.informer).owns(secrets.informer),
      /owns\(\) needs the type/,
    );
    await watching.stop();
  });

  it('watches() through an index wakes only the objects that reference the changed one', async () => {
    const syncRuns = handInformer();
    const deployments = handInformer();
    const PARENT = 'parent';
    syncRuns.informer.addIndexers({
      [PARENT]: (o) => {
        const parent = (o.spec as { parent?: string } | undefined)?.parent;
        return parent ? [namespacedIndexValue(o.metadata.namespace, parent)] : [];
      },
    });
    const { controller, drain } = recording((reconcile) =>
      newController('syncruns', deps())
        .for(syncRuns.informer)
        .watches(deployments.informer, keysFromIndex(syncRuns.informer, PARENT, objectKey), {
          predicates: [generationChanged],
        })
        .complete(reconcile),
    );
    const c = controller;
    syncRuns.put(obj('run-1', '1', { spec: { parent: 'web' } }));
    syncRuns.put(obj('run-2', '1', { spec: { parent: 'api' } }));
    syncRuns.put(obj('run-3', '1', { spec: { parent: 'web' } }));
    c.start();
    assert.deepEqual(await drain(), ['ns/run-1', 'ns/run-2', 'ns/run-3']);

    deployments.put(obj('web', '1'));
    assert.deepEqual(await drain(), ['ns/run-1', 'ns/run-3']);
    deployments.put(obj('web', '2')); // status only: the predicate drops it
    assert.deepEqual(await drain(), []);
    // run-3 now references api: the index follows, and web's next change wakes only run-1.
    syncRuns.put(obj('run-3', '2', { spec: { parent: 'api' }, generation: 1 }));
    await drain();
    deployments.put(obj('web', '3', { generation: 2 }));
    assert.deepEqual(await drain(), ['ns/run-1']);
    deployments.remove(obj('api', '1'));
    assert.deepEqual(await drain(), ['ns/run-2', 'ns/run-3']);
    await c.stop();
  });

  it('skipSettledOnRelist: a relist of a settled object is dropped, resync() still reconciles everything', async () => {
    const source = handInformer();
    const { controller, drain, answer } = recording((reconcile) =>
      newController('settled', deps())
        .for(source.informer, { skipSettledOnRelist: true })
        .complete(reconcile),
    );
    const c = controller;
    c.start();
    const a = obj('a', '1');
    source.put(a);
    assert.deepEqual(await drain(), ['ns/a']);
    source.put(a); // relist: same resourceVersion, settled
    assert.deepEqual(await drain(), []);
    c.resync();
    assert.deepEqual(await drain(), ['ns/a']);
    // A reconcile that asks to come back does not settle: the next relist reconciles.
    answer({ requeueAfter: 3_600_000 });
    source.put(obj('a', '2'));
    assert.deepEqual(await drain(), ['ns/a']);
    answer(undefined);
    source.put(obj('a', '2'));
    assert.deepEqual(await drain(), ['ns/a']);
    await c.stop();
  });

  it('skipSettledOnRelist: a change the predicates drop (a status write) leaves the object settled for the next relist', async () => {
    const source = handInformer();
    const { controller, drain } = recording((reconcile) =>
      newController('settled', deps())
        .for(source.informer, { skipSettledOnRelist: true, predicates: [anyOf(relist, generationChanged)] })
        .complete(reconcile),
    );
    controller.start();
    source.put(obj('a', '1'));
    assert.deepEqual(await drain(), ['ns/a']);
    source.put(obj('a', '2')); // status only: dropped
    assert.deepEqual(await drain(), []);
    source.put(obj('a', '2')); // the periodic relist at the new version: still settled
    assert.deepEqual(await drain(), []);
    source.put(obj('a', '3', { generation: 2 })); // a spec change wakes it
    assert.deepEqual(await drain(), ['ns/a']);
    await controller.stop();
  });

  it('lists each informer once, and after stop() no event reaches the queue', async () => {
    const source = handInformer();
    const other = handInformer();
    const controller = newController('feature', deps())
      .for(source.informer)
      .watches(other.informer, () => ['ns/a'])
      .reads(other.informer, source.informer)
      .withOptions({ concurrency: 2 })
      .complete(async () => undefined);
    assert.equal(controller.informers.length, 2);
    assert.equal(controller.name, 'feature');
    await controller.stop();
    source.put(obj('a', '1'));
    other.put(obj('b', '1'));
    assert.equal(controller.queue.len(), 0);
  });
});

describe('controller builder, forKeys()', () => {
  it('is woken by the keys its watches map events to (filtered by their predicates) and by enqueue', async () => {
    const applications = handInformer();
    const projects = handInformer();
    const idOf = (o: KubeObject) => o.metadata.labels?.id;
    const { controller, drain } = recording((reconcile) =>
      newController('resources', deps())
        .forKeys()
        .watches(applications.informer, (o) => (idOf(o) ? [`Application/${idOf(o)}`] : []), {
          predicates: [generationChanged],
        })
        .watches(projects.informer, (o) => (idOf(o) ? [`AppProject/${idOf(o)}`] : []))
        .complete(reconcile),
    );
    controller.start();
    applications.put(obj('a', '1', { metadata: { name: 'a', labels: { id: '1' } } }));
    projects.put(obj('p', '1', { metadata: { name: 'p', labels: { id: 't' } } }));
    applications.put(obj('unlabelled', '1'));
    assert.deepEqual(await drain(), ['AppProject/t', 'Application/1']);
    // A status write (same generation) is filtered out; a spec change is not.
    applications.put(obj('a', '2', { metadata: { name: 'a', labels: { id: '1' } }, status: { x: 1 } }));
    assert.deepEqual(await drain(), []);
    applications.put(obj('a', '3', { generation: 2, metadata: { name: 'a', labels: { id: '1' } } }));
    assert.deepEqual(await drain(), ['Application/1']);
    controller.enqueue('SyncOperation/9');
    assert.deepEqual(await drain(), ['SyncOperation/9']);
    assert.equal(controller.informers.length, 2);
    await controller.stop();
    projects.remove(obj('p', '1', { metadata: { name: 'p', labels: { id: 't' } } }));
    assert.equal(controller.queue.len(), 0);
  });
});

describe('cache indexes', () => {
  it('follow updates and deletes of an object, and are rebuilt from a relisted cache', () => {
    const indexes = createCacheIndexes<KubeObject>();
    const cache = new Map<string, KubeObject>([
      ['ns/x', obj('x', '1', { metadata: { name: 'x', labels: { team: 'a' } } })],
    ]);
    indexes.add({ team: (o) => (o.metadata.labels?.team ? [o.metadata.labels.team] : []) }, cache);
    assert.deepEqual(indexes.keys('team', 'a'), ['ns/x']);
    const moved = obj('x', '2', { metadata: { name: 'x', labels: { team: 'b' } } });
    indexes.update('ns/x', cache.get('ns/x'), moved);
    assert.deepEqual(indexes.keys('team', 'a'), []);
    assert.deepEqual(indexes.keys('team', 'b'), ['ns/x']);
    indexes.update('ns/x', moved, undefined);
    assert.deepEqual(indexes.keys('team', 'b'), []);
    indexes.rebuild(new Map([['ns/y', obj('y', '1', { metadata: { name: 'y', labels: { team: 'a' } } })]]));
    assert.deepEqual(indexes.keys('team', 'a'), ['ns/y']);
    assert.throws(() => indexes.keys('nope', 'a'), /no index named nope/);
    assert.throws(() => indexes.add({ team: () => [] }, cache), /already exists/);
  });
});
