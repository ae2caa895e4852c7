/**
 * Tier 3b, scenarios 1-4: automated GitOpsDeployments deployed by a real Argo CD from local Git
 * repositories into the tenant's namespace, following commits and spec edits, pruning on delete, and
 * Argo CD's own ComparisonError for a repository that does not exist.
 */
import assert from 'node:assert/strict';
import { manifest } from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { paths, recordDeletions, watchEvents } from '../fixture/kube.ts';
import { gitSource, hasCondition, syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

const USER_FINALIZER = 'resources-finalizer.managed-gitops.redhat.com';

describe('tier 3b: automated GitOpsDeployments with a real Argo CD', () => {
  const f = useRealSystem();
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant();
  });

  it('deploys the repository: Synced/Healthy, status.resources lists the objects, the objects exist', async () => {
    // Given a repository with a ConfigMap, a Service and a Secret under dev/
    const repo = await f.given.repository('app-basic', {
      'dev/config.yaml': manifest.configMap('basic-config', { greeting: 'hello' }),
      'dev/service.yaml': manifest.service('basic-svc', 8080),
      'dev/secret.yaml': manifest.secret('basic-secret', { token: 'not-a-real-token' }),
    });
    // (every operation Argo CD records on the Applications, in order: `operation.info` of each)
    const syncsSeen = new Map<string, { name?: string }[][]>();
    const watch = await watchEvents(f.system.kc, paths.applications(f.system.argoCdNamespace), (_, app) => {
      const state = (app.status as { operationState?: { operation?: { info?: { name?: string }[] } } })
        ?.operationState;
      if (!state?.operation) return;
      const seen = syncsSeen.get(app.metadata.name) ?? [];
      const info = state.operation.info ?? [];
      if (JSON.stringify(seen.at(-1)) !== JSON.stringify(info)) seen.push(info);
      syncsSeen.set(app.metadata.name, seen);
    });
    try {
      // When the tenant creates an automated GitOpsDeployment for it
      const gd = await f.when.deployed(tenant, 'basic', gitSource(repo, 'dev'));
      // Then Argo CD reports it Synced and Healthy at the repository's head
      const head = await repo.head();
      const status = await f.expect
        .deployment(gd)
        .is('Synced/Healthy at head', (s) => syncedAndHealthy(s) && s.sync?.revision === head);
      // and status.resources lists the three deployed objects
      const resources = (status.resources ?? []).map((r) => `${r.kind}/${r.namespace}/${r.name}`).sort();
      assert.deepEqual(resources, [
        `ConfigMap/${tenant}/basic-config`,
        `Secret/${tenant}/basic-secret`,
        `Service/${tenant}/basic-svc`,
      ]);
      for (const r of status.resources ?? []) assert.equal(r.status, 'Synced', JSON.stringify(r));
      // and the objects exist in the tenant's namespace with the repository's content
      const cm = await f.expect.object(tenant, 'ConfigMap', 'basic-config');
      assert.equal(cm.data?.greeting, 'hello');
      const secret = await f.expect.object(tenant, 'Secret', 'basic-secret');
      assert.equal(Buffer.from(secret.data?.token ?? '', 'base64').toString(), 'not-a-real-token');
      await f.expect.object(tenant, 'Service', 'basic-svc');
      // and the reconciled state names the source Argo CD deployed
      assert.equal(status.reconciledState?.source?.path, 'dev');
      // and the first sync Argo CD ran is the one the Application was created with (the agent's first-sync.ts):
      // Argo CD's automated policy did not start one of its own first
      const app = await f.expect.application(gd);
      const firstSyncs = syncsSeen.get(app.metadata.name);
      assert.ok(firstSyncs, 'the Application was watched');
      assert.ok(
        firstSyncs[0]?.some((item) => item.name === 'gitops-first-sync'),
        `operations seen in order: ${JSON.stringify(firstSyncs)}`,
      );
    } finally {
      watch.stop();
    }
  });

  it('deploys a new commit and sync.revision follows it', async () => {
    // Given a deployed repository
    const repo = await f.given.repository('app-commits', {
      'dev/config.yaml': manifest.configMap('commits-config', { version: 'one' }),
    });
    const gd = await f.when.deployed(tenant, 'commits', gitSource(repo, 'dev'));
    const first = await repo.head();
    await f.expect.deployment(gd).is('Synced at the first commit', (s) => s.sync?.revision === first);
    // When a new commit changes the ConfigMap and adds a Service
    const second = await repo.commit({
      'dev/config.yaml': manifest.configMap('commits-config', { version: 'two' }),
      'dev/service.yaml': manifest.service('commits-svc', 9090),
    });
    assert.notEqual(second, first);
    // Then the change is deployed
    await f.expect.object(tenant, 'ConfigMap', 'commits-config', (cm) => cm.data?.version === 'two');
    await f.expect.object(tenant, 'Service', 'commits-svc');
    // and sync.revision follows the new commit
    const status = await f.expect
      .deployment(gd)
      .is('Synced/Healthy at the second commit', (s) => syncedAndHealthy(s) && s.sync?.revision === second);
    assert.ok((status.resources ?? []).some((r) => r.kind === 'Service' && r.name === 'commits-svc'));
  });

  it('follows path, repoURL and targetRevision edits, then prunes everything on delete (user finalizer)', async () => {
    // Given two repositories, the first with two paths and a second branch
    const repoA = await f.given.repository('app-edit-a', {
      'one/config.yaml': manifest.configMap('edit-one', { from: 'a/one' }),
      'two/config.yaml': manifest.configMap('edit-two', { from: 'a/two' }),
    });
    const branchSha = await repoA.commit(
      { 'two/config.yaml': manifest.configMap('edit-two', { from: 'a/two@release' }) },
      'release branch',
      'release',
    );
    const repoB = await f.given.repository('app-edit-b', {
      'two/config.yaml': manifest.configMap('edit-b', { from: 'b/two' }),
    });
    // and a GitOpsDeployment of path one, with the user finalizer
    const gd = await f.when.deployed(tenant, 'edits', gitSource(repoA, 'one', 'main'), {
      finalizers: [USER_FINALIZER],
    });
    await f.expect.object(tenant, 'ConfigMap', 'edit-one', (cm) => cm.data?.from === 'a/one');

    // When the path changes: the new path's object is deployed and the old one pruned
    await f.when.edited(gd, { source: gitSource(repoA, 'two', 'main') });
    await f.expect.object(tenant, 'ConfigMap', 'edit-two', (cm) => cm.data?.from === 'a/two');
    await f.expect.noObject(tenant, 'ConfigMap', 'edit-one');

    // When the targetRevision changes to the release branch: its content is deployed at its commit
    await f.when.edited(gd, { source: gitSource(repoA, 'two', 'release') });
    await f.expect.object(tenant, 'ConfigMap', 'edit-two', (cm) => cm.data?.from === 'a/two@release');
    await f.expect
      .deployment(gd)
      .is('Synced at the release branch', (s) => syncedAndHealthy(s) && s.sync?.revision === branchSha);

    // When the repoURL changes: the other repository's object replaces it
    await f.when.edited(gd, { source: gitSource(repoB, 'two', 'main') });
    await f.expect.object(tenant, 'ConfigMap', 'edit-b', (cm) => cm.data?.from === 'b/two');
    await f.expect.noObject(tenant, 'ConfigMap', 'edit-two');
    const status = await f.expect.deployment(gd).is(
      'Synced/Healthy from the second repository',
      // Compared against the second repository: a status written before its sync (the first one's) is not it.
      (s) => syncedAndHealthy(s) && s.reconciledState?.source?.repoURL === repoB.fileUrl,
    );
    assert.deepEqual(
      status.resources?.map((r) => r.name),
      ['edit-b'],
    );

    // When the GitOpsDeployment is deleted
    const configMapDeletions = await recordDeletions(f.system.kc, `/api/v1/namespaces/${tenant}/configmaps`);
    const deploymentDeletions = await recordDeletions(f.system.kc, paths.gitopsDeployments(tenant));
    try {
      await f.when.deleted(gd);
      // Then the deployed object is pruned, and the GitOpsDeployment goes only after it
      await f.expect.noObject(tenant, 'ConfigMap', 'edit-b');
      await f.expect.deployment(gd).gone();
      const prunedAt = await eventually('the ConfigMap deletion event', async () =>
        configMapDeletions.deletedAt.get('edit-b'),
      );
      const goneAt = await eventually('the GitOpsDeployment deletion event', async () =>
        deploymentDeletions.deletedAt.get(gd.metadata.name),
      );
      assert.ok(
        prunedAt < goneAt,
        `ConfigMap deleted at revision ${prunedAt}, GitOpsDeployment at ${goneAt}`,
      );
    } finally {
      configMapDeletions.stop();
      deploymentDeletions.stop();
    }
  });

  it('reports Argo CD’s ComparisonError for a repository that does not exist', async ({ annotate }) => {
    // When a GitOpsDeployment points at a repository URL that does not exist
    const missing = `file://${f.gitRoot}/does-not-exist.git`;
    const gd = await f.when.deployed(tenant, 'missing-repo', { repoURL: missing, path: 'dev' });
    // Then the GitOpsDeployment carries Argo CD's ComparisonError condition with Argo CD's message
    const status = await f.expect
      .deployment(gd)
      .is('a ComparisonError condition', (s) => hasCondition(s, 'ComparisonError'));
    const condition = status.conditions?.find((c) => c.type === 'ComparisonError');
    assert.equal(condition?.reason, 'ComparisonError');
    await annotate(`Argo CD said: ${condition?.message}`);
    assert.match(condition?.message ?? '', /repository not found/);
    // and nothing is reported Synced
    assert.notEqual(status.sync?.status, 'Synced');
  });
});
