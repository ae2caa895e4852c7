/** Tier 3a: what Argo CD writes on an Application shows up on the GitOpsDeployment, event-driven. */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { type GitOpsDeployment, get, paths } from '../fixture/kube.ts';
import { exampleSource, usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

describe('Argo CD status on the GitOpsDeployment (tier 3a)', () => {
  const f = usePlayedArgoCdSystem();
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant();
  });

  const readDeployment = (name: string) =>
    get<GitOpsDeployment>(f.system.kc, paths.gitopsDeployment(tenant, name));
  const condition = (gd: GitOpsDeployment | undefined, type: string) =>
    gd?.status?.conditions?.find((c) => c.type === type);

  it('copies sync, health, resources, reconciledState, operationState and Argo CD conditions, and resolves dropped ones', async () => {
    const gd = await f.when.deployed(tenant, 'observed', exampleSource('observed', 'main'));
    const appName = (await f.expect.application(gd)).metadata.name;

    const resources = [
      {
        group: '',
        version: 'v1',
        kind: 'ConfigMap',
        namespace: tenant,
        name: 'settings',
        status: 'Synced',
        health: { status: 'Healthy' },
      },
      {
        group: 'apps',
        version: 'v1',
        kind: 'Deployment',
        namespace: tenant,
        name: 'web',
        status: 'Synced',
        health: { status: 'Progressing', message: 'waiting for rollout' },
      },
      { group: '', version: 'v1', kind: 'Service', namespace: tenant, name: 'web', status: 'OutOfSync' },
    ];
    await f.argoCd.reportStatus(appName, {
      sync: {
        status: 'Synced',
        revision: '0123456789abcdef0123456789abcdef01234567',
        comparedTo: {
          source: exampleSource('observed', 'main'),
          destination: { name: 'in-cluster', namespace: tenant },
        },
      },
      health: { status: 'Progressing' },
      resources,
      operationState: {
        operation: { sync: { revision: '0123456789abcdef0123456789abcdef01234567' } },
        phase: 'Succeeded',
        message: 'successfully synced (all tasks run)',
        startedAt: '2026-11-21T10:00:00Z',
        finishedAt: '2026-11-21T10:00:05Z',
        retryCount: 0,
        syncResult: { revision: '0123456789abcdef0123456789abcdef01234567', resources: [] },
      },
      conditions: [
        {
          type: 'SyncError',
          message: 'one or more objects failed to apply',
          lastTransitionTime: '2026-11-21T10:00:05Z',
        },
      ],
    });

    const observed = await eventually('status on the GitOpsDeployment', async () => {
      const current = await readDeployment('observed');
      return current?.status?.sync?.status === 'Synced' && condition(current, 'SyncError')
        ? current
        : undefined;
    });
    assert.deepEqual(observed.status?.sync, {
      status: 'Synced',
      revision: '0123456789abcdef0123456789abcdef01234567',
    });
    assert.equal(observed.status?.health?.status, 'Progressing');
    assert.deepEqual(observed.status?.resources, resources);
    assert.deepEqual(observed.status?.reconciledState, {
      source: { repoURL: 'https://github.com/example/repo', path: 'observed', branch: 'main' },
      destination: { name: '', namespace: tenant },
    });
    assert.equal(observed.status?.operationState?.phase, 'Succeeded');
    assert.equal(observed.status?.operationState?.message, 'successfully synced (all tasks run)');
    const syncError = condition(observed, 'SyncError');
    assert.equal(syncError?.status, 'True');
    assert.equal(syncError?.reason, 'SyncError');
    assert.equal(syncError?.message, 'one or more objects failed to apply');
    const errorOccurredBefore = condition(observed, 'ErrorOccurred');

    // Argo CD drops the condition and the app becomes healthy.
    await f.argoCd.reportStatus(appName, { conditions: null, health: { status: 'Healthy' } });
    const resolved = await eventually('the dropped condition to be resolved', async () => {
      const current = await readDeployment('observed');
      return condition(current, 'SyncError')?.status === 'False' ? current : undefined;
    });
    assert.equal(resolved.status?.health?.status, 'Healthy');
    const dropped = condition(resolved, 'SyncError');
    assert.equal(dropped?.reason, 'SyncErrorResolved');
    assert.equal(dropped?.message ?? '', '');
    // The pass-through never writes ErrorOccurred (owned by the backend's reconcile).
    assert.deepEqual(condition(resolved, 'ErrorOccurred'), errorOccurredBefore);
  });

  it('follows every status change Argo CD makes, ending on the last one', async () => {
    const gd = await f.when.deployed(tenant, 'flapping', exampleSource('flapping'));
    const appName = (await f.expect.application(gd)).metadata.name;
    const healths = ['Progressing', 'Degraded', 'Progressing', 'Healthy'];
    for (const health of healths) {
      await f.argoCd.reportStatus(appName, {
        health: { status: health },
        sync: { status: 'Synced', revision: health },
      });
    }
    const final = await eventually('the last status', async () => {
      const current = await readDeployment('flapping');
      return current?.status?.sync?.revision === 'Healthy' ? current : undefined;
    });
    assert.equal(final.status?.health?.status, 'Healthy');
  });
});
