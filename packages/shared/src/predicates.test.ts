import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import type { KubeObject } from './kube.ts';
import {
  allOf,
  annotationsChanged,
  anyOf,
  createOwnWrites,
  createSettledVersions,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  ignoreCreates,
  ignoreDeletes,
  ignoreUpdates,
  labelsChanged,
  not,
  passesCreate,
  passesDelete,
  passesUpdate,
  relist,
  resourceVersionChanged,
  specChanged,
  statusFieldsChanged,
  uidChanged,
} from './predicates.ts';

function object(rv: string, metadata: Partial<KubeObject['metadata']> = {}, spec?: unknown): KubeObject {
  return {
    metadata: { name: 'a', namespace: 'ns', uid: 'u1', generation: 1, resourceVersion: rv, ...metadata },
    ...(spec === undefined ? {} : { spec }),
  };
}

describe('named predicates', () => {
  it('relist passes only an update at the same resourceVersion; resourceVersionChanged is its opposite', () => {
    assert.equal(passesUpdate([relist], object('5'), object('5')), true);
    assert.equal(passesUpdate([relist], object('5'), object('6')), false);
    assert.equal(passesUpdate([resourceVersionChanged], object('5'), object('5')), false);
    assert.equal(passesUpdate([resourceVersionChanged], object('5'), object('6')), true);
  });

  it('generation, uid and deletion compare their metadata field', () => {
    assert.equal(passesUpdate([generationChanged], object('1'), object('2', { generation: 2 })), true);
    assert.equal(passesUpdate([generationChanged], object('1'), object('2')), false);
    assert.equal(passesUpdate([uidChanged], object('1'), object('2', { uid: 'u2' })), true);
    assert.equal(passesUpdate([uidChanged], object('1'), object('2')), false);
    const deleting = object('2', { deletionTimestamp: '2026-11-26T00:00:00Z' });
    assert.equal(passesUpdate([deletionStarted], object('1'), deleting), true);
    assert.equal(
      passesUpdate([deletionStarted], deleting, {
        ...deleting,
        metadata: { ...deleting.metadata, resourceVersion: '3' },
      }),
      false,
    );
  });

  it('labels, annotations, finalizers and spec compare as JSON (key order does not matter)', () => {
    const before = object(
      '1',
      { labels: { a: '1', b: '2' }, annotations: { x: 'y' }, finalizers: ['f'] },
      { p: 1, q: 2 },
    );
    const reordered = object(
      '2',
      { labels: { b: '2', a: '1' }, annotations: { x: 'y' }, finalizers: ['f'] },
      { q: 2, p: 1 },
    );
    for (const predicate of [labelsChanged, annotationsChanged, finalizersChanged, specChanged]) {
      assert.equal(passesUpdate([predicate], before, reordered), false, predicate.name);
    }
    assert.equal(passesUpdate([labelsChanged], before, object('2', { labels: { a: '1' } })), true);
    assert.equal(passesUpdate([annotationsChanged], before, object('2', { annotations: {} })), true);
    assert.equal(passesUpdate([finalizersChanged], before, object('2', { finalizers: [] })), true);
    assert.equal(passesUpdate([specChanged], before, object('2', {}, { p: 1, q: 3 })), true);
  });

  it('statusFieldsChanged compares only the named status fields, as JSON', () => {
    const withStatus = (rv: string, status: unknown): KubeObject => ({ ...object(rv), status });
    const components = statusFieldsChanged('components', 'gitopsRepoConditions');
    assert.equal(components.name, 'status components, gitopsRepoConditions changed');
    const before = withStatus('1', { components: [{ name: 'a' }], gitopsDeployments: [] });
    // Another status field (a controller's own write) changed: no wake-up.
    assert.equal(passesUpdate([components], before, withStatus('2', { components: [{ name: 'a' }] })), false);
    assert.equal(passesUpdate([components], before, withStatus('2', { components: [{ name: 'b' }] })), true);
    assert.equal(
      passesUpdate([components], object('1'), withStatus('2', { gitopsRepoConditions: [] })),
      true,
    );
    assert.equal(passesUpdate([components], object('1'), object('2')), false);
  });

  it('ignoreCreates, ignoreUpdates and ignoreDeletes drop their event only', () => {
    assert.equal(passesCreate([ignoreCreates], object('1')), false);
    assert.equal(passesUpdate([ignoreCreates], object('1'), object('2')), true);
    assert.equal(passesUpdate([ignoreUpdates], object('1'), object('2')), false);
    assert.equal(passesCreate([ignoreUpdates], object('1')), true);
    assert.equal(passesDelete([ignoreUpdates], object('1')), true);
    assert.equal(passesDelete([ignoreDeletes], object('1')), false);
  });

  it('update-only predicates say nothing about creates and deletes: they pass', () => {
    for (const predicate of [relist, generationChanged, not(generationChanged), labelsChanged]) {
      assert.equal(passesCreate([predicate], object('1')), true, predicate.name);
      assert.equal(passesDelete([predicate], object('1')), true, predicate.name);
    }
  });
});

