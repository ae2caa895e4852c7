import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type GitServer,
  type GitSshServer,
  generateSshKey,
  startGitServer,
  startGitSshServer,
} from '@gitops/local-env';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { classifyGitError, lsRemote } from './git-ls-remote.ts';

describe('git ls-remote validation against a local Git HTTPS server', () => {
  let git: GitServer;
  let previousCa: string | undefined;

  beforeAll(async () => {
    git = await startGitServer();
    await git.createRepository('public');
    await git.createRepository('private', { username: 'jane', password: 's3cr3t-pw' });
    previousCa = process.env.GIT_SSL_CAINFO;
    process.env.GIT_SSL_CAINFO = git.caFile;
  });
  afterAll(async () => {
    if (previousCa === undefined) delete process.env.GIT_SSL_CAINFO;
    else process.env.GIT_SSL_CAINFO = previousCa;
    await git?.stop();
  });

  it('accepts a private repository with the right username and password', async () => {
    assert.deepEqual(await lsRemote(git.url('private'), { username: 'jane', password: 's3cr3t-pw' }), {
      result: 'valid',
    });
  });

  it('reports rejected credentials for an existing private repository', async () => {
    assert.deepEqual(await lsRemote(git.url('private'), { username: 'jane', password: 'wrong' }), {
      result: 'invalidCredentials',
    });
  });

  it('reports an unknown repository as an invalid URL, with or without credentials', async () => {
    const withCredentials = await lsRemote(git.url('missing'), { username: 'jane', password: 'x' });
    assert.equal(withCredentials.result, 'invalidUrl');
    assert.equal((await lsRemote(git.url('missing'), {})).result, 'invalidUrl');
  });

  it('reports an unreachable server as an invalid URL', async () => {
    const outcome = await lsRemote('https://127.0.0.1:1/nothing.git', { username: 'a', password: 'b' });
    assert.equal(outcome.result, 'invalidUrl');
  });

  it('never throws (and so never lets Node quote the value) for a credential git cannot be given', async () => {
    const outcome = await lsRemote(git.url('private'), { username: 'jane', password: 's3cr3t\u0000pw' });
    assert.deepEqual(outcome, { result: 'invalidUrl', detail: 'the repository could not be reached' });
  });

  it('accepts a public repository with any credentials', async () => {
    assert.deepEqual(await lsRemote(git.url('public'), { username: 'x', password: 'y' }), {
      result: 'valid',
    });
  });

  it('uses an SSH key from a temporary file that is gone afterwards (no sshd here: the server is unreachable)', async () => {
    const previousTmp = process.env.TMPDIR;
    const privateTmp = await mkdtemp(join(tmpdir(), 'ls-remote-test-'));
    process.env.TMPDIR = privateTmp; // os.tmpdir() reads it on each call: only this call's files land here
    try {
      const outcome = await lsRemote('ssh://git@127.0.0.1:1/repo.git', {
        sshPrivateKey:
          '-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----',
      });
      assert.equal(outcome.result, 'invalidUrl');
      assert.deepEqual(await readdir(privateTmp), []);
    } finally {
      if (previousTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previousTmp;
      await rm(privateTmp, { recursive: true, force: true });
    }
  });

  it('classifies git error output', () => {
    assert.equal(classifyGitError("fatal: Authentication failed for 'https://h/r.git/'"), 'auth');
    assert.equal(
      classifyGitError("fatal: could not read Username for 'https://h': terminal prompts disabled"),
      'auth',
    );
    assert.equal(
      classifyGitError("remote: Not found\nfatal: repository 'https://h/r.git/' not found"),
      'notFound',
    );
    assert.equal(classifyGitError('git@h: Permission denied (publickey).'), 'auth');
    assert.equal(
      classifyGitError("fatal: unable to access 'https://h/': Could not resolve host: h"),
      'other',
    );
  });
});

describe('git ls-remote validation against a local Git SSH server, with and without known host keys', () => {
  let git: GitServer;
  let ssh: GitSshServer;
  let key: { privateKey: string; publicKey: string };
  let dir: string;

  beforeAll(async () => {
    git = await startGitServer();
    await git.createRepository('over-ssh');
    ssh = await startGitSshServer({ reposDir: git.reposDir });
    key = await generateSshKey();
    ssh.authorize(key.publicKey);
    dir = await mkdtemp(join(tmpdir(), 'ls-remote-known-hosts-'));
  });
  afterAll(async () => {
    await ssh?.stop();
    await git?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('accepts the key without known hosts (first use), and with known hosts that list the server', async () => {
    const credentials = { sshPrivateKey: key.privateKey };
    assert.deepEqual(await lsRemote(ssh.url('over-ssh'), credentials), { result: 'valid' });
    const knownHosts = join(dir, 'listed');
    await writeFile(knownHosts, `${ssh.knownHostsLine}\n`);
    assert.deepEqual(await lsRemote(ssh.url('over-ssh'), credentials, { sshKnownHostsFile: knownHosts }), {
      result: 'valid',
    });
  });

  it('refuses a server whose host key the known hosts do not list: not "invalid credentials", and the key is not offered', async () => {
    const other = await generateSshKey();
    const host = ssh.knownHostsLine.split(' ')[0] ?? '';
    const knownHosts = join(dir, 'other-key');
    await writeFile(knownHosts, `${host} ${other.publicKey}\n`);
    const before = ssh.logins.accepted + ssh.logins.refused;
    const outcome = await lsRemote(
      ssh.url('over-ssh'),
      { sshPrivateKey: key.privateKey },
      { sshKnownHostsFile: knownHosts },
    );
    assert.deepEqual(outcome, {
      result: 'invalidUrl',
      detail: "the SSH server's host key is not one the service trusts (GITOPS_SSH_KNOWN_HOSTS_FILE)",
    });
    assert.equal(ssh.logins.accepted + ssh.logins.refused, before);
  });
});

describe('git ls-remote where git is not installed', () => {
  it('says so (the check is retried), instead of calling the repository unreachable', async () => {
    const previousPath = process.env.PATH;
    const empty = await mkdtemp(join(tmpdir(), 'no-git-'));
    process.env.PATH = empty;
    try {
      assert.deepEqual(await lsRemote('https://git.example.test/org/repo.git', {}), {
        result: 'unreachable',
        detail: 'git is not installed where this service runs (no git on PATH)',
      });
    } finally {
      process.env.PATH = previousPath;
      await rm(empty, { recursive: true, force: true });
    }
  });
});
