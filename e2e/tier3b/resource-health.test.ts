/**
 * Tier 3b: per-resource health reaches status.resources. Argo CD 3.x keeps resource health out of the
 * Application unless its controller persists it (controller.resource.health.persist); the local Argo CD is
 * configured as a production install for this service must be (docs/api.md, "Argo CD settings").
 */
import assert from 'node:assert/strict';
import type { ResourceStatus } from '@gitops/api';
import { manifest } from '@gitops/local-env';
import { describe, it } from 'vitest';
import { gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

describe('tier 3b: per-resource health with a real Argo CD', () => {
  const f = useRealSystem();

  it('a Service carries its health in status.resources; a ConfigMap, which has none in Argo CD, carries none', async () => {
    // Given a tenant's repository with a Service and a ConfigMap
    const tenant = await f.given.tenant();
    const repo = await f.given.repository('health', {
      'app/service.yaml': manifest.service('health-svc', 8080),
      'app/config.yaml': manifest.configMap('health-config', { a: 'b' }),
    });
    // When the tenant deploys it
    const gd = await f.when.deployed(tenant, 'health', gitSource(repo, 'app'));
    // Then the Service's entry in status.resources says Healthy
    const status = await f.expect
      .deployment(gd)
      .is(
        'Synced/Healthy with the Service Healthy in status.resources',
        (s) =>
          syncedAndHealthy(s) &&
          ((s.resources ?? []) as ResourceStatus[]).some(
            (r) => r.kind === 'Service' && r.health?.status === 'Healthy',
          ),
      );
    const byKind = new Map(((status.resources ?? []) as ResourceStatus[]).map((r) => [r.kind, r]));
    assert.deepEqual(byKind.get('Service')?.health, { status: 'Healthy' });
    // and the ConfigMap's entry has no health at all (not an empty or invented one)
    const configMap = byKind.get('ConfigMap');
    assert.equal(configMap?.name, 'health-config');
    assert.equal(configMap?.health, undefined);
  });
});
