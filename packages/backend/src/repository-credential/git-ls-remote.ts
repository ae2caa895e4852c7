/**
 * Validates a repository and its credentials the way Argo CD will use them: `git ls-remote` (Debian's git).
 *
 * Credentials never reach a command line, a log line or a message:
 * - username/password: a GIT_ASKPASS helper script prints them from environment variables of the child;
 *   `-c credential.helper=` disables stored helpers, GIT_TERMINAL_PROMPT=0 forbids prompts.
 * - sshPrivateKey: written to a 0600 file in a private temp dir (deleted afterwards) and passed with
 *   GIT_SSH_COMMAND (`StrictHostKeyChecking=accept-new`, BatchMode).
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
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scrubString } from '@gitops/shared';

export interface GitCredentials {
  username?: string;
  password?: string;
  sshPrivateKey?: string;
}

export type LsRemoteOutcome =
  | { result: 'valid' }
  | { result: 'invalidCredentials' }
  | { result: 'invalidUrl'; detail: string }
  | { result: 'unreachable'; detail: string };

/** Default limit of one `git ls-remote` run. */
export const LS_REMOTE_TIMEOUT_MS = 30_000;

const ASKPASS_SCRIPT = `#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' "$GITOPS_GIT_USERNAME" ;;
  *) printf '%s\\n' "$GITOPS_GIT_PASSWORD" ;;
esac
`;

const AUTH_FAILURE =
  /(authentication failed|could not read (username|password)|HTTP Basic: Access denied|The requested URL returned error: (401|403)|\b401\b|\b403\b|Permission denied \(publickey|Permission denied, please try again|Host key verification failed|terminal prompts disabled)/i;
const NOT_FOUND =
  /(repository not found|not found|The requested URL returned error: 404|\b404\b|does not appear to be a git repository|does not exist)/i;

/** What git's error output says (pure; exported for tests). */
export function classifyGitError(stderr: string): 'auth' | 'notFound' | 'other' {
  if (NOT_FOUND.test(stderr) && !/could not read (username|password)/i.test(stderr)) return 'notFound';
  if (AUTH_FAILURE.test(stderr)) return 'auth';
  return 'other';
}

interface RunResult {
  code: number | null;
  stderr: string;
  timedOut: boolean;
}

function run(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<RunResult> {
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn('git', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      // Node's argument checks quote the offending value, which may be a credential in `env`: code only.
      const code = (err as { code?: unknown }).code;
      resolve({ code: -1, stderr: `git could not be started (${String(code ?? 'error')})`, timedOut: false });
      return;
    }
    let stderr = '';
    let timedOut = false;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      if (stderr.length < 16_384) stderr += chunk;
    });
    const kill = () => child.kill('SIGKILL');
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutMs);
    signal?.addEventListener('abort', kill, { once: true });
    const done = (code: number | null) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', kill);
      resolve({ code, stderr, timedOut });
    };
    child.on('error', (err) => {
      stderr += scrubString(String(err.message));
      done(-1);
    });
    child.on('close', (code) => done(code));
  });
}

function baseEnv(home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: home,
    LC_ALL: 'C',
    LANG: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    // The only pass-through: a CA bundle for private Git servers (and the tests' local HTTPS server).
    ...(process.env.GIT_SSL_CAINFO ? { GIT_SSL_CAINFO: process.env.GIT_SSL_CAINFO } : {}),
    GIT_SSH_COMMAND: `ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=${join(home, 'known_hosts')}`,
  };
}

const GIT_ARGS = (url: string) => [
  '-c',
  'credential.helper=',
  '-c',
  'core.askPass=',
  'ls-remote',
  '--heads',
  '--',
  url,
];

/**
 * Runs `git ls-remote` against `url` with `credentials` and classifies the outcome (rule above).
 * Never throws for git failures; only for local I/O problems (temp files).
 */
export async function lsRemote(
  url: string,
  credentials: GitCredentials,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<LsRemoteOutcome> {
  const timeoutMs = options.timeoutMs ?? LS_REMOTE_TIMEOUT_MS;
  const dir = await mkdtemp(join(tmpdir(), 'gitops-ls-remote-'));
  try {
    await chmod(dir, 0o700);
    const env = baseEnv(dir);
    if (credentials.sshPrivateKey !== undefined) {
      const keyFile = join(dir, 'id');
      const key = credentials.sshPrivateKey.endsWith('\n')
        ? credentials.sshPrivateKey
        : `${credentials.sshPrivateKey}\n`;
      await writeFile(keyFile, key, { mode: 0o600 });
      env.GIT_SSH_COMMAND = `${env.GIT_SSH_COMMAND} -o IdentitiesOnly=yes -i ${keyFile}`;
    }
    if (credentials.username !== undefined || credentials.password !== undefined) {
      const askPass = join(dir, 'askpass.sh');
      await writeFile(askPass, ASKPASS_SCRIPT, { mode: 0o700 });
      env.GIT_ASKPASS = askPass;
      env.GITOPS_GIT_USERNAME = credentials.username ?? '';
      env.GITOPS_GIT_PASSWORD = credentials.password ?? '';
    }
    const first = await run(GIT_ARGS(url), env, timeoutMs, options.signal);
    if (first.code === 0) return { result: 'valid' };
    if (first.timedOut) return { result: 'unreachable', detail: 'git ls-remote timed out' };
    const kind = classifyGitError(first.stderr);
    if (kind === 'auth') {
      const anonymous = await run(GIT_ARGS(url), baseEnv(dir), timeoutMs, options.signal);
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