describe('combining predicates', () => {
  const spec = anyOf(relist, generationChanged, deletionStarted);

  it('anyOf passes an update one of its parts passes, and is named after them', () => {
    assert.equal(spec.name, 'relist or generation changed or deletion started');
    assert.equal(passesUpdate([spec], object('1'), object('1')), true);
    assert.equal(passesUpdate([spec], object('1'), object('2', { generation: 2 })), true);
    // A status write: new resourceVersion, same generation, no deletion.
    assert.equal(passesUpdate([spec], object('1'), object('2')), false);
  });

  it('allOf passes only what each part passes; not inverts only the events its predicate speaks about', () => {
    const realChange = allOf(not(relist), generationChanged);
    assert.equal(passesUpdate([realChange], object('1'), object('1', { generation: 2 })), false);
    assert.equal(passesUpdate([realChange], object('1'), object('2', { generation: 2 })), true);
    assert.equal(passesUpdate([realChange], object('1'), object('2')), false);
    assert.equal(passesCreate([realChange], object('1')), true);
    const noCreates = { name: 'no creates', create: () => false };
    assert.equal(passesCreate([not(noCreates)], object('1')), true);
    assert.equal(passesCreate([anyOf(noCreates, generationChanged)], object('1')), false);
  });
});

describe('own writes', () => {
  /** A write of ns/a that the API server answers with version `version`. */
  const write = (own: ReturnType<typeof createOwnWrites>, version: string, during: () => void = () => {}) => {
    own.begin('ns/a');
    during();
    return own.end('ns/a', object(version));
  };

  it('drops the echo of a write arriving after its answer, once; later versions, relists and creates pass', () => {
    const own = createOwnWrites();
    assert.equal(write(own, '7'), false);
    assert.equal(own.size(), 1);
    // A relist in between neither passes for the echo nor consumes the record.
    assert.equal(passesUpdate([own.predicate], object('6'), object('6')), true);
    assert.equal(passesUpdate([own.predicate], object('6'), object('7')), false);
    assert.equal(own.size(), 0);
    assert.equal(passesUpdate([own.predicate], object('7'), object('8')), true);
    assert.equal(passesCreate([own.predicate], object('9')), true);
  });

  /** A write answered with `version`, during which the watch delivers `from → to`. */
  const writeDuring = (
    own: ReturnType<typeof createOwnWrites>,
    version: string,
    from: string,
    to: string,
  ) => {
    let passed: boolean | undefined;
    const changedMeanwhile = write(own, version, () => {
      passed = passesUpdate([own.predicate], object(from), object(to));
    });
    return { passed, changedMeanwhile };
  };

  it('drops the echo arriving before the answer, and expects no second one', () => {
    const own = createOwnWrites();
    assert.deepEqual(writeDuring(own, '7', '6', '7'), { passed: false, changedMeanwhile: false });
    assert.equal(own.size(), 0);
    assert.equal(passesUpdate([own.predicate], object('7'), object('8')), true);
  });

  it("holds back another writer's version during the write, and says so at its end", () => {
    const own = createOwnWrites();
    assert.deepEqual(writeDuring(own, '8', '6', '7'), { passed: false, changedMeanwhile: true });
    // Our echo is still to come, and is dropped.
    assert.equal(passesUpdate([own.predicate], object('7'), object('8')), false);
  });

  it("another writer's version after ours passes and forgets our record; a failed write holds nothing", () => {
    const own = createOwnWrites();
    write(own, '7');
    assert.equal(passesUpdate([own.predicate], object('6'), object('9')), true);
    assert.equal(own.size(), 0);
    own.begin('ns/a');
    assert.equal(own.end('ns/a', undefined), false);
    assert.equal(own.size(), 0);
  });

  it('a delete forgets the object', () => {
    const own = createOwnWrites();
    write(own, '7');
    assert.equal(passesDelete([own.predicate], object('7')), true);
    assert.equal(own.size(), 0);
  });

  it('drops the create that delivers exactly the object our write created, once', () => {
    const own = createOwnWrites();
    write(own, '7');
    assert.equal(passesCreate([own.predicate], object('7')), false);
    assert.equal(own.size(), 0);
    // Deleted and created again by someone else: that create passes.
    assert.equal(passesDelete([own.predicate], object('7')), true);
    assert.equal(passesCreate([own.predicate], object('9')), true);
  });

  it('a create of another version after our write passes and forgets our record', () => {
    const own = createOwnWrites();
    write(own, '7');
    assert.equal(passesCreate([own.predicate], object('8')), true);
    assert.equal(own.size(), 0);
    assert.equal(passesUpdate([own.predicate], object('8'), object('7')), true);
  });

  it('holds back a create during the write: our own is dropped, another one is reported by end', () => {
    const own = createOwnWrites();
    let passed: boolean | undefined;
    // The watch delivers the created object before the write's answer.
    assert.equal(
      write(own, '7', () => {
        passed = passesCreate([own.predicate], object('7'));
      }),
      false,
    );
    assert.equal(passed, false);
    assert.equal(own.size(), 0);
    // Another writer created it just before our write (which then updated it to 8).
    assert.equal(
      write(own, '8', () => {
        passed = passesCreate([own.predicate], object('6'));
      }),
      true,
    );
    assert.equal(passed, false);
    assert.equal(passesUpdate([own.predicate], object('6'), object('8')), false);
  });

  it('end without the written object registers no echo and reports every held version, ours included', () => {
    const own = createOwnWrites();
    own.begin('ns/a');
    assert.equal(passesCreate([own.predicate], object('7')), false);
    assert.equal(own.end('ns/a', undefined), true);
    assert.equal(own.size(), 0);
    assert.equal(passesUpdate([own.predicate], object('7'), object('8')), true);
  });
});

