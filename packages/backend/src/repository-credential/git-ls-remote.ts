/**
 * Validates a repository and its credentials the way Argo CD will use them: `git ls-remote` (Debian's git).
 *
 * Credentials never reach a command line, a log line or a message: the environment is @gitops/shared's
 * `gitEnvironment` (credential helper from the child's environment, the SSH key in a 0600 file of a private
 * temp dir deleted afterwards, SSH host keys from GITOPS_SSH_KNOWN_HOSTS_FILE when set, as the render's).
 *
 * Classification rule (documented in the README):
 * 1. exit 0 → `valid`.
 * 2. git's output says authentication failed (HTTP 401/403, `Authentication failed`, `could not read
 *    Username/Password`, `Permission denied (publickey...)`) → probe again anonymously: if the anonymous
 *    probe says the repository does not exist (HTTP 404 / `not found` / `does not appear to be a git
 *    repository`) → `invalidUrl`, otherwise (it also asks for credentials, or succeeds) → `invalidCredentials`
 *    (the repository exists, our credentials were rejected).
 * 3. anything else (404, not found, DNS failure, connection refused, TLS failure) → `invalidUrl`.
 * 4. the timeout → `unreachable` (retried with backoff, reported as InvalidRepositoryUrl meanwhile).
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type GitCredentials, gitEnvironment, runGit } from '@gitops/shared';

export type { GitCredentials };

export type LsRemoteOutcome =
  | { result: 'valid' }
  | { result: 'invalidCredentials' }
  | { result: 'invalidUrl'; detail: string }
  | { result: 'unreachable'; detail: string };

/** Default limit of one `git ls-remote` run. */
export const LS_REMOTE_TIMEOUT_MS = 30_000;

const AUTH_FAILURE =
  /(authentication failed|could not read (username|password)|HTTP Basic: Access denied|The requested URL returned error: (401|403)|\b401\b|\b403\b|Permission denied \(publickey|Permission denied, please try again|Host key verification failed|terminal prompts disabled)/i;
const NOT_FOUND =
  /(repository not found|not found|The requested URL returned error: 404|\b404\b|does not appear to be a git repository|does not exist)/i;

/** ssh refused the server's host key (not in GITOPS_SSH_KNOWN_HOSTS_FILE, or changed). */
const HOST_KEY = /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|host key is known for/i;

/** What git's error output says (pure; exported for tests). */
export function classifyGitError(stderr: string): 'auth' | 'hostKey' | 'notFound' | 'other' {
  if (HOST_KEY.test(stderr)) return 'hostKey';
  if (NOT_FOUND.test(stderr) && !/could not read (username|password)/i.test(stderr)) return 'notFound';
  if (AUTH_FAILURE.test(stderr)) return 'auth';
  return 'other';
}

const GIT_ARGS = (url: string) => ['ls-remote', '--heads', '--', url];

/**
 * Runs `git ls-remote` against `url` with `credentials` and classifies the outcome (rule above).
 * Never throws for git failures; only for local I/O problems (temp files).
 */
export async function lsRemote(
  url: string,
  credentials: GitCredentials,
  options: { timeoutMs?: number; signal?: AbortSignal; sshKnownHostsFile?: string } = {},
): Promise<LsRemoteOutcome> {
  const timeoutMs = options.timeoutMs ?? LS_REMOTE_TIMEOUT_MS;
  const dir = await mkdtemp(join(tmpdir(), 'gitops-ls-remote-'));
  try {
    await chmod(dir, 0o700);
    const env = await gitEnvironment(dir, credentials, options);
    const first = await runGit(GIT_ARGS(url), { env, timeoutMs, signal: options.signal });
    if (first.code === 0) return { result: 'valid' };
    if (first.missing) return { result: 'unreachable', detail: first.stderr };
    if (first.timedOut) return { result: 'unreachable', detail: 'git ls-remote timed out' };
    const kind = classifyGitError(first.stderr);
    if (kind === 'hostKey')
      return {
        result: 'invalidUrl',
        detail: "the SSH server's host key is not one the service trusts (GITOPS_SSH_KNOWN_HOSTS_FILE)",
      };
    if (kind === 'auth') {
      const anonymous = await runGit(GIT_ARGS(url), {
        env: await gitEnvironment(dir, {}, options),
        timeoutMs,
        signal: options.signal,
      });
      if (anonymous.code !== 0 && classifyGitError(anonymous.stderr) === 'notFound') {
        return { result: 'invalidUrl', detail: 'the repository does not exist' };
      }
      return { result: 'invalidCredentials' };
    }
    return {
      result: 'invalidUrl',
      detail: kind === 'notFound' ? 'the repository does not exist' : 'the repository could not be reached',
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
