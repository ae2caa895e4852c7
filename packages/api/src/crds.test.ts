import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { API_GROUP, API_VERSION, Kind, Kinds, loadCrds, Plural } from './index.ts';

/** The CRD of `kind`, and the printer columns `kubectl get` shows by default (name and JSON path). */
async function defaultColumnsOf(kind: Kind) {
  const crd = (await loadCrds()).find((c) => c.spec.names.kind === kind);
  const columns = crd?.spec.versions[0]?.additionalPrinterColumns?.filter((c) => !c.priority);
  return { crd, columns: columns?.map((c) => [c.name, c.jsonPath]) };
}

describe('the CRD files', () => {
  test('define exactly the six kinds, with the plural names the code uses', async () => {
    const crds = await loadCrds();
    const found = Object.fromEntries(crds.map((crd) => [crd.spec.names.kind, crd.spec.names.plural]));
    assert.deepEqual(found, Plural);
    assert.deepEqual(Object.keys(found).sort(), Object.values(Kind).sort());
  });

  test('are served and stored at v1alpha1 of managed-gitops.redhat.com, with a status subresource; namespaced, except GitOpsEngineInstance', async () => {
    for (const crd of await loadCrds()) {
      const kind = crd.spec.names.kind;
      assert.equal(crd.metadata.name, `${crd.spec.names.plural}.${API_GROUP}`, kind);
      assert.equal(crd.spec.group, API_GROUP, kind);
      assert.equal(crd.spec.scope, Kinds[kind as Kind].namespaced ? 'Namespaced' : 'Cluster', kind);
      assert.deepEqual(
        crd.spec.versions.map((v) => [v.name, v.served, v.storage]),
        [[API_VERSION, true, true]],
        kind,
      );
      assert.deepEqual(crd.spec.versions[0]?.subresources?.status, {}, kind);
    }
  });

  test('give every kind short names and an Age column for kubectl get', async () => {
    for (const crd of await loadCrds()) {
      const kind = crd.spec.names.kind;
      assert.ok((crd.spec.names.shortNames ?? []).length > 0, `${kind} has short names`);
      const columns = crd.spec.versions[0]?.additionalPrinterColumns?.map((c) => c.name) ?? [];
      assert.ok(columns.includes('Age'), `${kind} has an Age column`);
    }
  });

  test('show Sync and Health first for a GitOpsDeployment', async () => {
    const { columns } = await defaultColumnsOf(Kind.GitOpsDeployment);
    assert.deepEqual(columns, [
      ['Sync', '.status.sync.status'],
      ['Health', '.status.health.status'],
      ['Age', '.metadata.creationTimestamp'],
    ]);
  });

  test("show a GitOpsEngineInstance's namespace, cluster, agents, availability, load and cordon at a glance", async () => {
    const { crd, columns } = await defaultColumnsOf(Kind.GitOpsEngineInstance);
    assert.equal(crd?.spec.scope, 'Cluster');
    assert.deepEqual(columns, [
      ['Namespace', '.status.argoCDNamespace'],
      ['Cluster', '.status.cluster'],
      ['Agents', '.status.agents'],
      ['Available', '.status.conditions[?(@.type=="Available")].status'],
      ['Tenants', '.status.tenants'],
      ['Applications', '.status.applications'],
      ['Cordoned', '.status.cordoned'],
      ['Age', '.metadata.creationTimestamp'],
    ]);
  });
});
