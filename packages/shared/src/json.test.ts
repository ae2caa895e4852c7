import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { createMergePatch, jsonEqual, jsonField, jsonFingerprint, normalizeJson } from './json.ts';

describe('semantic JSON equality', () => {
  test('key order and undefined members do not matter; values do', () => {
    assert.ok(
      jsonEqual({ a: 1, b: { c: [1, 2], d: 'x' } }, { b: { d: 'x', c: [1, 2] }, a: 1, e: undefined }),
    );
    assert.ok(!jsonEqual({ a: [1, 2] }, { a: [2, 1] }));
    assert.ok(!jsonEqual({ a: 1 }, { a: '1' }));
    assert.ok(!jsonEqual({ a: { b: true } }, { a: { b: true, c: false } }));
  });

  test('a document parsed from jsonb equals the object it was written from', () => {
    const spec = { source: { repoURL: 'r', path: 'p', targetRevision: '' }, destination: { namespace: 'n' } };
    assert.ok(
      jsonEqual(JSON.parse(JSON.stringify({ destination: spec.destination, source: spec.source })), spec),
    );
  });

  test('normalizeJson drops undefined and null members', () => {
    assert.deepEqual(normalizeJson({ a: undefined, b: null, c: [null, 1], d: { e: null } }), {
      c: [null, 1],
      d: {},
    });
  });
});

describe('the member at a path', () => {
  test('found through objects; undefined where a step is missing, an array or a scalar', () => {
    const document = { status: { sync: { status: 'Synced' }, list: [{ a: 1 }], text: 'x' } };
    assert.equal(jsonField(document, 'status', 'sync', 'status'), 'Synced');
    assert.deepEqual(jsonField(document), document);
    assert.equal(jsonField(document, 'status', 'health', 'status'), undefined);
    assert.equal(jsonField(document, 'status', 'list', '0'), undefined);
    assert.equal(jsonField(document, 'status', 'text', 'length'), undefined);
    assert.equal(jsonField(null, 'status'), undefined);
  });
});

describe('JSON fingerprints', () => {
  test('two documents share a fingerprint exactly when jsonEqual finds them equal', () => {
    const pairs: [unknown, unknown][] = [
      [
        { a: 1, b: [{ c: 2, d: 3 }] },
        { b: [{ d: 3, c: 2 }], a: 1 },
      ],
      [{ a: 1, gone: undefined, dropped: null }, { a: 1 }],
      [{ a: [1, 2] }, { a: [2, 1] }],
      [{ a: '1' }, { a: 1 }],
      [{ a: { b: {} } }, { a: {} }],
      [[], {}],
    ];
    for (const [x, y] of pairs) {
      assert.equal(jsonFingerprint(x) === jsonFingerprint(y), jsonEqual(x, y), JSON.stringify([x, y]));
    }
    assert.equal(jsonFingerprint({ b: 1, a: 2 }), '{"a":2,"b":1}');
  });
});

describe('merge patch between two documents', () => {
  test('equal documents need no patch', () => {
    assert.equal(createMergePatch({ a: { b: 1 } }, { a: { b: 1 } }), undefined);
  });

  test('changed members are set, removed ones nulled, nested objects patched member by member, arrays replaced', () => {
    assert.deepEqual(
      createMergePatch(
        {
          sync: { status: 'OutOfSync', revision: 'a' },
          operationState: { phase: 'Running', message: 'm' },
          resources: [1, 2],
          health: { status: 'x' },
        },
        { sync: { status: 'Synced', revision: 'a' }, operationState: { phase: 'Succeeded' }, resources: [1] },
      ),
      {
        sync: { status: 'Synced' },
        operationState: { phase: 'Succeeded', message: null },
        resources: [1],
        health: null,
      },
    );
  });
});
