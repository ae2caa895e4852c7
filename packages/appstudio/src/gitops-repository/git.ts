import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type GitCredentials, gitEnvironment, runGit, scrubString } from '@gitops/shared';
import { DEFAULT_RENDER_GIT_TIMEOUT_MS } from '../context.ts';

export type { GitCredentials };

/**
 * The default limit of one git command (GITOPS_RENDER_GIT_TIMEOUT): a fetch of a GitOps repository's whole
 * history from a slow server must fit; past it the command ends in `unreachable`, retried with backoff.
 */
export const GIT_COMMAND_TIMEOUT_MS = DEFAULT_RENDER_GIT_TIMEOUT_MS;

export interface GitOptions {
  /** The limit of one git command (default GIT_COMMAND_TIMEOUT_MS). */
  readonly timeoutMs?: number;
  /**
   * An OpenSSH known_hosts file (GITOPS_SSH_KNOWN_HOSTS_FILE): SSH servers must present one of its keys.
   * Unset: a server's key is accepted on first use.
   */
  readonly sshKnownHostsFile?: string;
}

/** Who the rendered commits are by. */
export const COMMIT_AUTHOR = { name: 'GitOps Service', email: 'gitops-service@managed-gitops.redhat.com' };

/** Why a git command failed, as far as its output tells. */
export type GitFailure =
  /** Someone pushed first: fetch again, render again, push again. */
  | 'conflict'
  /** The server refused the push: a protected branch, a hook, no write access. */
  | 'refused'
  /** The credentials were refused (or none were given where some are needed). */
  | 'auth'
  /** The SSH server's host key is not one the known hosts trust (changed, or not listed). */
  | 'hostKey'
  /** The repository or the branch does not exist. */
  | 'notFound'
  /** Timeout, connection refused, 5xx, DNS: worth trying again later. */
  | 'unreachable';

export class GitError extends Error {
  readonly failure: GitFailure;
  constructor(failure: GitFailure, message: string) {
    super(message);
    this.name = 'GitError';
    this.failure = failure;
  }
}

const PATTERNS: [GitFailure, RegExp][] = [
  ['hostKey', /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|host key is known for/i],
  ['conflict', /\[rejected\].*\((fetch first|non-fast-forward)\)|failed to update ref|cannot lock ref/i],
  ['refused', /pre-receive hook declined|\[remote rejected\]|protected branch|returned error: 403|\b403\b/i],
  [
    'auth',
    /authentication failed|could not read (username|password)|returned error: 401|\b401\b|Permission denied \(publickey|terminal prompts disabled/i,
  ],
  [
    'notFound',
    /couldn't find remote ref|repository not found|returned error: 404|does not appear to be a git repository|not found/i,
  ],
];

/** What git's error output says (pure; exported for tests). */
export function classifyGitFailure(stderr: string): GitFailure {
  for (const [failure, pattern] of PATTERNS) if (pattern.test(stderr)) return failure;
  return 'unreachable';
}

/** A URL without its user information (`https://user:token@host/x` → `https://host/x`). */
export function withoutUserInfo(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/i, '$1');
}

/** The lines of git's output worth showing, without credentials or URLs' user information. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = scrubString(text).replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, '$1');
  for (const secret of secrets) if (secret.length >= 4) out = out.split(secret).join('***');
  return out
    .split('\n')
    .map((line) => line.replace(/^(remote|error|fatal|hint):\s*/i, '').trim())
    .filter(
      (line) => line !== '' && !/^(To |hint|Everything up-to-date|Warning: Permanently added)/.test(line),
    )
    .slice(0, 4)
    .join('; ')
    .slice(0, 400);
}

/**
 * What ssh says about a host key it refused, in one line: its verdict (`Host key for <host> has changed and
 * you have requested strict checking.` or `No ED25519 host key is known for <host> ...`) and the fingerprint of
 * the key the server sent, without ssh's banner or the known_hosts file's path.
 */
export function hostKeyProblem(stderr: string): string {
  const lines = stderr.split('\n').map((line) => line.trim());
  const verdict = lines.find((line) =>
    /^(Host key for .* has changed|No .* host key is known for)/.test(line),
  );
  const fingerprint = lines.find((line) => /^SHA256:\S+$/.test(line))?.replace(/\.$/, '');
  return [
    verdict ?? 'Host key verification failed.',
    ...(fingerprint ? [`the server's key is ${fingerprint}`] : []),
  ]
    .join(' ')
    .slice(0, 400);
}

