/**
 * Tier 3b, scenario 8: ten tenants deploying at the same time with a real Argo CD all converge.
 */
import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import { describe, it } from 'vitest';
import { watchEvents } from '../fixture/kube.ts';
import { gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

const TENANTS = 10;

describe('tier 3b: many tenants with a real Argo CD', () => {
  const f = useRealSystem();

  it(`${TENANTS} tenants deploying concurrently all converge, each in its own namespace`, async () => {
    // Given ten tenants, each with its own repository
    const tenants = await Promise.all(
      Array.from({ length: TENANTS }, async (_, i) => {
        const namespace = await f.given.tenant(`many-${i}`);
        const repo = await f.given.repository(`many-${i}`, {
          'app/config.yaml': manifest.configMap('app-config', { tenant: namespace }),
          'app/service.yaml': manifest.service('app-svc', 8000 + i),
        });
        return { namespace, repo };
      }),
    );
    // (every condition any of their GitOpsDeployments ever shows is recorded, from every watch event)
    const ours = new Set(tenants.map((t) => t.namespace));
    const conditionsSeen: string[] = [];
    const watch = await watchEvents(
      f.system.kc,
      '/apis/managed-gitops.redhat.com/v1alpha1/gitopsdeployments',
      (_type, gd) => {
        if (!ours.has(gd.metadata.namespace ?? '')) return;
        const status = gd.status as { conditions?: { type?: string; reason?: string }[] } | undefined;
        for (const c of status?.conditions ?? [])
          conditionsSeen.push(`${gd.metadata.namespace}: ${c.type}/${c.reason}`);
      },
    );
    // When all of them create their GitOpsDeployment at once
    const deployments = await Promise.all(
      tenants.map((t) => f.when.deployed(t.namespace, 'app', gitSource(t.repo, 'app'))),
    );
    // Then every one becomes Synced/Healthy at its own head, with its own objects in its own namespace
    await Promise.all(
      deployments.map(async (gd, i) => {
        const tenant = tenants[i];
        assert.ok(tenant);
        const head = await tenant.repo.head();
        const status = await f.expect
          .deployment(gd)
          .is('Synced/Healthy at head', (s) => syncedAndHealthy(s) && s.sync?.revision === head);
        assert.equal(status.resources?.length, 2);
        for (const r of status.resources ?? []) assert.equal(r.namespace, tenant.namespace);
        const cm = await f.expect.object(tenant.namespace, 'ConfigMap', 'app-config');
        assert.equal(cm.data?.tenant, tenant.namespace);
      }),
    );
    watch.stop();
    // and no deployment ever showed a condition: in particular not Argo CD's InvalidSpecError about the
    // tenant's AppProject, which Argo CD raises when it sees a new tenant's first Application before the
    // project (a verdict on nothing the user did)
    assert.deepEqual(conditionsSeen, []);
  });
});
