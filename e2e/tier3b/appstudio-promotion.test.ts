/**
 * Tier 3b: App Studio promotion with a real Argo CD. The test plays only the component service (it writes
 * each binding's status.components, pointing at `components/<component>/overlays/<environment>` of a local
 * Git repository at its head commit); the backend's App Studio controllers, the core pipeline and Argo CD do
 * the rest. Success means every deployment Synced and Healthy at the promoted commit (design §4).
 */
import assert from 'node:assert/strict';
import { AppStudioKinds } from '@gitops/api';
import { type GitRepo, manifest } from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioObjects, appStudioObjects } from '../fixture/appstudio.ts';
import { get, list, mergePatch } from '../fixture/kube.ts';
import { CONVERGE_MS, type RealSystem, startRealSystem } from '../fixture/real-argo-cd.ts';

const ENVIRONMENTS = ['dev', 'staging', 'prod'] as const;

describe('tier 3b: App Studio promotion with a real Argo CD', () => {
  let f: RealSystem;
  let tenant: string;
  let repo: GitRepo;
  let stopped = false;
  let componentService: Promise<void> | undefined;

  let apps: AppStudioObjects;
  const run = (name: string) => apps.read(AppStudioKinds.PromotionRun, name);
  const completed = (name: string) =>
    eventually(
      `PromotionRun ${name} Complete`,
      async () => {
        const r = await run(name);
        return (r?.status as { state?: string } | undefined)?.state === 'Complete' ? r : undefined;
      },
      CONVERGE_MS * 2,
    );

  /** The component service: every binding gets status.components at the repository's head. */
  async function playComponentService(): Promise<void> {
    while (!stopped) {
      try {
        const head = await repo.head();
        for (const b of await list(f.system.kc, apps.path(AppStudioKinds.SnapshotEnvironmentBinding))) {
          if ((b.status as { components?: unknown } | undefined)?.components) continue;
          const spec = b.spec as { environment: string; components: { name: string }[] };
          await mergePatch(
            f.system.kc,
            `${apps.path(AppStudioKinds.SnapshotEnvironmentBinding, b.metadata.name)}/status`,
            {
              status: {
                components: spec.components.map((c) => ({
                  name: c.name,
                  gitopsRepository: {
                    url: repo.fileUrl,
                    branch: 'main',
                    path: `components/${c.name}/overlays/${spec.environment}`,
                    generatedResources: [],
                    commitID: head,
                  },
                })),
              },
            },
          );
        }
      } catch {
        // Bindings come and go; the next round sees the current state.
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  beforeAll(async () => {
    f = await startRealSystem();
    tenant = await f.given.tenant('appstudio');
    apps = appStudioObjects(f.system, tenant);
    const files: Record<string, string> = {};
    for (const env of ENVIRONMENTS)
      files[`components/web/overlays/${env}/config.yaml`] = manifest.configMap(`web-${env}`, {
        environment: env,
      });
    repo = await f.given.repository('appstudio-gitops', files);
    await apps.create(AppStudioKinds.Application, 'shop', { displayName: 'shop' });
    await apps.create(AppStudioKinds.Component, 'web', { componentName: 'web', application: 'shop' });
    await apps.create(AppStudioKinds.Snapshot, 'shop-1', {
      application: 'shop',
      components: [{ name: 'web', containerImage: 'images.example/example/web@sha256:1' }],
    });
    componentService = playComponentService();
  });

  afterAll(async () => {
    stopped = true;
    await componentService;
    // Bindings own the deployments: deleting them lets Argo CD prune before the system stops.
    await apps?.removeBindings();
    await f?.stop();
  });

  it('a manual promotion staging → prod ends Complete/Success with prod deployed at the promoted commit', async () => {
    await apps.create(AppStudioKinds.Environment, 'staging', {
      displayName: 'Staging',
      deploymentStrategy: 'Manual',
    });
    await apps.create(AppStudioKinds.Environment, 'prod', {
      displayName: 'Prod',
      deploymentStrategy: 'Manual',
    });
    await apps.create(AppStudioKinds.PromotionRun, 'shop-1-to-staging', {
      snapshot: 'shop-1',
      application: 'shop',
      manualPromotion: { targetEnvironment: 'staging' },
    });
    assert.equal(
      (((await completed('shop-1-to-staging')).status ?? {}) as Record<string, unknown>).completionResult,
      'Success',
    );
    await apps.create(AppStudioKinds.PromotionRun, 'shop-1-to-prod', {
      snapshot: 'shop-1',
      application: 'shop',
      manualPromotion: { targetEnvironment: 'prod' },
    });
    const done = await completed('shop-1-to-prod');
    const status = done.status as Record<string, unknown>;
    assert.equal(status.completionResult, 'Success');
    assert.deepEqual(status.environmentStatus, [
      {
        step: 1,
        environmentName: 'prod',
        status: 'Success',
        displayStatus: 'All GitOpsDeployments are Synced/Healthy',
      },
    ]);
    const head = await repo.head();
    const deployment = await get(
      f.system.kc,
      `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant}/gitopsdeployments/shop-prod-generated-binding-shop-prod-web`,
    );
    const deployed = deployment?.status as {
      sync?: { status?: string; revision?: string };
      health?: { status?: string };
    };
    assert.equal(deployed.sync?.status, 'Synced');
    assert.equal(deployed.sync?.revision, head);
    assert.equal(deployed.health?.status, 'Healthy');
    const cm = await f.expect.object(tenant, 'ConfigMap', 'web-prod');
    assert.equal(cm.data?.environment, 'prod');
  });

  it('automated promotion across a three-environment chain ends with three Success steps in order', async () => {
    await apps.create(AppStudioKinds.Environment, 'dev', {
      displayName: 'Dev',
      deploymentStrategy: 'AppStudioAutomated',
    });
    await apps.create(AppStudioKinds.Environment, 'chain-staging', {
      displayName: 'Staging',
      deploymentStrategy: 'AppStudioAutomated',
      parentEnvironment: 'dev',
    });
    await apps.create(AppStudioKinds.Environment, 'chain-prod', {
      displayName: 'Prod',
      deploymentStrategy: 'AppStudioAutomated',
      parentEnvironment: 'chain-staging',
    });
    const files: Record<string, string> = {};
    for (const env of ['chain-staging', 'chain-prod'])
      files[`components/web/overlays/${env}/config.yaml`] = manifest.configMap(`web-${env}`, {
        environment: env,
      });
    await repo.commit(files);
    await apps.create(AppStudioKinds.PromotionRun, 'shop-1-automated', {
      snapshot: 'shop-1',
      application: 'shop',
      automatedPromotion: { initialEnvironment: 'dev' },
    });
    const status = (await completed('shop-1-automated')).status as Record<string, unknown>;
    assert.equal(status.completionResult, 'Success');
    const display = 'All GitOpsDeployments are Synced/Healthy';
    assert.deepEqual(status.environmentStatus, [
      { step: 1, environmentName: 'dev', status: 'Success', displayStatus: display },
      { step: 2, environmentName: 'chain-staging', status: 'Success', displayStatus: display },
      { step: 3, environmentName: 'chain-prod', status: 'Success', displayStatus: display },
    ]);
    await f.expect.object(tenant, 'ConfigMap', 'web-chain-prod');
  });

  it('a promotion whose target never becomes Healthy ends Failure at GITOPS_PROMOTION_TIMEOUT with the message', async () => {
    await f.system.kill('backend');
    await f.system.start('backend', { GITOPS_PROMOTION_TIMEOUT: '30s' });
    // No overlay for this environment in the repository: Argo CD can never sync it.
    await apps.create(AppStudioKinds.Environment, 'broken', {
      displayName: 'Broken',
      deploymentStrategy: 'Manual',
    });
    await apps.create(AppStudioKinds.PromotionRun, 'shop-1-to-broken', {
      snapshot: 'shop-1',
      application: 'shop',
      manualPromotion: { targetEnvironment: 'broken' },
    });
    const status = (await completed('shop-1-to-broken')).status as Record<string, unknown>;
    const message = 'Promotion Failed. Could not be completed in 30s.';
    assert.equal(status.completionResult, 'Failure');
    assert.deepEqual(status.environmentStatus, [
      { step: 1, environmentName: 'broken', status: 'Failed', displayStatus: message },
    ]);
    const conditions = (status.conditions as { type: string; status: string; message: string }[]).map(
      ({ type, status, message }) => ({ type, status, message }),
    );
    assert.deepEqual(conditions, [{ type: 'ErrorOccurred', status: 'True', message }]);
  });
});
