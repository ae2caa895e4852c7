/**
 * Tier 3b, scenario 6: GitOpsDeploymentManagedEnvironments built from ServiceAccount tokens, deployed to by a
 * real Argo CD. The local API server plays the external cluster; the TokenRequest API gives real tokens and
 * RBAC limits each ServiceAccount to one namespace.
 */

import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { describe, it } from 'vitest';
import { createTenantNamespace, list } from '../fixture/kube.ts';
import { gitSource, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

describe('tier 3b: ManagedEnvironments with a real Argo CD', () => {
  const f = useRealSystem();

  it('deploys through a namespace-limited environment; another namespace through it fails with Argo CD’s error', async ({
    annotate,
  }) => {
    // Given a tenant with an environment whose ServiceAccount may administer only one namespace
    const tenant = await f.given.tenant('menv');
    const target = await f.external.target('menv-target');
    const staging = await f.external.environment(tenant, 'staging', target);
    const repo = await f.given.repository('menv-app', {
      'dev/config.yaml': manifest.configMap('menv-config', { where: 'staging' }),
    });

    // When the tenant deploys there through the environment
    const source = gitSource(repo, 'dev');
    const gd = await f.when.deployed(tenant, 'to-staging', source, { destination: staging });
    // Then Argo CD deploys into that namespace with the ServiceAccount's credentials
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const cm = await f.expect.object(target.namespace, 'ConfigMap', 'menv-config');
    assert.equal(cm.data?.where, 'staging');

    // When the tenant deploys into another namespace through the same environment
    const elsewhere = await createTenantNamespace(f.system.kc, 'menv-elsewhere');
    f.external.track(elsewhere);
    const denied = await f.when.deployed(tenant, 'to-elsewhere', source, {
      destination: { ...staging, namespace: elsewhere },
    });
    // Then Argo CD's error reaches the GitOpsDeployment, and nothing is deployed there
    const { status, condition: argoCondition } = await f.expect
      .deployment(denied)
      .reports('an Argo CD error condition', /not managed|forbidden|cannot/i, 'ErrorOccurred');
    await annotate(`Argo CD said (${argoCondition.type}): ${argoCondition.message}`);
    assert.match(argoCondition.message ?? '', new RegExp(elsewhere));
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(await f.expect.readObject(elsewhere, 'ConfigMap', 'menv-config'), undefined);
  });

  it('two tenants’ environments on the same API server stay separate', async () => {
    // Given two tenants, each with an environment for a namespace of its own, with the same name
    const tenantA = await f.given.tenant('menv-a');
    const tenantB = await f.given.tenant('menv-b');
    const targetA = await f.external.target('menv-a-target');
    const targetB = await f.external.target('menv-b-target');
    const prodA = await f.external.environment(tenantA, 'prod', targetA);
    const prodB = await f.external.environment(tenantB, 'prod', targetB);
    const repo = await f.given.repository('menv-shared', {
      'dev/config.yaml': manifest.configMap('shared-config', { from: 'repo' }),
      'intrusion/config.yaml': manifest.configMap('intruder', { from: 'tenant A' }),
    });

    // When each deploys through its own "prod"
    const source = gitSource(repo, 'dev');
    const a = await f.when.deployed(tenantA, 'app', source, { destination: prodA });
    const b = await f.when.deployed(tenantB, 'app', source, { destination: prodB });
    // Then each lands in its own namespace
    await f.expect.deployment(a).is('A Synced/Healthy', syncedAndHealthy);
    await f.expect.deployment(b).is('B Synced/Healthy', syncedAndHealthy);
    await f.expect.object(targetA.namespace, 'ConfigMap', 'shared-config');
    await f.expect.object(targetB.namespace, 'ConfigMap', 'shared-config');

    // When tenant A aims its "prod" at tenant B's namespace
    const intrusion = await f.when.deployed(
      tenantA,
      'intrusion',
      { ...source, path: 'intrusion' },
      { destination: { ...prodA, namespace: targetB.namespace } },
    );
    // Then A's credentials do not reach B's namespace: Argo CD reports it, and B's objects are untouched
    const { status } = await f.expect
      .deployment(intrusion)
      .reports('an error condition', /^/, 'ErrorOccurred'); // whatever it says
    assert.notEqual(status.sync?.status, 'Synced');
    assert.match(JSON.stringify(status.conditions), new RegExp(targetB.namespace));
    assert.equal(await f.expect.readObject(targetB.namespace, 'ConfigMap', 'intruder'), undefined);
    const argoCdClusters = await list<KubeObject & { data?: Record<string, string> }>(
      f.system.kc,
      `/api/v1/namespaces/${f.system.argoCdNamespace}/secrets`,
      'argocd.argoproj.io/secret-type=cluster',
    );
    // and Argo CD holds one cluster per environment, each limited to its own namespace
    const namespacesOf = argoCdClusters
      .map((s) => Buffer.from(s.data?.namespaces ?? '', 'base64').toString())
      .filter((n) => n === targetA.namespace || n === targetB.namespace)
      .sort();
    assert.deepEqual(namespacesOf, [targetA.namespace, targetB.namespace].sort());
  });
});
