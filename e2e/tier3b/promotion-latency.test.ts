/**
 * Tier 3b, issue 34 item 4: a promotion waits for nothing. Argo CD runs with its own default reconciliation
 * (timeout.reconciliation 180 s): it re-reads the branch an unchanged Application follows only that often. A
 * promotion to an environment that already runs the component changes no spec (the GitOpsDeployment follows the
 * branch; only the branch moves), so without a refresh each step would wait for that poll. The backend renders
 * the Snapshot into the GitOps repository (the local HTTPS Git server, as appstudio-gitops-render.test.ts), asks
 * for a refresh through the database, and the agent sets Argo CD's refresh annotation.
 *
 * Every promotion after the first must complete within half a poll (RECONCILIATION_SECONDS / 2): without the
 * refresh it could only complete at Argo CD's next poll, about a whole period after the previous step. The
 * measured figures (created → Complete) go to stderr as JSON (docs/performance.md "Promotion latency"). The same
 * holds for a RepositoryCredential whose password is corrected: the Application that could not read its
 * repository reads it at once.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { AppStudioKinds } from '@gitops/api';
import { createGitRepo, type GitServer, manifest, startGitServer } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioObjects, appStudioObjects, cronJobComponent } from '../fixture/appstudio.ts';
import { GROUP_VERSION, get, list, mergePatch } from '../fixture/kube.ts';
import { CONVERGE_MS, type RealSystem, startRealSystem, syncedAndHealthy } from '../fixture/real-argo-cd.ts';

const REFRESH_SERVED = 'managed-gitops.redhat.com/refresh-served';
/** Argo CD's default timeout.reconciliation. */
const RECONCILIATION_SECONDS = 180;
const PASSWORD = 'tier3b-latency-Pa55-cafe';
const IMAGE = 'images.example/shop/web';
const SNAPSHOTS = ['s1', 's2', 's3', 's4'] as const;
const digestOf = (i: number) => `sha256:${String(i + 1).repeat(64)}`;

