/**
 * Tier 3b: `syncPolicy.retry` with backoff on a failing hook, with a real Argo CD (issue 35; docs/api.md,
 * GitOpsDeployment). Tier 3b has no kubelet, so the hook cannot be a Job whose Pod fails: it is a PreSync hook
 * the API server refuses (a ConfigMap whose name is no DNS-1123 subdomain), which fails the sync before any
 * resource of the repository is applied, every time Argo CD tries.
 */

import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import { describe, it } from 'vitest';
import {
  type DeploymentStatus,
  gitSource,
  syncedAndHealthy,
  useRealSystem,
} from '../fixture/real-argo-cd.ts';

/** A PreSync hook the API server refuses: its name has an upper case letter and an underscore. */
const refusedHook = [
  'apiVersion: v1',
  'kind: ConfigMap',
  'metadata:',
  '  name: Pre_Sync_Check',
  '  annotations:',
  '    argocd.argoproj.io/hook: PreSync',
  'data:',
  '  step: pre-sync',
  '',
].join('\n');

type OperationState = { phase?: string; message?: string; retryCount?: number };
const operation = (s: DeploymentStatus) => s.operationState as OperationState | undefined;

describe('tier 3b: retry with backoff on a failing hook, with a real Argo CD', () => {
  const f = useRealSystem();

  it("a PreSync hook the API server refuses: Argo CD retries the sync with the user's backoff until the limit, the retry count grows in status, and the SyncError condition says why", async ({
    annotate,
  }) => {
    // Given a repository whose sync starts with a hook the API server refuses
    const tenant = await f.given.tenant('retry-hook');
    const repo = await f.given.repository('retry-hook-app', {
      'app/hook.yaml': refusedHook,
      'app/settings.yaml': manifest.configMap('settings', { mode: 'first' }),
    });

    // When the tenant deploys it with a retry of at most 3 times, 1 s doubling up to 4 s
    const gd = await f.when.deployed(tenant, 'hooked', gitSource(repo, 'app'), {
      syncPolicy: { retry: { limit: 3, backoff: { duration: '1s', factor: 2, maxDuration: '4s' } } },
    });

    // Then Argo CD retries the failing sync: the retry count the GitOpsDeployment shows grows
    const retried = await f.expect
      .deployment(gd)
      .is('a retried sync', (s) => (operation(s)?.retryCount ?? 0) >= 1);
    await annotate(`first retry: ${JSON.stringify(operation(retried))}`);
    assert.match(operation(retried)?.message ?? '', /Pre_Sync_Check/);

    // and once the limit is spent, the operation failed after 3 retries, and Argo CD's SyncError condition
    // on the GitOpsDeployment names the refused hook
    const spent = await f.expect
      .deployment(gd)
      .is('the retry limit spent', (s) =>
        (s.conditions ?? []).some((c) => c.type === 'SyncError' && c.status === 'True'),
      );
    await annotate(`after the limit: ${JSON.stringify(operation(spent))}`);
    assert.equal(operation(spent)?.retryCount, 3);
    assert.equal(operation(spent)?.phase, 'Failed');
    assert.match(operation(spent)?.message ?? '', /retried 3 times/);
    const syncError = spent.conditions?.find((c) => c.type === 'SyncError');
    assert.match(syncError?.message ?? '', /Pre_Sync_Check/);
    // and nothing of the repository was applied: the hook runs first
    assert.equal(await f.expect.readObject(tenant, 'ConfigMap', 'settings'), undefined);

    // When the user fixes the hook's name in Git
    await repo.commit({ 'app/hook.yaml': refusedHook.replace('Pre_Sync_Check', 'pre-sync-check') });

    // Then the next sync runs the hook and deploys the repository
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    assert.equal((await f.expect.object(tenant, 'ConfigMap', 'settings')).data?.mode, 'first');
  });
});
