/**
 * Rendering over SSH against the real API server and a real SSH Git server beside the HTTPS one of the
 * scenario (testing/render-scenario.ts): the RepositoryCredential's `sshPrivateKey` authenticates, a key the
 * server does not know is a credentials condition, and with GITOPS_SSH_KNOWN_HOSTS_FILE only the host key it
 * lists is trusted. (Over HTTPS: render.int.test.ts.)
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type GitRepo,
  type GitServer,
  type GitSshServer,
  generateSshKey,
  startGitSshServer,
} from '@gitops/local-env';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { Kind } from '../testing/appstudio-fixture.ts';
import { repoCondition, statusOf, useRenderScenario } from '../testing/render-scenario.ts';
import { RENDER_ANNOTATION } from './render.ts';

describe('rendering a Snapshot into the GitOps repository over SSH', () => {
  const scenario = useRenderScenario();
  const { f, features, git, show, get, rendered, environment } = scenario;
  let server: GitServer;
  let repo: GitRepo;
  let ns: string;
  beforeAll(() => {
    ({ server, repo, ns } = scenario);
  });
  let sshServer: GitSshServer;
  /** The key the SSH server knows, and another one. */
  let sshKey: { privateKey: string; publicKey: string };
  let otherKey: { privateKey: string; publicKey: string };
  afterAll(async () => {
    await sshServer?.stop();
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
});
