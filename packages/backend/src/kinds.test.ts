import assert from 'node:assert/strict';
import { type KubeObject, passesCreate, passesDelete, passesUpdate } from '@gitops/shared';
import { describe, it } from 'vitest';
import { GitOpsDeploymentCr, ManagedEnvironmentCr, RepositoryCredentialCr, SyncRunCr } from './kinds.ts';
import { parentChanged } from './sync-run/sync-run.watches.ts';

const kinds = [GitOpsDeploymentCr, SyncRunCr, ManagedEnvironmentCr, RepositoryCredentialCr];

const before: KubeObject = {
  metadata: {
    name: 'x',
    namespace: 'ns',
    uid: 'u1',
    generation: 1,
    resourceVersion: '10',
    labels: { team: 'a' },
    finalizers: ['f'],
  },
  spec: { a: 1 },
  status: { conditions: [] },
};

/** `before` at the next resourceVersion with `change` applied to its metadata and top-level fields. */
function after(
  change: { metadata?: Partial<KubeObject['metadata']>; [field: string]: unknown } = {},
): KubeObject {
  const { metadata, ...rest } = change;
  return { ...before, ...rest, metadata: { ...before.metadata, resourceVersion: '11', ...metadata } };
}

describe('which updates wake a backend CR controller', () => {
  it('every kind: a relist, a new incarnation, a generation or spec change and a started deletion wake it', () => {
    for (const kind of kinds) {
      assert.equal(passesUpdate([kind.predicate], before, before), true, `${kind.kind} relist`);
      assert.equal(
        passesUpdate([kind.predicate], before, after({ metadata: { uid: 'u2' } })),
        true,
        kind.kind,
      );
      assert.equal(
        passesUpdate([kind.predicate], before, after({ metadata: { generation: 2 } })),
        true,
        kind.kind,
      );
      assert.equal(passesUpdate([kind.predicate], before, after({ spec: { a: 2 } })), true, kind.kind);
      const deleting = after({ metadata: { deletionTimestamp: '2026-11-26T00:00:00Z' } });
      assert.equal(passesUpdate([kind.predicate], before, deleting), true, kind.kind);
      assert.equal(passesCreate([kind.predicate], before), true, kind.kind);
      assert.equal(passesDelete([kind.predicate], before), true, kind.kind);
    }
  });

  it('every kind: a status write (ours or anyone’s) or an annotation does not wake it', () => {
    for (const kind of kinds) {
      const statusWrite = after({ status: { conditions: [{ type: 'ErrorOccurred', status: 'True' }] } });
      assert.equal(passesUpdate([kind.predicate], before, statusWrite), false, kind.kind);
      const annotated = after({ metadata: { annotations: { note: 'x' } } });
      assert.equal(passesUpdate([kind.predicate], before, annotated), false, kind.kind);
    }
  });

  it('labels (the shard) wake GitOpsDeployment and ManagedEnvironment only; finalizers GitOpsDeployment only', () => {
    const relabelled = after({ metadata: { labels: { team: 'b' } } });
    const refinalized = after({ metadata: { finalizers: [] } });
    const wakes = (kind: (typeof kinds)[number], next: KubeObject) =>
      passesUpdate([kind.predicate], before, next);
    assert.deepEqual(
      kinds.map((kind) => [kind.kind, wakes(kind, relabelled), wakes(kind, refinalized)]),
      [
        ['GitOpsDeployment', true, true],
        ['GitOpsDeploymentSyncRun', false, false],
        ['GitOpsDeploymentManagedEnvironment', true, false],
        ['GitOpsDeploymentRepositoryCredential', false, false],
      ],
    );
  });
});

describe('which GitOpsDeployment events wake the SyncRuns referencing it', () => {
  it('its creation, a new generation or incarnation; not a status write, a relist or its deletion', () => {
    assert.equal(passesCreate([parentChanged], before), true);
    assert.equal(passesUpdate([parentChanged], before, after({ metadata: { generation: 2 } })), true);
    assert.equal(passesUpdate([parentChanged], before, after({ metadata: { uid: 'u2' } })), true);
    assert.equal(passesUpdate([parentChanged], before, after({ status: { health: 'Healthy' } })), false);
    assert.equal(passesUpdate([parentChanged], before, before), false);
    assert.equal(passesDelete([parentChanged], before), false);
  });
});

describe("the parser of each kind (the informer's and a live read's)", () => {
  it("types a well-formed object, giving it the kind's apiVersion and kind", () => {
    for (const kind of kinds) {
      const object = kind.parse({ metadata: { name: 'x', namespace: 'ns' }, spec: {} });
      assert.equal(object.apiVersion, kind.apiVersion);
      assert.equal(object.kind, kind.kind);
      assert.equal(object.metadata.name, 'x');
    }
  });

  it('refuses a malformed object (never a crash: the informer leaves it out, a live read is an error)', () => {
    const malformed = [
      null,
      [],
      'text',
      { metadata: {} },
      { metadata: { name: 'x' } },
      { metadata: { name: 'x' }, spec: 'text' },
      { metadata: { name: 'x' }, spec: [] },
      { metadata: { name: 'x' }, spec: {}, status: 1 },
    ];
    for (const kind of kinds) {
      for (const raw of malformed) assert.throws(() => kind.parse(raw), JSON.stringify(raw));
    }
  });
});
