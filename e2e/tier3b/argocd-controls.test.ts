/**
 * Tier 3b: Argo CD's controls on a GitOpsDeployment (issue 35, docs/api.md) with a real Argo CD: Kustomize
 * options, directory options, the automated policy's switches, ignoreDifferences, a sync option and the revision
 * history reach Argo CD and change what it deploys or how it compares, as they would on an Application.
 * (Helm: helm.test.ts.)
 */

import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import { HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import { type ArgoApplication, type GitOpsDeployment, get } from '../fixture/kube.ts';
import {
  CONVERGE_MS,
  type DeploymentStatus,
  gitSource,
  syncedAndHealthy,
  useRealSystem,
} from '../fixture/real-argo-cd.ts';

type Resource = NonNullable<DeploymentStatus['resources']>[number];
const resourceOf = (status: DeploymentStatus, name: string): Resource | undefined =>
  status.resources?.find((r) => r.name === name);
const synced = (status: DeploymentStatus) => status.sync?.status === 'Synced';

describe("tier 3b: Argo CD's controls on a GitOpsDeployment, with a real Argo CD", () => {
  const f = useRealSystem();

  /** Another manager (a controller, an autoscaler) changes a ConfigMap's data. */
  const changedByAnother = (namespace: string, name: string, data: Record<string, string>) =>
    kubeRequest(f.system.kc, {
      method: HttpMethod.PATCH,
      path: `/api/v1/namespaces/${namespace}/configmaps/${name}`,
      query: { fieldManager: 'another-controller' },
      body: { data },
      contentType: 'application/merge-patch+json',
    });
  const applicationOf = (gd: GitOpsDeployment) =>
    f.expect.readApplication<
      ArgoApplication & { spec: { revisionHistoryLimit?: number }; status?: { history?: unknown[] } }
    >(gd);

  it('Kustomize: images, a name prefix and common labels change what Argo CD deploys', async () => {
    const tenant = await f.given.tenant('ctl-kust');
    const repo = await f.given.repository('ctl-kust-app', {
      'base/kustomization.yaml': 'resources:\n  - settings.yaml\n  - web.yaml\n',
      'base/settings.yaml': manifest.configMap('settings', { mode: 'base' }),
      'base/web.yaml': [
        'apiVersion: apps/v1',
        'kind: Deployment',
        'metadata:',
        '  name: web',
        'spec:',
        '  replicas: 0',
        '  selector:',
        '    matchLabels: { app: web }',
        '  template:',
        '    metadata:',
        '      labels: { app: web }',
        '    spec:',
        '      containers:',
        '        - name: web',
        '          image: registry.example/web:1.0',
        '',
      ].join('\n'),
    });
    const gd = await f.when.deployed(tenant, 'kust', {
      ...gitSource(repo, 'base'),
      kustomize: {
        images: ['registry.example/web=registry.example/web:2.0'],
        namePrefix: 'prod-',
        commonLabels: { team: 'payments' },
      },
    });
    await f.expect.deployment(gd).is('Synced', synced);
    const settings = await f.expect.object(tenant, 'ConfigMap', 'prod-settings');
    assert.equal(settings.metadata.labels?.team, 'payments');
    const web = await eventually('Deployment prod-web', () =>
      get<KubeObject & { spec: { template: { spec: { containers: { image: string }[] } } } }>(
        f.system.kc,
        `/apis/apps/v1/namespaces/${tenant}/deployments/prod-web`,
      ),
    );
    assert.equal(web.spec.template.spec.containers[0]?.image, 'registry.example/web:2.0');
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'settings'), undefined);
  });

  it('directory: recurse into subfolders and exclude a file', async () => {
    const tenant = await f.given.tenant('ctl-dir');
    const repo = await f.given.repository('ctl-dir-app', {
      'dev/a.yaml': manifest.configMap('dir-a', { at: 'top' }),
      'dev/sub/b.yaml': manifest.configMap('dir-b', { at: 'sub' }),
      'dev/skip.yaml': manifest.configMap('dir-skip', { at: 'skipped' }),
    });
    const gd = await f.when.deployed(tenant, 'dir', {
      ...gitSource(repo, 'dev'),
      directory: { recurse: true, exclude: 'skip.yaml' },
    });
    const status = await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.deepEqual(status.resources?.map((r) => r.name).sort(), ['dir-a', 'dir-b']);
    assert.equal((await f.expect.object(tenant, 'ConfigMap', 'dir-b')).data?.at, 'sub');
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'dir-skip'), undefined);
  });

  it('automated without prune: a resource removed from Git stays, and the deployment says OutOfSync', async () => {
    const tenant = await f.given.tenant('ctl-prune');
    const repo = await f.given.repository('ctl-prune-app', {
      'dev/kept.yaml': manifest.configMap('prune-kept', { v: '1' }),
      'dev/removed.yaml': manifest.configMap('prune-removed', { v: '1' }),
    });
    const gd = await f.when.deployed(tenant, 'noprune', gitSource(repo, 'dev'), {
      syncPolicy: { automated: { prune: false } },
    });
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const sha = await repo.commit({
      'dev/removed.yaml': null,
      'dev/kept.yaml': manifest.configMap('prune-kept', { v: '2' }),
    });
    // Argo CD synced the new commit (the kept one changed) but did not prune the removed one.
    const status = await f.expect
      .deployment(gd)
      .is(
        'the new commit synced, the removed resource OutOfSync',
        (s) => s.sync?.revision === sha && resourceOf(s, 'prune-removed')?.status === 'OutOfSync',
      );
    assert.equal(status.sync?.status, 'OutOfSync');
    assert.equal(
      (await f.expect.object(tenant, 'ConfigMap', 'prune-kept', (c) => c.data?.v === '2')).data?.v,
      '2',
    );
    assert.ok(
      await f.expect.readObject(tenant, 'ConfigMap', 'prune-removed'),
      'the removed resource was pruned',
    );
  });

  it('automated without selfHeal: a live change stays OutOfSync; with selfHeal (the default) it is undone', async () => {
    const tenant = await f.given.tenant('ctl-heal');
    const repo = await f.given.repository('ctl-heal-app', {
      'manual-heal/cm.yaml': manifest.configMap('heal-off', { v: 'git' }),
      'auto-heal/cm.yaml': manifest.configMap('heal-on', { v: 'git' }),
    });
    const off = await f.when.deployed(tenant, 'heal-off', gitSource(repo, 'manual-heal'), {
      syncPolicy: { automated: { selfHeal: false } },
    });
    const on = await f.when.deployed(tenant, 'heal-on', gitSource(repo, 'auto-heal'));
    await f.expect.deployment(off).is('Synced/Healthy', syncedAndHealthy);
    await f.expect.deployment(on).is('Synced/Healthy', syncedAndHealthy);
    await changedByAnother(tenant, 'heal-off', { v: 'edited' });
    await changedByAnother(tenant, 'heal-on', { v: 'edited' });
    await f.expect.deployment(off).is('OutOfSync', (s) => s.sync?.status === 'OutOfSync');
    assert.equal((await f.expect.readObject(tenant, 'ConfigMap', 'heal-off'))?.data?.v, 'edited');
    await f.expect.object(tenant, 'ConfigMap', 'heal-on', (c) => c.data?.v === 'git');
  });

  it('ignoreDifferences: a field another manager owns does not make the deployment OutOfSync', async () => {
    const tenant = await f.given.tenant('ctl-ignore');
    const repo = await f.given.repository('ctl-ignore-app', {
      'dev/ignored.yaml': manifest.configMap('ignored', { injected: 'git', kept: 'k' }),
      'dev/compared.yaml': manifest.configMap('compared', { injected: 'git', kept: 'k' }),
    });
    const gd = await f.when.deployed(tenant, 'ignore', gitSource(repo, 'dev'), {
      // Not healed either, so the compared one's change stays visible.
      syncPolicy: { automated: { selfHeal: false } },
      ignoreDifferences: [{ kind: 'ConfigMap', name: 'ignored', jsonPointers: ['/data/injected'] }],
    });
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    await changedByAnother(tenant, 'ignored', { injected: 'controller' });
    await changedByAnother(tenant, 'compared', { injected: 'controller' });
    // The comparison that sees the compared one OutOfSync saw both changes: the ignored one stays Synced.
    const status = await f.expect
      .deployment(gd)
      .is('the compared ConfigMap OutOfSync', (s) => resourceOf(s, 'compared')?.status === 'OutOfSync');
    assert.equal(resourceOf(status, 'ignored')?.status, 'Synced');
    assert.equal((await f.expect.readObject(tenant, 'ConfigMap', 'ignored'))?.data?.injected, 'controller');
  });

  it('ServerSideApply=true: Argo CD applies server-side; revisionHistoryLimit bounds its history', async () => {
    const tenant = await f.given.tenant('ctl-ssa');
    const repo = await f.given.repository('ctl-ssa-app', {
      'dev/cm.yaml': manifest.configMap('ssa', { v: '1' }),
    });
    const gd = await f.when.deployed(tenant, 'ssa', gitSource(repo, 'dev'), {
      syncPolicy: { syncOptions: ['ServerSideApply=true'] },
      revisionHistoryLimit: 1,
    });
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const cm = await f.expect.object(tenant, 'ConfigMap', 'ssa');
    const managers = (cm.metadata.managedFields as { manager: string; operation: string }[]).map(
      (m) => `${m.manager}/${m.operation}`,
    );
    assert.ok(managers.includes('argocd-controller/Apply'), `managers: ${managers.join(', ')}`);
    // Two more syncs: Argo CD keeps one entry of history.
    for (const v of ['2', '3']) {
      const sha = await repo.commit({ 'dev/cm.yaml': manifest.configMap('ssa', { v }) });
      await f.expect.deployment(gd).is(`synced ${sha}`, (s) => s.sync?.revision === sha && synced(s));
    }
    const application = await eventually(
      'the Application with its history',
      async () => {
        const app = await applicationOf(gd);
        return (app?.status?.history?.length ?? 0) > 0 ? app : undefined;
      },
      CONVERGE_MS,
    );
    assert.equal(application.spec.revisionHistoryLimit, 1);
    assert.equal(application.status?.history?.length, 1);
  });
});
