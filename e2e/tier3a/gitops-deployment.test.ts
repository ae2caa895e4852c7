/**
 * Tier 3a: GitOpsDeployment → Argo CD Application through the outbox, with backend and cluster-agent running
 * as separate processes and the test playing Argo CD.
 */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import {
  type ArgoApplication,
  type GitOpsDeployment,
  get,
  list,
  mergePatch,
  paths,
} from '../fixture/kube.ts';
import { exampleSource, usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

const AUTOMATED_SYNC_POLICY = {
  automated: { prune: true, selfHeal: true, allowEmpty: true },
  syncOptions: ['PrunePropagationPolicy=background'],
  retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
};

describe('GitOpsDeployment to Argo CD Application (tier 3a)', () => {
  const f = usePlayedArgoCdSystem();
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant();
  });

  const applicationOf = (gd: GitOpsDeployment) => f.expect.application(gd);
  const tenantId = async () => {
    const row = await f.system.db
      .selectFrom('cluster_user')
      .select('id')
      .where('namespace_name', '=', tenant)
      .executeTakeFirstOrThrow();
    return row.id;
  };

  it('creates gitopsdepl-<uid> with the source, in-cluster destination, tenant project and automated policy', async () => {
    const gd = await f.when.deployed(tenant, 'automated-app', exampleSource('environments/dev', 'main'), {
      type: 'automated',
    });
    const app = await applicationOf(gd);
    assert.deepEqual(app.spec.source, {
      repoURL: 'https://github.com/example/repo',
      path: 'environments/dev',
      targetRevision: 'main',
    });
    assert.deepEqual(app.spec.destination, { name: 'in-cluster', namespace: tenant });
    assert.equal(app.spec.project, `app-project-${await tenantId()}`);
    assert.deepEqual(app.spec.syncPolicy, AUTOMATED_SYNC_POLICY);
    assert.ok(app.metadata.finalizers?.includes('resources-finalizer.argocd.argoproj.io'));
    const applicationRow = await f.system.db
      .selectFrom('application')
      .select('id')
      .where('name', '=', app.metadata.name)
      .executeTakeFirstOrThrow();
    assert.equal(app.metadata.labels?.['managed-gitops.redhat.com/database-id'], applicationRow.id);
  });

  it('gives a manual deployment no automated policy, and follows sync options added and removed', async () => {
    const gd = await f.when.deployed(tenant, 'manual-app', exampleSource('manual'), { type: 'manual' });
    const app = await applicationOf(gd);
    assert.equal(app.spec.syncPolicy?.automated, undefined);
    assert.deepEqual(app.spec.syncPolicy?.syncOptions ?? [], []);

    await f.when.edited(gd, { syncPolicy: { syncOptions: ['CreateNamespace=true'] } });
    await eventually('CreateNamespace=true on the Application', async () => {
      const current = await applicationOf(gd);
      return current.spec.syncPolicy?.syncOptions?.includes('CreateNamespace=true') ? true : undefined;
    });
    const withOption = await applicationOf(gd);
    assert.deepEqual(withOption.spec.syncPolicy?.syncOptions, ['CreateNamespace=true']);
    assert.equal(withOption.spec.syncPolicy?.automated, undefined);

    await f.when.edited(gd, { syncPolicy: null });
    await eventually('sync options removed from the Application', async () => {
      const current = await applicationOf(gd);
      return (current.spec.syncPolicy?.syncOptions ?? []).length === 0 ? true : undefined;
    });
  });

  it('sends path, repoURL and targetRevision updates to the Application; an identical re-apply writes nothing', async () => {
    const gd = await f.when.deployed(tenant, 'updated-app', {
      repoURL: 'https://github.com/example/one',
      path: 'a',
      targetRevision: 'v1',
    });
    await applicationOf(gd);
    await f.when.edited(gd, {
      source: { repoURL: 'https://github.com/example/two', path: 'b', targetRevision: 'v2' },
    });
    const updated = await eventually('the new source on the Application', async () => {
      const app = await applicationOf(gd);
      return app.spec.source.repoURL === 'https://github.com/example/two' ? app : undefined;
    });
    assert.deepEqual(updated.spec.source, {
      repoURL: 'https://github.com/example/two',
      path: 'b',
      targetRevision: 'v2',
    });

    const operationsBefore = await f.system.db.selectFrom('operation').select('id').execute();
    const resourceVersionBefore = updated.metadata.resourceVersion;
    // Same spec again, plus a label change: a new generation of the CR, but the desired state is unchanged.
    await mergePatch(f.system.kc, paths.gitopsDeployment(tenant, 'updated-app'), {
      metadata: { labels: { touched: 'yes' } },
      spec: { source: { repoURL: 'https://github.com/example/two', path: 'b', targetRevision: 'v2' } },
    });
    // Prove the backend has processed the change: touch another deployment and wait for its Application.
    const marker = await f.when.deployed(tenant, 'marker-app', {
      repoURL: 'https://github.com/example/one',
      path: 'marker',
    });
    await applicationOf(marker);
    const operationsAfter = await f.system.db.selectFrom('operation').select(['id', 'resource_id']).execute();
    const newOperations = operationsAfter.filter((o) => !operationsBefore.some((b) => b.id === o.id));
    const appRow = await f.system.db
      .selectFrom('application')
      .select('id')
      .where('name', '=', `gitopsdepl-${gd.metadata.uid}`)
      .executeTakeFirstOrThrow();
    assert.equal(
      newOperations.filter((o) => o.resource_id === appRow.id).length,
      0,
      'no operation for an unchanged spec',
    );
    const after = await applicationOf(gd);
    assert.equal(after.metadata.resourceVersion, resourceVersionBefore, 'the Application was not rewritten');
  });

  it('a targetRevision removed from the spec leaves the Application without one (HEAD), as Argo CD writes it', async () => {
    const gd = await f.when.deployed(tenant, 'head-app', {
      repoURL: 'https://github.com/example/head',
      path: 'h',
      targetRevision: 'v1',
    });
    assert.equal((await applicationOf(gd)).spec.source.targetRevision, 'v1');
    // A JSON merge patch with null removes the field from the GitOpsDeployment.
    await f.when.edited(gd, { source: { targetRevision: null } });
    const updated = await eventually('the Application without a targetRevision', async () => {
      const app = await applicationOf(gd);
      return 'targetRevision' in app.spec.source ? undefined : app;
    });
    assert.deepEqual(updated.spec.source, { repoURL: 'https://github.com/example/head', path: 'h' });
  });

  it('deletes the Application when the GitOpsDeployment is deleted', async () => {
    const gd = await f.when.deployed(tenant, 'deleted-app', exampleSource('deleted'));
    const app = await applicationOf(gd);
    await f.when.deleted(gd);
    await f.expect.noApplication(gd);
    const rows = await f.system.db
      .selectFrom('application')
      .select('id')
      .where('name', '=', app.metadata.name)
      .execute();
    assert.equal(rows.length, 0);
  });

  it('keeps a GitOpsDeployment with the user finalizer until Argo CD has removed the Application', async () => {
    const gd = await f.when.deployed(tenant, 'finalized-app', exampleSource('finalized'), {
      type: 'automated',
      finalizers: ['resources-finalizer.managed-gitops.redhat.com'],
    });
    await applicationOf(gd);
    f.argoCd.pauseDeletions();
    await f.when.deleted(gd);
    // Argo CD is still pruning: the Application is marked for deletion but exists.
    await f.expect.application(gd, (current) => Boolean(current.metadata.deletionTimestamp));
    const stillThere = await get<GitOpsDeployment>(
      f.system.kc,
      paths.gitopsDeployment(tenant, 'finalized-app'),
    );
    assert.ok(stillThere?.metadata.deletionTimestamp, 'the GitOpsDeployment waits for Argo CD');
    assert.deepEqual(stillThere?.metadata.finalizers, ['resources-finalizer.managed-gitops.redhat.com']);

    await f.argoCd.resumeDeletions();
    await f.expect.deployment(gd).gone();
    assert.equal(await f.expect.readApplication(gd), undefined);
  });

  it('recreating the same name three times gives a new Application each time and leaves no old one', async () => {
    const seen: string[] = [];
    const deleted: GitOpsDeployment[] = [];
    for (let round = 1; round <= 3; round++) {
      const gd = await f.system.createGitOpsDeployment(tenant, 'recreated-app', {
        source: exampleSource(`round-${round}`),
        type: 'automated',
      });
      const app = await applicationOf(gd);
      assert.equal(app.spec.source.path, `round-${round}`);
      seen.push(app.metadata.name);
      deleted.push(gd);
      await f.when.deleted(gd);
      await f.expect.deployment(gd).gone();
    }
    assert.equal(new Set(seen).size, 3);
    for (const gd of deleted) await f.expect.noApplication(gd);
    const left = await list<ArgoApplication>(
      f.system.kc,
      paths.applications(f.system.argoCdNamespace),
      'managed-gitops.redhat.com/database-id',
    );
    assert.ok(!left.some((a) => seen.includes(a.metadata.name)));
    assert.deepEqual(f.system.crashes, []);
  });
});