describe('settled versions', () => {
  it('drops a relist of an object settled at its version; a change or an unsettled relist passes', () => {
    let cached = object('4');
    const settled = createSettledVersions({ get: () => cached });
    assert.equal(passesUpdate([settled.predicate], cached, cached), true);
    settled.settle('ns/a', settled.begin('ns/a'));
    assert.equal(passesUpdate([settled.predicate], cached, cached), false);
    const next = object('5');
    assert.equal(passesUpdate([settled.predicate], cached, next), true);
    cached = next;
    assert.equal(passesUpdate([settled.predicate], cached, cached), true);
    // begin() forgets the settlement: a reconcile that then fails leaves the next relist through.
    settled.settle('ns/a', settled.begin('ns/a'));
    settled.begin('ns/a');
    assert.equal(passesUpdate([settled.predicate], cached, cached), true);
  });
});

describe('stateful predicates in a list', () => {
  it('see every event even when an earlier predicate said no', () => {
    const own = createOwnWrites();
    own.begin('ns/a');
    own.end('ns/a', object('7'));
    // ignoreDeletes first: the delete is dropped, and own writes still forgets the key.
    assert.equal(passesDelete([ignoreDeletes, own.predicate], object('7')), false);
    assert.equal(own.size(), 0);
    own.begin('ns/a');
    own.end('ns/a', object('9'));
    assert.equal(passesUpdate([generationChanged, own.predicate], object('8'), object('9')), false);
    assert.equal(own.size(), 0);
  });
});
