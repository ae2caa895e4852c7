import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { compareOwnedFields, containsDeclared, undeclaredOwnedPatch } from './owned-fields.ts';

const desired = {
  metadata: { name: 'a', labels: { mine: '1' }, finalizers: ['f'] },
  spec: { project: 'p', source: { repoURL: 'r', path: 'x' } },
};

describe('compareOwnedFields', () => {
  it('ignores fields we do not own (status, operation, other labels)', () => {
    const live = {
      metadata: { name: 'a', labels: { mine: '1', theirs: '2' }, finalizers: ['f', 'g'] },
      spec: { project: 'p', source: { repoURL: 'r', path: 'x' } },
      status: { sync: { status: 'Synced' } },
      operation: { sync: {} },
    };
    assert.deepEqual(compareOwnedFields(live, desired, ['syncPolicy']), {
      drifted: false,
      unexpectedSpecFields: [],
    });
  });

  it('sees a changed or missing owned field', () => {
    const edited = {
      metadata: desired.metadata,
      spec: { project: 'p', source: { repoURL: 'r', path: 'y' } },
    };
    assert.equal(compareOwnedFields(edited, desired, []).drifted, true);
    assert.equal(compareOwnedFields(undefined, desired, []).drifted, true);
    const noFinalizer = { metadata: { name: 'a', labels: { mine: '1' } }, spec: desired.spec };
    assert.equal(compareOwnedFields(noFinalizer, desired, []).drifted, true);
  });

  it('reports owned spec fields set on the live object that we do not declare', () => {
    const live = { metadata: desired.metadata, spec: { ...desired.spec, syncPolicy: { automated: {} } } };
    assert.deepEqual(compareOwnedFields(live, desired, ['syncPolicy']), {
      drifted: true,
      unexpectedSpecFields: ['syncPolicy'],
    });
  });

  it('owned fields may be nested: a Helm section the row no longer has is unexpected, and its removal nests', () => {
    const live = {
      metadata: desired.metadata,
      spec: { ...desired.spec, source: { ...desired.spec.source, helm: { values: 'a: 1' } } },
    };
    assert.deepEqual(compareOwnedFields(live, desired, ['syncPolicy', 'source.helm', 'source.kustomize']), {
      drifted: true,
      unexpectedSpecFields: ['source.helm'],
    });
    assert.deepEqual(
      undeclaredOwnedPatch(
        {
          ...live.spec,
          syncPolicy: { automated: {} },
          source: { ...live.spec.source, targetRevision: 'v1' },
        },
        desired.spec,
        ['syncPolicy', 'source.helm', 'source.targetRevision'],
      ),
      { syncPolicy: null, source: { helm: null, targetRevision: null } },
    );
  });

  it('a source the row replaced (a path by a chart, a source by sources) is drift, and its removal is the whole field', () => {
    const owned = ['source', 'sources', 'source.helm'];
    const chart = {
      metadata: desired.metadata,
      spec: { project: 'p', source: { repoURL: 'https://charts.example.com', chart: 'web' } },
    };
    const livePath = {
      metadata: desired.metadata,
      spec: { project: 'p', source: { repoURL: 'https://charts.example.com', path: 'web' } },
    };
    assert.equal(compareOwnedFields(livePath, chart, owned).drifted, true);
    assert.equal(compareOwnedFields(chart, chart, owned).drifted, false);
    const sources = {
      metadata: desired.metadata,
      spec: { project: 'p', sources: [{ repoURL: 'r', path: 'x' }] },
    };
    const liveSource = {
      metadata: desired.metadata,
      spec: { project: 'p', source: { repoURL: 'r', path: 'x', helm: { values: 'a: 1' } } },
    };
    const comparison = compareOwnedFields(liveSource, sources, owned);
    assert.deepEqual(comparison, { drifted: true, unexpectedSpecFields: ['source', 'source.helm'] });
    assert.deepEqual(undeclaredOwnedPatch(liveSource.spec, sources.spec, owned), { source: null });
  });

  it('an owned section is compared whole: a member the row dropped from a section it keeps is drift, other members are not', () => {
    const withHelm = (helm: Record<string, unknown>) => ({
      metadata: desired.metadata,
      spec: { ...desired.spec, source: { ...desired.spec.source, helm } },
    });
    const declared = withHelm({ releaseName: 'shop', parameters: [{ name: 'color', value: 'blue' }] });
    const owned = ['syncPolicy', 'source.helm'];
    // the user dropped valueFiles, and a parameter's forceString: both still live
    assert.deepEqual(
      compareOwnedFields(
        withHelm({ ...declared.spec.source.helm, valueFiles: ['gone.yaml'] }),
        declared,
        owned,
      ),
      { drifted: true, unexpectedSpecFields: [] },
    );
    assert.equal(
      compareOwnedFields(
        withHelm({ releaseName: 'shop', parameters: [{ name: 'color', value: 'blue', forceString: true }] }),
        declared,
        owned,
      ).drifted,
      true,
    );
    // the same section, in any key order: no drift
    assert.equal(
      compareOwnedFields(
        withHelm({ parameters: [{ value: 'blue', name: 'color' }], releaseName: 'shop' }),
        declared,
        owned,
      ).drifted,
      false,
    );
    // a section that is not owned keeps the subset rule (someone else's member of `source`)
    const otherMember = {
      ...declared,
      spec: { ...declared.spec, source: { ...declared.spec.source, chart: 'c' } },
    };
    assert.equal(compareOwnedFields(otherMember, declared, owned).drifted, false);
  });

  it('compares arrays element by element', () => {
    assert.equal(containsDeclared(['a', 'b'], ['a', 'b']), true);
    assert.equal(containsDeclared(['a', 'b', 'c'], ['a', 'b']), false);
    assert.equal(containsDeclared([{ name: 'x', extra: 1 }], [{ name: 'x' }]), true);
  });
});

describe('undeclaredOwnedPatch', () => {
  const owned = ['syncPolicy', 'source', 'source.helm'];
  const declared = {
    project: 'p',
    source: { repoURL: 'r', chart: 'web', helm: { valuesObject: { 'image.tag': 'v2', replicas: 2 } } },
    syncPolicy: { syncOptions: ['CreateNamespace=true'] },
  };

  it('removes members of a section we keep that the row dropped, at any depth (keys with dots included)', () => {
    const live = {
      ...declared,
      source: {
        ...declared.source,
        targetRevision: '1.2.0',
        helm: {
          valuesObject: { 'image.tag': 'v2', replicas: 2, debug: { on: true } },
          valueFiles: ['a.yaml'],
        },
      },
      syncPolicy: { ...declared.syncPolicy, automated: { prune: true } },
    };
    assert.deepEqual(undeclaredOwnedPatch(live, declared, owned), {
      source: { targetRevision: null, helm: { valuesObject: { debug: null }, valueFiles: null } },
      syncPolicy: { automated: null },
    });
  });

  it('leaves what is declared, arrays as they are (compared whole), and sections we do not own', () => {
    const live = {
      ...declared,
      destination: { name: 'in-cluster', server: 'https://kubernetes.default.svc' },
      syncPolicy: { syncOptions: ['Validate=false'] },
      source: { ...declared.source, helm: { ...declared.source.helm, parameters: null } },
    };
    assert.equal(undeclaredOwnedPatch(live, declared, owned), undefined);
    assert.equal(undeclaredOwnedPatch(declared, declared, owned), undefined);
  });
});
