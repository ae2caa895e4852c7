import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Label } from '@gitops/api';
import { gitOpsDeployment, managedEnvironment } from '@gitops/api/testing';
import {
  deleteIfExists,
  type KubeConfig,
  type KubeObject,
  loadKubeConfig,
  serverSideApply,
} from '@gitops/shared';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { BACKEND_SHARD_LABEL, shardSelector } from './config.ts';
import { GitOpsDeploymentCr, ManagedEnvironmentCr } from './kinds.ts';
import { currentObjectReader, readTenantNamespace } from './kube-reads.ts';
import { parseLabelSelector } from './label-selector.ts';

describe("the shard rule of the reconcilers' reads, against the API server", () => {
  let kc: KubeConfig;
  const suffix = randomBytes(4).toString('hex');
  const namespace = `kube-reads-${suffix}`;
  const ours = `ours-${suffix}`;
  const selector = parseLabelSelector(shardSelector(ours));
  /** This shard's cache, empty: every read below is the live read a lagging cache leads to. */
  const emptyCache = { get: () => undefined };
  const signal = new AbortController().signal;
  const apply = (object: object) =>
    serverSideApply(kc, object as KubeObject, { fieldManager: 'kube-reads-test', force: true });
  const shard = (name: string) => ({ namespace, labels: { [BACKEND_SHARD_LABEL]: name } });

  beforeAll(async () => {
    kc = loadKubeConfig(process.env.KUBECONFIG);
    await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    const spec = { source: { repoURL: 'https://github.com/org/repo', path: 'p' }, type: 'manual' } as const;
    await apply(gitOpsDeployment('ours', spec, shard(ours)));
    await apply(gitOpsDeployment('theirs', spec, shard(`theirs-${suffix}`)));
    const environment = { apiURL: 'https://cluster.example.com:6443', credentialsSecret: 'creds' };
    await apply(managedEnvironment('ours', environment, shard(ours)));
    await apply(managedEnvironment('theirs', environment, shard(`theirs-${suffix}`)));
  });
  afterAll(async () => {
    if (kc) await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
  });

  test("another shard's GitOpsDeployment reads as null (left alone); ours as itself", async () => {
    const read = currentObjectReader(kc, emptyCache, GitOpsDeploymentCr, selector);
    assert.equal((await read(namespace, 'ours', signal))?.metadata.name, 'ours');
    assert.equal(await read(namespace, 'theirs', signal), null);
    assert.equal(await read(namespace, 'missing', signal), undefined);
  });

  test("another shard's ManagedEnvironment reads as null (left alone), a missing one as absent", async () => {
    const read = currentObjectReader(kc, emptyCache, ManagedEnvironmentCr, selector);
    assert.equal((await read(namespace, 'ours', signal))?.metadata.name, 'ours');
    assert.equal(await read(namespace, 'theirs', signal), null);
    assert.equal(await read(namespace, 'missing', signal), undefined);
  });

  test("a tenant's namespace read from the API server's cache is the one etcd holds; a missing one is an error", async () => {
    const labelled = `${namespace}-labelled`;
    await apply({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: labelled, labels: { [Label.EngineInstance]: 'argocd-b' } },
    });
    try {
      for (const name of [namespace, labelled]) {
        const fromEtcd = await readTenantNamespace(kc, name, signal);
        assert.deepEqual(await readTenantNamespace(kc, name, signal, { fromCache: true }), fromEtcd);
      }
      assert.equal(
        (await readTenantNamespace(kc, labelled, signal, { fromCache: true })).engineInstance,
        'argocd-b',
      );
      await assert.rejects(
        readTenantNamespace(kc, `${namespace}-missing`, signal, { fromCache: true }),
        /not ?found/i,
      );
    } finally {
      await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name: labelled });
    }
  });
});
