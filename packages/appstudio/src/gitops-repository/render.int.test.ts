/**
 * Rendering against the real API server and a real Git server (HTTPS `git http-backend` with basic auth):
 * a binding's Snapshot lands in the GitOps repository as a commit, `status.components` points at it, and
 * every failure of issue 23 point 3 is a clear condition with nothing half-written. The App Studio features
 * run alone (the core is not running, so no deployment syncs); the commits are read from the bare repository.
 * The scenario: testing/render-scenario.ts; over SSH: render-ssh.int.test.ts.
 */
import assert from 'node:assert/strict';
import type { GitRepo, GitServer } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { Kind } from '../testing/appstudio-fixture.ts';
import {
  IMAGE,
  PASSWORD,
  repoCondition,
  specOf,
  statusOf,
  USER,
  useRenderScenario,
} from '../testing/render-scenario.ts';
import { RENDER_ANNOTATION } from './render.ts';

describe('rendering a Snapshot into the GitOps repository', () => {
  const scenario = useRenderScenario();
  const { f, pushes, git, show, binding, get, rendered, endedInFailure, environment } = scenario;
  let server: GitServer;
  let repo: GitRepo;
  let ns: string;
  beforeAll(() => {
    ({ server, repo, ns } = scenario);
  });

  it('commits the Snapshot image by digest into the overlay, with the Environment variables, and points status.components at the commit', async () => {
    const before = await repo.head();
    await binding('shop-dev', 'dev', 's1');
    const b = await rendered('shop-dev', 'True');
    const head = await repo.head();
    assert.notEqual(head, before);
    assert.deepEqual(statusOf(b).components, [
      {
        name: 'web',
        gitopsRepository: {
          url: server.url('gitops'),
          branch: 'main',
          path: 'components/web/overlays/dev',
          generatedResources: [],
          commitID: head,
        },
      },
    ]);
    const overlay = await show('components/web/overlays/dev/kustomization.yaml');
    assert.match(overlay, new RegExp(`- name: ${IMAGE}\\n {4}digest: sha256:1{64}$`));
    assert.match(overlay, /- name: web-environment\n {4}literals:\n {6}- MODE=development/);
    const message = await git('log', '-1', '--format=%an <%ae>%n%B');
    assert.match(
      message,
      /^GitOps Service <gitops-service@managed-gitops.redhat.com>\nPromote Snapshot s1 to Environment dev\n/,
    );
    assert.match(message, /By: SnapshotEnvironmentBinding shop-dev \(no PromotionRun\)/);
    assert.equal(repoCondition(b)?.reason, 'GenerateSuccess');
    // The host was told of the push (the backend asks Argo CD to refresh what follows the branch).
    assert.deepEqual(
      pushes.filter((p) => p.namespace === ns),
      [{ namespace: ns, repoURL: server.url('gitops'), branch: 'main', commit: head }],
    );
    // The binding feature generates the deployment of that path.
    const deployment = await eventually('the GitOpsDeployment', () =>
      f.get(Kind.GitOpsDeployment, ns, 'shop-dev-shop-dev-web'),
    );
    assert.deepEqual((deployment.spec as Record<string, unknown>).source, {
      repoURL: server.url('gitops'),
      path: 'components/web/overlays/dev',
      targetRevision: 'main',
    });
  });

  it('a Snapshot with the same images makes no commit; another one commits again (by tag when there is no digest)', async () => {
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-dev', { spec: { snapshot: 's2' } });
    const b = await rendered('shop-dev', 'True');
    const head = await repo.head();
    assert.equal(
      (statusOf(b).components as { gitopsRepository: { commitID: string } }[])[0]?.gitopsRepository.commitID,
      head,
    );
    assert.match(
      await show('components/web/overlays/dev/kustomization.yaml'),
      new RegExp(`- name: ${IMAGE}\\n {4}newTag: "2.0"`),
    );
    assert.equal(pushes.at(-1)?.commit, head);
    const count = await git('rev-list', '--count', 'main');
    const told = pushes.length;
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-dev', { spec: { snapshot: 's2-again' } });
    const again = await rendered('shop-dev', 'True');
    assert.equal(await git('rev-list', '--count', 'main'), count);
    assert.equal(pushes.length, told, 'no commit, nothing to refresh');
    assert.match(String(repoCondition(again)?.message), /Snapshot s2-again rendered for Environment dev/);
  });

  it('two bindings pushing at the same time both land (fetched, rendered and pushed again)', async () => {
    await environment('qa');
    await environment('perf');
    await Promise.all([binding('shop-qa', 'qa', 's1'), binding('shop-perf', 'perf', 's2')]);
    await rendered('shop-qa', 'True');
    await rendered('shop-perf', 'True');
    assert.match(await show('components/web/overlays/qa/kustomization.yaml'), /digest: sha256:1{64}/);
    assert.match(await show('components/web/overlays/perf/kustomization.yaml'), /newTag: "2.0"/);
    // The overlay of qa names the base it was created with.
    assert.match(
      await show('components/web/overlays/qa/kustomization.yaml'),
      /resources:\n {2}- \.\.\/\.\.\/base/,
    );
  });

  it('a component without a base in the repository: a condition naming the path, nothing pushed', async () => {
    await f.create(Kind.Environment, ns, 'apis', {
      spec: { displayName: 'apis', deploymentStrategy: 'Manual' },
    });
    const head = await repo.head();
    await binding('shop-apis', 'apis', 's1', ['web', 'api']);
    const b = await rendered('shop-apis', 'False');
    assert.equal(
      repoCondition(b)?.message,
      'the GitOps repository has no components/api/base for component api (branch main)',
    );
    assert.equal(repoCondition(b)?.reason, 'GenerateError');
    assert.equal(statusOf(b).components, undefined);
    assert.equal(await repo.head(), head);
    const conditions = await eventually('the binding condition', async () => {
      const c =
        (statusOf(await get('shop-apis')).bindingConditions as
          | { reason: string; message: string }[]
          | undefined) ?? [];
      return c.length > 0 ? c : undefined;
    });
    assert.equal(conditions[1]?.reason, 'GitOpsRepoNotReady');
  });

  it('refused pushes (no write access, protected branch) and refused credentials: a clear condition on the binding, the PromotionRun ends in Failure at once with it, no credential anywhere, the last render kept', async () => {
    const last = statusOf(await get('shop-dev')).components;
    const head = await repo.head();

    server.setReadOnly('gitops', true);
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-dev', { spec: { snapshot: 's1' } });
    let b = await rendered('shop-dev', 'False');
    assert.match(
      String(repoCondition(b)?.message),
      new RegExp(
        `^the push to the GitOps repository ${server.url('gitops')} \\(branch main\\) was refused: pushing to branch main: .*403`,
      ),
    );
    assert.equal(repoCondition(b)?.reason, 'PushRefused');
    assert.deepEqual(statusOf(b).components, last);

    // A PromotionRun to the binding's snapshot: the 403 above is from before it started (it waits for the
    // binding's attempt of its own); that attempt meets the protected branch and the run ends there, long
    // before its timeout (10 minutes here).
    await server.protectBranch('gitops', 'main', 'main is protected: open a pull request');
    server.setReadOnly('gitops', false);
    await f.create(Kind.PromotionRun, ns, 'shop-s1-to-dev', {
      spec: { application: 'shop', snapshot: 's1', manualPromotion: { targetEnvironment: 'dev' } },
    });
    const failed = await endedInFailure('shop-s1-to-dev');
    const protectedMessage =
      /^the GitOps repository of binding shop-dev could not be rendered: the push to .* was refused: .*main is protected: open a pull request.*pre-receive hook declined/;
    assert.match(failed.condition, protectedMessage);
    assert.match(failed.step, protectedMessage);
    const afterRun = await get('shop-dev');
    assert.match(String(repoCondition(afterRun)?.message), /was refused: .*main is protected/);
    assert.equal(repoCondition(afterRun)?.reason, 'PushRefused');
    const runEvents = await f.events(ns, 'shop-s1-to-dev');
    assert.ok(runEvents.some((e) => e.reason === 'PromotionFailed' && /main is protected/.test(e.message)));
    assert.equal(await repo.head(), head);

    // Wrong credentials, reported before the next run starts: that run too ends with them.
    server.setPassword('gitops', USER, 'rotated-password');
    await server.protectBranch('gitops', 'other', 'only other is protected');
    b = await eventually(
      'the credentials condition',
      async () => {
        const x = await get('shop-dev');
        return /credentials for the GitOps repository/.test(String(repoCondition(x)?.message))
          ? x
          : undefined;
      },
      90_000,
    );
    assert.match(
      String(repoCondition(b)?.message),
      /^the credentials for the GitOps repository .* were refused \(the namespace's RepositoryCredential for it\)/,
    );
    assert.equal(repoCondition(b)?.reason, 'CredentialsRefused');
    await f.create(Kind.PromotionRun, ns, 'shop-s1-to-dev-again', {
      spec: { application: 'shop', snapshot: 's1', manualPromotion: { targetEnvironment: 'dev' } },
    });
    const refused = await endedInFailure('shop-s1-to-dev-again');
    assert.match(
      refused.condition,
      /^the GitOps repository of binding shop-dev could not be rendered: the credentials for the GitOps repository .* were refused/,
    );
    for (const text of [
      JSON.stringify(await get('shop-dev')),
      JSON.stringify(await f.get(Kind.PromotionRun, ns, 'shop-s1-to-dev')),
      JSON.stringify(await f.get(Kind.PromotionRun, ns, 'shop-s1-to-dev-again')),
      JSON.stringify(await f.events(ns, 'shop-dev')),
      JSON.stringify(await f.events(ns, 'shop-s1-to-dev')),
      JSON.stringify(await f.events(ns, 'shop-s1-to-dev-again')),
    ]) {
      assert.doesNotMatch(text, new RegExp(PASSWORD));
      assert.doesNotMatch(text, /rotated-password/);
    }
    assert.equal(await repo.head(), head);
    // Fixed: the binding kept trying, and the render lands, in a commit that names the last PromotionRun.
    server.setPassword('gitops', USER, PASSWORD);
    await eventually(
      'the render to land',
      async () => ((await repo.head()) !== head ? true : undefined),
      90_000,
    );
    assert.match(
      await git('log', '-1', '--format=%B'),
      /^Promote Snapshot s1 to Environment dev\n[\s\S]*By: PromotionRun shop-s1-to-dev-again\n/,
    );
    assert.match(await show('components/web/overlays/dev/kustomization.yaml'), /digest: sha256:1{64}/);
  });

  it('an unreachable repository is retried with backoff and the render lands once it answers', async () => {
    server.setAvailable(false);
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-qa', { spec: { snapshot: 's2' } });
    const b = await rendered('shop-qa', 'False');
    assert.match(String(repoCondition(b)?.message), /could not be reached, retrying: .*503/);
    server.setAvailable(true);
    const ok = await rendered('shop-qa', 'True', 90_000);
    assert.match(await show('components/web/overlays/qa/kustomization.yaml'), /newTag: "2.0"/);
    assert.equal(
      (statusOf(ok).components as { gitopsRepository: { commitID: string } }[])[0]?.gitopsRepository.commitID,
      await repo.head(),
    );
  });

  it('a slow repository (every request answered seconds late) still takes the render, and the PromotionRun succeeds', async () => {
    await f.create(Kind.Application, ns, 'shop-slow', {
      metadata: { annotations: { [RENDER_ANNOTATION]: 'true' } },
      spec: { displayName: 'shop-slow', gitOpsRepository: { url: server.url('gitops'), branch: 'main' } },
    });
    await environment('slow');
    await f.create(Kind.SnapshotEnvironmentBinding, ns, 'shop-slow', {
      spec: { application: 'shop-slow', environment: 'slow', snapshot: 's1', components: [{ name: 'web' }] },
    });
    await rendered('shop-slow', 'True');
    // Every request (a fetch and a push take about eight, with the credential challenges) waits 5 s.
    server.setDelay(5_000);
    try {
      await f.create(Kind.PromotionRun, ns, 'shop-slow-s2', {
        spec: { application: 'shop-slow', snapshot: 's2', manualPromotion: { targetEnvironment: 'slow' } },
      });
      await eventually('the PromotionRun to point the binding at s2', async () =>
        specOf(await get('shop-slow')).snapshot === 's2' ? true : undefined,
      );
      const b = await rendered('shop-slow', 'True', 300_000);
      const commit = (statusOf(b).components as { gitopsRepository: { commitID: string } }[])[0]
        ?.gitopsRepository.commitID;
      assert.equal(commit, await repo.head());
      assert.match(await show('components/web/overlays/slow/kustomization.yaml'), /newTag: "2.0"/);
      assert.match(
        await git('log', '-1', '--format=%B'),
        /^Promote Snapshot s2 to Environment slow\n[\s\S]*By: PromotionRun shop-slow-s2\n/,
      );
      // Playing the core: Argo CD synced that commit, and it is Healthy.
      const deployment = await eventually('the GitOpsDeployment of the slow environment', async () =>
        (await f.list(Kind.GitOpsDeployment, ns)).find(
          (d) => (d.spec as { source?: { path?: string } }).source?.path === 'components/web/overlays/slow',
        ),
      );
      await f.patch(
        Kind.GitOpsDeployment,
        ns,
        deployment.metadata.name,
        { status: { sync: { status: 'Synced', revision: commit }, health: { status: 'Healthy' } } },
        'status',
      );
      const run = await eventually(
        'the PromotionRun to complete',
        async () => {
          const r = statusOf(await f.get(Kind.PromotionRun, ns, 'shop-slow-s2'));
          return r.state === 'Complete' ? r : undefined;
        },
        300_000,
      );
      assert.equal(run.completionResult, 'Success');
    } finally {
      server.setDelay(0);
    }
  });

  it("follows a later commit that leaves the render as it was, so the deployment at the branch's head counts", async () => {
    // shop-dev was rendered earlier; other environments' renders moved the branch on since.
    const b = await get('shop-dev');
    const ours = (statusOf(b).components as { gitopsRepository: { commitID: string } }[])[0]?.gitopsRepository
      .commitID;
    const head = await repo.head();
    assert.notEqual(ours, head);
    // Playing the core: Argo CD synced the branch's head.
    await f.patch(
      Kind.GitOpsDeployment,
      ns,
      'shop-dev-shop-dev-web',
      { status: { sync: { status: 'Synced', revision: head }, health: { status: 'Healthy' } } },
      'status',
    );
    await eventually('the component commitID to follow the deployed head', async () => {
      const x = await get('shop-dev');
      const commit = (statusOf(x).components as { gitopsRepository: { commitID: string } }[])[0]
        ?.gitopsRepository.commitID;
      return commit === head ? true : undefined;
    });
  });

  it('stays out of the way of another writer of status.components, and of Applications that do not ask', async () => {
    await environment('elsewhere');
    await binding('shop-elsewhere', 'elsewhere', 's1');
    await f.patch(
      Kind.SnapshotEnvironmentBinding,
      ns,
      'shop-elsewhere',
      {
        status: {
          components: [
            {
              name: 'web',
              gitopsRepository: {
                url: 'https://example.com/has.git',
                branch: 'main',
                path: 'p',
                generatedResources: [],
                commitID: '',
              },
            },
          ],
        },
      },
      'status',
    );
    // Either the render came first and the other writer's status replaced it, or it never rendered: from now on
    // nothing more is rendered for this binding.
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-elsewhere', { spec: { snapshot: 's2' } });
    const moved = await get('shop-elsewhere');
    await f.settledAfter(moved as KubeObject);
    const events = await eventually('the Event saying so', async () => {
      const e = (await f.events(ns, 'shop-elsewhere')).filter(
        (x) => x.reason === 'GitOpsRepositoryManagedElsewhere',
      );
      return e.length > 0 ? e : undefined;
    });
    assert.match(events[0]?.message ?? '', /writes this binding's status.components/);
    const after = await get('shop-elsewhere');
    assert.equal(
      (statusOf(after).components as { gitopsRepository: { url: string } }[])[0]?.gitopsRepository.url,
      'https://example.com/has.git',
    );
    assert.ok(
      !(await show('components/web/overlays/elsewhere/kustomization.yaml').catch(() => '')).includes('2.0'),
    );

    await f.create(Kind.Application, ns, 'plain', {
      spec: { displayName: 'plain', gitOpsRepository: { url: server.url('gitops') } },
    });
    const countBefore = await git('rev-list', '--count', 'main');
    const plain = await f.create(Kind.SnapshotEnvironmentBinding, ns, 'plain-dev', {
      spec: { application: 'plain', environment: 'dev', snapshot: 's1', components: [{ name: 'web' }] },
    });
    await f.settledAfter(plain);
    assert.equal(repoCondition(await get('plain-dev')), undefined);
    assert.equal(await git('rev-list', '--count', 'main'), countBefore);
  });
});