describe('tier 3b: a promotion does not wait for Argo CD to poll (reconciliation 180 s)', () => {
  let git: GitServer;
  let f: RealSystem;
  let tenant: string;

  let apps: AppStudioObjects;
  /** Promotes `snapshot` to dev; resolves with the completed run and the time from creation to Complete. */
  async function promote(snapshot: string, timeoutMs: number): Promise<{ run: KubeObject; ms: number }> {
    const name = `shop-${snapshot}-to-dev`;
    const started = Date.now();
    await apps.create(AppStudioKinds.PromotionRun, name, {
      snapshot,
      application: 'shop',
      manualPromotion: { targetEnvironment: 'dev' },
    });
    const run = await eventually(
      `PromotionRun ${name} Complete`,
      async () => {
        const r = await apps.read(AppStudioKinds.PromotionRun, name);
        return (r?.status as { state?: string } | undefined)?.state === 'Complete' ? r : undefined;
      },
      timeoutMs,
    );
    return { run, ms: Date.now() - started };
  }
  const deployment = () =>
    get(
      f.system.kc,
      `/apis/${GROUP_VERSION}/namespaces/${tenant}/gitopsdeployments/shop-dev-generated-binding-shop-dev-web`,
    );

  beforeAll(async () => {
    git = await startGitServer();
    f = await startRealSystem({
      trustedCertificates: { '127.0.0.1': await readFile(git.caFile, 'utf8') },
      caFile: git.caFile,
      reconciliationSeconds: RECONCILIATION_SECONDS,
    });
    tenant = await f.given.tenant('latency');
    apps = appStudioObjects(f.system, tenant);
    await createGitRepo(git.reposDir, 'shop-gitops', {
      ...cronJobComponent('web', IMAGE),
      'components/web/overlays/dev/kustomization.yaml': 'resources:\n  - ../../base\nnameSuffix: -dev\n',
    });
    git.setPassword('shop-gitops', 'jane', PASSWORD);
    await f.given.repositoryCredential(
      tenant,
      'shop-gitops',
      { repository: git.url('shop-gitops') },
      { name: 'git-creds', credentials: { username: 'jane', password: PASSWORD } },
    );
    await apps.createRenderedApplication('shop', { url: git.url('shop-gitops'), branch: 'main' }, ['web']);
    await apps.create(AppStudioKinds.Environment, 'dev', {
      displayName: 'dev',
      deploymentStrategy: 'Manual',
    });
    for (const [i, snapshot] of SNAPSHOTS.entries())
      await apps.create(AppStudioKinds.Snapshot, snapshot, {
        application: 'shop',
        components: [{ name: 'web', containerImage: `${IMAGE}:${snapshot}@${digestOf(i)}` }],
      });
  });

  afterAll(async () => {
    await apps?.removeBindings();
    await f?.stop();
    await git?.stop();
  });

  it('each promotion of a new Snapshot to an environment that runs the component completes within half of one Argo CD poll', async () => {
    // The first promotion creates the GitOpsDeployment: a new Application, which Argo CD compares at once.
    const first = await promote('s1', CONVERGE_MS * 2);
    assert.equal((first.run.status as { completionResult?: string }).completionResult, 'Success');

    const figures: number[] = [];
    for (const snapshot of SNAPSHOTS.slice(1)) {
      const { run, ms } = await promote(snapshot, (RECONCILIATION_SECONDS * 1000) / 2);
      assert.equal((run.status as { completionResult?: string }).completionResult, 'Success');
      figures.push(ms);
      // Deployed at the rendered commit, through a refresh the agent asked for.
      const binding = await apps.read(
        AppStudioKinds.SnapshotEnvironmentBinding,
        'shop-dev-generated-binding',
      );
      const commit = (
        (binding?.status ?? {}) as { components?: { gitopsRepository: { commitID: string } }[] }
      ).components?.[0]?.gitopsRepository.commitID;
      const sync = ((await deployment())?.status as { sync?: { revision?: string } } | undefined)?.sync;
      assert.equal(sync?.revision, commit);
    }
    const application = (
      await list(
        f.system.kc,
        `/apis/argoproj.io/v1alpha1/namespaces/${f.system.argoCdNamespace}/applications`,
      )
    ).find((a) => a.metadata.labels?.['managed-gitops.redhat.com/gitopsdeployment-namespace'] === tenant);
    assert.ok(
      application?.metadata.annotations?.[REFRESH_SERVED],
      'the agent recorded the refresh it asked for',
    );
    const sorted = [...figures].sort((a, b) => a - b);
    process.stderr.write(
      `${JSON.stringify({
        figure: 'promotion_latency',
        argocd_reconciliation_seconds: RECONCILIATION_SECONDS,
        promotions: figures.length,
        created_to_succeeded_ms: figures,
        p50_ms: sorted[Math.floor((sorted.length - 1) / 2)],
        max_ms: sorted[sorted.length - 1],
      })}\n`,
    );
  });

  it('a corrected repository password is used at once, not at the next poll of the Application that could not read it', async () => {
    // Given a private repository and a RepositoryCredential with a wrong password
    await createGitRepo(git.reposDir, 'private', {
      'dev/config.yaml': manifest.configMap('private-config', { k: 'v' }),
    });
    git.setPassword('private', 'jane', PASSWORD);
    const url = git.url('private');
    await f.given.repositoryCredential(
      tenant,
      'private',
      { repository: url },
      { name: 'private-creds', credentials: { username: 'jane', password: 'not-the-password' } },
    );
    // and a deployment of it, which Argo CD cannot read
    const gd = await f.when.deployed(tenant, 'private-app', { repoURL: url, path: 'dev' });
    await f.expect
      .deployment(gd)
      .is('a ComparisonError', (s) =>
        (s.conditions ?? []).some((c) => c.type === 'ComparisonError' && c.status === 'True'),
      );
    // When the user corrects the password
    const fixed = Date.now();
    await mergePatch(f.system.kc, `/api/v1/namespaces/${tenant}/secrets/private-creds`, {
      stringData: { password: PASSWORD },
    });
    // Then Argo CD reads the repository with it well before its next poll of that Application
    await eventually(
      'private-app Synced and Healthy',
      async () => {
        const status = ((await f.expect.deployment(gd).read())?.status ?? {}) as Parameters<
          typeof syncedAndHealthy
        >[0];
        return syncedAndHealthy(status) ? true : undefined;
      },
      (RECONCILIATION_SECONDS * 1000) / 2,
    );
    process.stderr.write(
      `${JSON.stringify({
        figure: 'credential_fix_to_synced',
        argocd_reconciliation_seconds: RECONCILIATION_SECONDS,
        ms: Date.now() - fixed,
      })}\n`,
    );
    assert.equal((await f.expect.object(tenant, 'ConfigMap', 'private-config')).data?.k, 'v');
  });
});