/** A checkout of one branch of one repository, in a private temp folder; `dispose` removes it. */
export interface WorkTree {
  readonly dir: string;
  /** The commit the branch pointed at when fetched (or last committed here). */
  head(): Promise<string>;
  /** The object `rev:path` names (a tree's hash), or undefined when there is none. */
  objectAt(rev: string, path: string): Promise<string | undefined>;
  /** Whether commit `a` is an ancestor of (or equal to) commit `b`; false when either is unknown here. */
  isAncestor(a: string, b: string): Promise<boolean>;
  /** Stages everything; commits when something changed. Returns the new commit, or undefined. */
  commitAll(message: string): Promise<string | undefined>;
  /** Pushes HEAD to the branch; throws GitError (`conflict` when someone pushed first). */
  push(): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * Fetches `branch` of `url` into a fresh work tree.
 * @throws GitError (`notFound` for a missing repository or branch, `auth`, `unreachable`).
 */
export async function checkout(
  url: string,
  branch: string,
  credentials: GitCredentials,
  options: GitOptions = {},
): Promise<WorkTree> {
  const timeoutMs = options.timeoutMs ?? GIT_COMMAND_TIMEOUT_MS;
  const home = await mkdtemp(join(tmpdir(), 'gitops-render-'));
  await chmod(home, 0o700);
  const dir = join(home, 'tree');
  const secrets = [credentials.password ?? '', credentials.sshPrivateKey ?? ''];
  const env = await gitEnvironment(home, credentials, {
    sshKnownHostsFile: options.sshKnownHostsFile,
    config: [
      ['protocol.file.allow', 'always'],
      ['user.name', COMMIT_AUTHOR.name],
      ['user.email', COMMIT_AUTHOR.email],
      ['commit.gpgSign', 'false'],
    ],
  });

  const run = (args: string[], cwd: string) => runGit(args, { env, cwd, timeoutMs });

  const git = async (what: string, args: string[], cwd = dir): Promise<string> => {
    const out = await run(args, cwd);
    if (out.code === 0) return out.stdout.trim();
    if (out.timedOut) throw new GitError('unreachable', `${what}: no answer within ${timeoutMs / 1000}s`);
    if (out.missing) throw new GitError('unreachable', `${what}: ${out.stderr}`);
    const failure = classifyGitFailure(out.stderr);
    if (failure === 'hostKey') throw new GitError(failure, `${what}: ${hostKeyProblem(out.stderr)}`);
    throw new GitError(failure, `${what}: ${redact(out.stderr, secrets)}`);
  };

  try {
    await git('git init', ['init', '-q', dir], home);
    await git('git remote', ['remote', 'add', 'origin', url]);
    try {
      await git(`fetching branch ${branch}`, ['fetch', '-q', '--no-tags', 'origin', `refs/heads/${branch}`]);
    } catch (err) {
      // A repository that answers but has no such branch says "couldn't find remote ref".
      if (err instanceof GitError && err.failure === 'notFound' && /remote ref/i.test(err.message))
        throw new GitError('notFound', `branch ${branch} does not exist in the repository`);
      throw err;
    }
    await git('git checkout', ['checkout', '-q', '-B', branch, 'FETCH_HEAD']);
  } catch (err) {
    await rm(home, { recursive: true, force: true });
    throw err;
  }

  return {
    dir,
    head: () => git('git rev-parse', ['rev-parse', 'HEAD']),
    async objectAt(rev, path) {
      const out = await run(['rev-parse', '--verify', '-q', `${rev}:${path}`], dir);
      return out.code === 0 ? out.stdout.trim() : undefined;
    },
    async isAncestor(a, b) {
      return (await run(['merge-base', '--is-ancestor', a, b], dir)).code === 0;
    },
    async commitAll(message) {
      await git('git add', ['add', '-A']);
      if ((await git('git status', ['status', '--porcelain'])) === '') return undefined;
      await git('git commit', ['commit', '-q', '-m', message]);
      return git('git rev-parse', ['rev-parse', 'HEAD']);
    },
    async push() {
      await git(`pushing to branch ${branch}`, ['push', '-q', 'origin', `HEAD:refs/heads/${branch}`]);
    },
    dispose: () => rm(home, { recursive: true, force: true }),
  };
}
