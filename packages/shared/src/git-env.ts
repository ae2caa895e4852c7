/**
 * How this service runs the git CLI with a tenant's credentials (the RepositoryCredential check and the
 * GitOps repository render): one environment, built in a private 0700 folder the caller owns and removes.
 *
 * - Nothing from the machine's git or ssh configuration (no system or global config, no prompts, C locale);
 *   the only pass-through is GIT_SSL_CAINFO (a CA bundle for private Git servers).
 * - username/password: a credential helper given by `-c` through GIT_CONFIG_* variables prints them from
 *   variables of the child's environment; never on a command line.
 * - sshPrivateKey: a 0600 file in the folder, named in GIT_SSH_COMMAND (BatchMode, IdentitiesOnly).
 * - SSH host keys: with a known_hosts file (`sshKnownHostsFile`, GITOPS_SSH_KNOWN_HOSTS_FILE) only its keys
 *   are trusted (StrictHostKeyChecking=yes, no global file); without one a key is accepted on first use in
 *   this folder only (accept-new, an empty known_hosts), which the backend warns about at start.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface GitCredentials {
  username?: string;
  password?: string;
  sshPrivateKey?: string;
}

export interface GitEnvOptions {
  /** An OpenSSH known_hosts file; '' or undefined: accept on first use. */
  sshKnownHostsFile?: string;
  /** More `-c` settings for every command (e.g. the commit author). */
  config?: readonly (readonly [string, string])[];
}

/** `text` as one word of a POSIX shell command (GIT_SSH_COMMAND is run by a shell). */
const shellWord = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

function sshCommand(home: string, knownHostsFile: string | undefined, keyFile: string | undefined): string {
  const hostKeys = knownHostsFile
    ? [
        '-o StrictHostKeyChecking=yes',
        `-o UserKnownHostsFile=${shellWord(knownHostsFile)}`,
        '-o GlobalKnownHostsFile=/dev/null',
      ]
    : [
        '-o StrictHostKeyChecking=accept-new',
        `-o UserKnownHostsFile=${shellWord(join(home, 'known_hosts'))}`,
      ];
  const identity = keyFile ? ['-o IdentitiesOnly=yes', `-i ${shellWord(keyFile)}`] : [];
  return ['ssh -o BatchMode=yes', ...hostKeys, ...identity].join(' ');
}

/**
 * The environment of git commands run with `credentials` from the private folder `home` (writes the SSH key
 * there when there is one).
 */
export async function gitEnvironment(
  home: string,
  credentials: GitCredentials,
  options: GitEnvOptions = {},
): Promise<NodeJS.ProcessEnv> {
  const config: (readonly [string, string])[] = [
    ['credential.helper', ''],
    ['core.askPass', ''],
    ...(options.config ?? []),
  ];
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    LC_ALL: 'C',
    LANG: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    ...(process.env.GIT_SSL_CAINFO ? { GIT_SSL_CAINFO: process.env.GIT_SSL_CAINFO } : {}),
  };
  if (credentials.username !== undefined || credentials.password !== undefined) {
    config.push([
      'credential.helper',
      '!f() { test "$1" = get && printf "username=%s\\npassword=%s\\n" "$GITOPS_GIT_USERNAME" "$GITOPS_GIT_PASSWORD"; }; f',
    ]);
    env.GITOPS_GIT_USERNAME = credentials.username ?? '';
    env.GITOPS_GIT_PASSWORD = credentials.password ?? '';
  }
  let keyFile: string | undefined;
  if (credentials.sshPrivateKey !== undefined) {
    keyFile = join(home, 'id');
    const key = credentials.sshPrivateKey;
    await writeFile(keyFile, key.endsWith('\n') ? key : `${key}\n`, { mode: 0o600 });
  }
  env.GIT_SSH_COMMAND = sshCommand(home, options.sshKnownHostsFile || undefined, keyFile);
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

export interface GitRun {
  /** Exit code; -1 when git could not be started. */
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** git is not installed (no `git` on PATH): a problem of this service's image, not of the repository. */
  missing: boolean;
}

/** What a GitRun's stderr says when git is not on PATH. */
export const GIT_MISSING = 'git is not installed where this service runs (no git on PATH)';

/**
 * Runs `git <args>` with `env` (gitEnvironment), killed after `timeoutMs` or on `signal`. Never throws:
 * a git that cannot be started is `missing` (ENOENT) or code -1, with the error's code only (Node's
 * messages may quote the environment, which holds credentials). Output is capped (64 KiB / 16 KiB).
 */
export function runGit(
  args: readonly string[],
  options: { env: NodeJS.ProcessEnv; cwd?: string; timeoutMs: number; signal?: AbortSignal },
): Promise<GitRun> {
  const failed = (code: unknown): GitRun => {
    const missing = code === 'ENOENT';
    return {
      code: -1,
      stdout: '',
      stderr: missing ? GIT_MISSING : `git could not be started (${String(code ?? 'error')})`,
      timedOut: false,
      missing,
    };
  };
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn('git', [...args], {
        cwd: options.cwd,
        env: options.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (err) {
      resolve(failed((err as { code?: unknown }).code));
      return;
    }
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      if (stdout.length < 65_536) stdout += c;
    });
    child.stderr?.setEncoding('utf8').on('data', (c: string) => {
      if (stderr.length < 16_384) stderr += c;
    });
    const kill = () => child.kill('SIGKILL');
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs);
    options.signal?.addEventListener('abort', kill, { once: true });
    let settled = false;
    const settle = (result: GitRun) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', kill);
      resolve(result);
    };
    child.on('error', (err) => settle(failed((err as { code?: unknown }).code)));
    child.on('close', (code) => settle({ code, stdout, stderr, timedOut, missing: false }));
  });
}
