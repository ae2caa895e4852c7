/** Test support: the CLI as a child process (src/main.ts, as `kubectl gitops` runs it), its output and exit code. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const mainPath = fileURLToPath(new URL('../main.ts', import.meta.url));
export const wrapperPath = fileURLToPath(new URL('../../bin/kubectl-gitops', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The command line, for assertion messages. */
  argv: string[];
}

/**
 * Runs `main.ts <args>` with exactly `env` (plus PATH and HOME), or `command` instead of node + main.ts (the
 * wrapper script). Resolves once the process has closed its output.
 */
export function runCli(
  args: readonly string[],
  env: Record<string, string | undefined>,
  options: { command?: string } = {},
): Promise<CliRun> {
  const [file, argv] = options.command
    ? [options.command, [...args]]
    : [process.execPath, [mainPath, ...args]];
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/' };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[name];
    else childEnv[name] = value;
  }
  const child = spawn(file, argv, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += String(chunk);
  });
  child.stderr.on('data', (chunk) => {
    stderr += String(chunk);
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, argv: [...args] }));
  });
}

/** A one-line description of a run for assertion messages. */
export function described(run: CliRun): string {
  return `kubectl gitops ${run.argv.join(' ')} → exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
}
