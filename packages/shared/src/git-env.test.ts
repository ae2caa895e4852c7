import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { GIT_MISSING, gitEnvironment, runGit } from './git-env.ts';

describe('running git with a tenant’s credentials', () => {
  let home: string;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'git-env-test-'));
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('keeps credentials out of the command line: the password in the child’s environment, the key in a 0600 file', async () => {
    const env = await gitEnvironment(
      home,
      { username: 'jane', password: 's3cret', sshPrivateKey: 'KEY' },
      { sshKnownHostsFile: '/etc/ssh/known' },
    );
    assert.equal(env.GITOPS_GIT_PASSWORD, 's3cret');
    assert.doesNotMatch(env.GIT_SSH_COMMAND ?? '', /s3cret|KEY/);
    assert.match(
      env.GIT_SSH_COMMAND ?? '',
      /StrictHostKeyChecking=yes .*UserKnownHostsFile='\/etc\/ssh\/known'/,
    );
    assert.equal((await stat(join(home, 'id'))).mode & 0o777, 0o600);
    assert.equal(await readFile(join(home, 'id'), 'utf8'), 'KEY\n');
  });

  it('runs git, and says plainly when git is not installed (not a repository that cannot be reached)', async () => {
    const env = await gitEnvironment(home, {});
    const ok = await runGit(['--version'], { env, timeoutMs: 30_000 });
    assert.equal(ok.code, 0);
    assert.match(ok.stdout, /^git version/);
    const noGit = await runGit(['--version'], { env: { ...env, PATH: home }, timeoutMs: 30_000 });
    assert.deepEqual(noGit, { code: -1, stdout: '', stderr: GIT_MISSING, timedOut: false, missing: true });
  });
});
