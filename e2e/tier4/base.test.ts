/**
 * Tier 4: `manifests/base` alone is the core service, and it installs and runs on a cluster that has Argo CD's
 * CRDs and nothing else (issue 32): no App Studio CRDs (components/appstudio adds them and turns the backend's
 * App Studio controllers on), no Prometheus Operator (components/monitoring holds the ServiceMonitor). Its own
 * cluster, started with only Argo CD's Application and AppProject CRDs; base with components/local-node (the
 * local image, never pulled, the API server on the node network's gateway: what the local node needs, nothing
 * else); both Deployments Available; a user's GitOpsDeployment deployed through a real Argo CD.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { loadCrds } from '@gitops/api';
import { createGitRepo, type GitRepo, manifest, repoRoot } from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { isTrue, SERVICE_NS, type ServiceCluster, startServiceCluster } from './service-cluster.ts';

const IMAGE = 'gitops-service:local';
const CONVERGE_MS = 300_000;
const ARGOCD_CRDS = ['applications.argoproj.io', 'appprojects.argoproj.io'];

const log = (line: string) => {
  if (process.env.E2E_VERBOSE) process.stderr.write(`[tier4-base] ${line}\n`);
};

describe("tier 4: manifests/base alone on a cluster with only Argo CD's CRDs", () => {
  let env: ServiceCluster;
  let repo: GitRepo;
  /** The CRDs the cluster served before base was applied. */
  let crdsBefore: string[];

  const crdNames = async () =>
    (await env.items('customresourcedefinitions')).map((crd) => crd.metadata.name).sort();

  beforeAll(async () => {
    env = await startServiceCluster({ images: [IMAGE], name: 'tier4-base', log, crds: 'argocd' });
    crdsBefore = await crdNames();
    // base and the local node's settings, nothing else: the kustomization an operator of this node would write.
    const dir = join(env.workDir, 'base-install');
    await mkdir(dir);
    await writeFile(
      join(dir, 'kustomization.yaml'),
      JSON.stringify({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        resources: [relative(dir, join(repoRoot, 'manifests/base'))],
        components: [relative(dir, join(repoRoot, 'manifests/components/local-node'))],
      }),
    );
    await env.applyKustomization(dir);
    repo = await createGitRepo(join(env.workDir, 'git'), 'core', {
      'app/config.yaml': manifest.configMap('core-config', { from: 'manifests/base' }),
    });
  });

  afterAll(async () => {
    await env?.stop();
  });

  it('the cluster had only Argo CD CRDs; base adds the managed-gitops.redhat.com ones and no other', async () => {
    assert.deepEqual(crdsBefore, [...ARGOCD_CRDS].sort());
    const ours = (await loadCrds()).map((crd) => crd.metadata.name);
    assert.ok(ours.length > 0 && ours.every((name) => name.endsWith('.managed-gitops.redhat.com')));
    assert.deepEqual(await crdNames(), [...ARGOCD_CRDS, ...ours].sort());
  });

  it('the backend (App Studio off) and the cluster-agent become Available with their two replicas', async () => {
    const available = async (name: string) =>
      isTrue(await env.getJson('deployment', '-n', SERVICE_NS, name), 'Available');
    await eventually(
      'gitops-backend and gitops-cluster-agent Available',
      async () => (await available('gitops-backend')) && (await available('gitops-cluster-agent')),
      CONVERGE_MS,
    );
    const backends = await env.readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-backend');
    assert.equal(backends.length, 2);
    for (const pod of backends) {
      const container = (pod.spec as { containers: { env?: { name: string; value?: string }[] }[] })
        .containers[0];
      assert.equal(container?.env?.find((e) => e.name === 'GITOPS_APPSTUDIO')?.value, 'false');
    }
    assert.equal((await env.readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-cluster-agent')).length, 2);
    assert.equal(await env.activeAgents(), 1, 'one active agent, one standby');
  });

  it("a user's GitOpsDeployment ends Synced/Healthy and its ConfigMap is in the user's namespace", async () => {
    const tenant = `tenant-${randomBytes(3).toString('hex')}`;
    await env.kubectl('create', 'namespace', tenant);
    const file = join(env.workDir, 'gitopsdeployment.json');
    await writeFile(
      file,
      JSON.stringify({
        apiVersion: 'managed-gitops.redhat.com/v1alpha1',
        kind: 'GitOpsDeployment',
        metadata: { name: 'core', namespace: tenant },
        spec: { source: { repoURL: repo.fileUrl, path: 'app' }, type: 'automated' },
      }),
    );
    await env.kubectl('apply', '-f', file);
    await eventually(
      'GitOpsDeployment core Synced/Healthy',
      async () => {
        const item = await env.getJson('gitopsdeployment', '-n', tenant, 'core');
        return item.status?.sync?.status === 'Synced' && item.status?.health?.status === 'Healthy';
      },
      CONVERGE_MS,
    );
    const config = await env.getJson('configmap', '-n', tenant, 'core-config');
    assert.deepEqual(config.data, { from: 'manifests/base' });
  });
});
