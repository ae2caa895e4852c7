/**
 * Rendering against the real API server and a real Git server (HTTPS `git http-backend` with basic auth):
 * a binding's Snapshot lands in the GitOps repository as a commit, `status.components` points at it, and
 * every failure of issue 23 point 3 is a clear condition with nothing half-written. The App Studio features
 * run alone (the core is not running, so no deployment syncs); the commits are read from the bare repository.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  createGitRepo,
  type GitRepo,
  type GitServer,
  type GitSshServer,
  generateSshKey,
  startGitServer,
  startGitSshServer,
} from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { PushedCommit } from '../context.ts';
import { type AppStudioFixture, createAppStudioFixture, Kind } from '../testing/appstudio-fixture.ts';
import { RENDER_ANNOTATION } from './render.ts';

const exec = promisify(execFile);
const USER = 'jane';
const PASSWORD = 'pw-render-s3cret';
const IMAGE = 'images.example/shop/web';
const S1 = `${IMAGE}@sha256:${'1'.repeat(64)}`;
const S2 = `${IMAGE}:2.0`;

const statusOf = (o: KubeObject | undefined) => (o?.status ?? {}) as Record<string, unknown>;
const specOf = (o: KubeObject | undefined) => (o?.spec ?? {}) as Record<string, unknown>;
const repoCondition = (o: KubeObject | undefined) =>
  ((statusOf(o).gitopsRepoConditions as Record<string, unknown>[] | undefined) ?? [])[0];

const base = {
  'components/web/base/kustomization.yaml': 'resources:\n  - deployment.yaml\n',
  'components/web/base/deployment.yaml': [
    'apiVersion: apps/v1',
    'kind: Deployment',
    'metadata: {name: web}',
    'spec:',
    '  replicas: 0',
    '  selector: {matchLabels: {app: web}}',
    '  template:',
    '    metadata: {labels: {app: web}}',
    `    spec: {containers: [{name: web, image: "${IMAGE}:base"}]}`,
    '',
  ].join('\n'),
  'components/web/overlays/dev/kustomization.yaml': [
    'resources:',
    '  - ../../base',
    'configMapGenerator:',
    '  - name: web-environment',
    '    literals: []',
    '',
  ].join('\n'),
};

describe('rendering a Snapshot into the GitOps repository', () => {
  const f: AppStudioFixture = createAppStudioFixture();
  let server: GitServer;
  let sshServer: GitSshServer;
  /** The key the SSH server knows, and another one. */
  let sshKey: { privateKey: string; publicKey: string };
  let otherKey: { privateKey: string; publicKey: string };
  const features = ['appstudio-binding', 'appstudio-gitops-render', 'appstudio-promotionrun'];
  let repo: GitRepo;
  let ns: string;
  let previousCa: string | undefined;

  const git = async (...args: string[]) =>
    (
      await exec('git', ['-C', repo.bareDir, ...args], {
        env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' },
      })
    ).stdout.trim();
  const show = (path: string, rev = 'main') => git('show', `${rev}:${path}`);
  const binding = (name: string, environment: string, snapshot: string, components = ['web']) =>
    f.create(Kind.SnapshotEnvironmentBinding, ns, name, {
      spec: {
        application: 'shop',
        environment,
        snapshot,
        components: components.map((c) => ({ name: c })),
      },
    });
  const get = (name: string) => f.get(Kind.SnapshotEnvironmentBinding, ns, name);
  /** What the host was told of (ctx.onPushed): the backend refreshes the Applications of each. */
  const pushes: PushedCommit[] = [];
  /** The binding once its repo condition is about its current generation and has `status`. */
  const rendered = (name: string, status: 'True' | 'False', timeoutMs = 60_000) =>
    eventually(
      `${name}'s GitOps repository condition ${status} for its generation`,
      async () => {
        const b = await get(name);
        const c = repoCondition(b);
        return c && c.status === status && c.observedGeneration === b?.metadata.generation ? b : undefined;
      },
      timeoutMs,
    );
  /** A PromotionRun once Complete with Failure: its condition's and its step's messages. */
  const endedInFailure = (name: string) =>
    eventually(
      `${name} Complete with Failure`,
      async () => {
        const r = statusOf(await f.get(Kind.PromotionRun, ns, name)) as {
          state?: string;
          completionResult?: string;
          conditions?: { status: string; message: string }[];
          environmentStatus?: { status: string; displayStatus: string }[];
        };
        if (r.state !== 'Complete') return undefined;
        assert.equal(r.completionResult, 'Failure');
        assert.equal(r.conditions?.[0]?.status, 'True');
        assert.equal(r.environmentStatus?.[0]?.status, 'Failed');
        return {
          condition: r.conditions?.[0]?.message ?? '',
          step: r.environmentStatus?.[0]?.displayStatus ?? '',
        };
      },
      120_000,
    );
  const environment = (name: string, env: { name: string; value: string }[] = []) =>
    f.create(Kind.Environment, ns, name, {
      spec: { displayName: name, deploymentStrategy: 'Manual', configuration: { env } },
    });
  const snapshot = (name: string, image: string, more: Record<string, string> = {}) =>
    f.create(Kind.Snapshot, ns, name, {
      spec: {
        application: 'shop',
        components: [
          { name: 'web', containerImage: image },
          ...Object.entries(more).map(([name, containerImage]) => ({ name, containerImage })),
        ],
      },
    });

  beforeAll(async () => {
    server = await startGitServer();
    previousCa = process.env.GIT_SSL_CAINFO;
    process.env.GIT_SSL_CAINFO = server.caFile;
    repo = await createGitRepo(server.reposDir, 'gitops', base);
    server.setPassword('gitops', USER, PASSWORD);
    ns = await f.createNamespace('render');
    await f.create(Kind.Secret, ns, 'gitops-write', {
      type: 'Opaque',
      stringData: { username: USER, password: PASSWORD },
    });
    await f.create(Kind.GitOpsDeploymentRepositoryCredential, ns, 'gitops', {
      spec: { repository: server.url('gitops'), secret: 'gitops-write' },
    });
    await f.create(Kind.Application, ns, 'shop', {
      metadata: { annotations: { [RENDER_ANNOTATION]: 'true' } },
      spec: { displayName: 'shop', gitOpsRepository: { url: server.url('gitops'), branch: 'main' } },
    });
    await environment('dev', [{ name: 'MODE', value: 'development' }]);
    await environment('staging');
    await snapshot('s1', S1, { api: `${IMAGE}-api:1` });
    await snapshot('s2', S2);
    await snapshot('s2-again', S2);
    await f.start({ onPushed: async (push) => void pushes.push(push) }, { only: features });
  }, 120_000);

  afterAll(async () => {
    await f.cleanup();
    await sshServer?.stop();
    await server?.stop();
    if (previousCa === undefined) delete process.env.GIT_SSL_CAINFO;
    else process.env.GIT_SSL_CAINFO = previousCa;
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

  it("renders over SSH with the RepositoryCredential's sshPrivateKey; a key the server does not know is a credentials condition", async () => {
    sshServer = await startGitSshServer({ reposDir: server.reposDir });
    const key = await generateSshKey();
    sshKey = key;
    sshServer.authorize(key.publicKey);
    await f.create(Kind.Secret, ns, 'gitops-ssh', {
      type: 'Opaque',
      stringData: { sshPrivateKey: key.privateKey },
    });
    await f.create(Kind.GitOpsDeploymentRepositoryCredential, ns, 'gitops-ssh', {
      spec: { repository: sshServer.url('gitops'), secret: 'gitops-ssh' },
    });
    await f.create(Kind.Application, ns, 'shop-ssh', {
      metadata: { annotations: { [RENDER_ANNOTATION]: 'true' } },
      spec: { displayName: 'shop-ssh', gitOpsRepository: { url: sshServer.url('gitops') } },
    });
    await environment('ssh-env');
    await f.create(Kind.SnapshotEnvironmentBinding, ns, 'shop-ssh-env', {
      spec: {
        application: 'shop-ssh',
        environment: 'ssh-env',
        snapshot: 's1',
        components: [{ name: 'web' }],
      },
    });
    const b = await rendered('shop-ssh-env', 'True');
    assert.equal(
      (statusOf(b).components as { gitopsRepository: { commitID: string; path: string } }[])[0]
        ?.gitopsRepository.commitID,
      await repo.head(),
    );
    assert.match(await show('components/web/overlays/ssh-env/kustomization.yaml'), /digest: sha256:1{64}/);
    assert.match(await git('log', '-1', '--format=%B'), /^Promote Snapshot s1 to Environment ssh-env\n/);

    const other = await generateSshKey();
    otherKey = other;
    await f.patch(Kind.Secret, ns, 'gitops-ssh', { stringData: { sshPrivateKey: other.privateKey } });
    await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-ssh-env', { spec: { snapshot: 's2' } });
    const refused = await rendered('shop-ssh-env', 'False');
    assert.match(
      String(repoCondition(refused)?.message),
      /^the credentials for the GitOps repository ssh:\/\/127\.0\.0\.1:\d+\/gitops\.git \(branch main\) were refused/,
    );
    const shown = JSON.stringify([await get('shop-ssh-env'), await f.events(ns, 'shop-ssh-env')]);
    for (const secret of [key.privateKey, other.privateKey])
      assert.ok(
        !shown.includes(secret.split('\n')[1] ?? 'unreachable'),
        'no private key in status or Events',
      );
  });

  it('with known hosts configured (GITOPS_SSH_KNOWN_HOSTS_FILE) the SSH server must present their key: the matching one renders; another key, or none listed for the host, is a HostKeyNotTrusted condition and nothing is pushed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'known-hosts-'));
    const knownHosts = join(dir, 'ssh_known_hosts');
    await writeFile(knownHosts, `${sshServer.knownHostsLine}\n`);
    // The key the server knows again; shop-ssh-env waits at s2 (refused above).
    await f.patch(Kind.Secret, ns, 'gitops-ssh', { stringData: { sshPrivateKey: sshKey.privateKey } });
    await f.stop();
    await f.start({ sshKnownHostsFile: knownHosts }, { only: features });
    try {
      const b = await rendered('shop-ssh-env', 'True', 90_000);
      const head = await repo.head();
      assert.equal(
        (statusOf(b).components as { gitopsRepository: { commitID: string } }[])[0]?.gitopsRepository
          .commitID,
        head,
      );
      assert.match(await show('components/web/overlays/ssh-env/kustomization.yaml'), /newTag: "2.0"/);

      // The server's address with another key: ssh refuses it (a changed host key), nothing is pushed.
      const host = sshServer.knownHostsLine.split(' ')[0] ?? '';
      await writeFile(knownHosts, `${host} ${otherKey.publicKey}\n`);
      await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-ssh-env', { spec: { snapshot: 's1' } });
      const changed = await rendered('shop-ssh-env', 'False');
      assert.equal(repoCondition(changed)?.reason, 'HostKeyNotTrusted');
      assert.match(
        String(repoCondition(changed)?.message),
        /^the SSH host key of the GitOps repository ssh:\/\/\S+ \(branch main\) is not trusted \(not the key GITOPS_SSH_KNOWN_HOSTS_FILE lists for it\): fetching branch main: Host key for \[127\.0\.0\.1\]:\d+ has changed and you have requested strict checking\. the server's key is SHA256:\S+$/,
      );
      assert.equal(await repo.head(), head);
      assert.match(await show('components/web/overlays/ssh-env/kustomization.yaml'), /newTag: "2.0"/);

      // No key for the host at all: refused too (strict, not trust on first use).
      await writeFile(knownHosts, '');
      await f.patch(Kind.SnapshotEnvironmentBinding, ns, 'shop-ssh-env', { spec: { snapshot: 's2-again' } });
      const unknown = await rendered('shop-ssh-env', 'False');
      assert.equal(repoCondition(unknown)?.reason, 'HostKeyNotTrusted');
      assert.match(String(repoCondition(unknown)?.message), /host key is known for \[127\.0\.0\.1\]:\d+/);
      assert.equal(await repo.head(), head);
    } finally {
      await f.stop();
      await f.start({}, { only: features });
      await rm(dir, { recursive: true, force: true });
    }
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
