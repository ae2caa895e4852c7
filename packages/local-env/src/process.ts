import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';

export interface ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Resolves when the process has exited (for any reason). */
  readonly exited: Promise<number | null>;
  /**
   * Resolves once the process has exited and its output streams are closed: only then has every line it
   * wrote reached `onLine` ('exit' may come first). A grandchild that keeps the pipes open delays it.
   */
  readonly closed: Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<ManagedProcess>();
let exitHookInstalled = false;

/** Kills every child we started if this process exits without stopping them (crash, process.exit). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const p of running) p.child.kill('SIGKILL');
  });
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Appends stdout and stderr here. */
  logFile?: string;
  /** Called with every output line (e.g. to print it with a prefix). */
  onLine?: (line: string) => void;
  /** Its own session (setsid): a signal to the caller's process group (e.g. a timeout) does not reach it. */
  detached?: boolean;
}

/** Starts a long-running child process whose output goes to a log file and/or a line callback. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: StartOptions = {},
): ManagedProcess {
  installExitHook();
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  const log = options.logFile ? createWriteStream(options.logFile, { flags: 'a' }) : undefined;
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    if (log) stream.pipe(log, { end: false });
    if (options.onLine) {
      const onLine = options.onLine;
      createInterface({ input: stream }).on('line', onLine);
    }
  }
  const exited = new Promise<number | null>((resolveExit) => {
    child.on('exit', (code, signal) => {
      running.delete(managed);
      log?.end();
      resolveExit(code ?? (signal ? -1 : null));
    });
    child.on('error', () => {
      running.delete(managed);
      resolveExit(-1);
    });
  });
  const closed = new Promise<void>((resolveClosed) => {
    child.on('close', () => resolveClosed());
    child.on('error', () => resolveClosed());
  });
  const managed: ManagedProcess = {
    name,
    child,
    exited,
    closed,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  running.add(managed);
  return managed;
}

/** Polls `check` until it returns true; fails with the process's name if it exits first or time runs out. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  {
    timeoutMs = 120_000,
    intervalMs = 200,
    process: proc,
  }: { timeoutMs?: number; intervalMs?: number; process?: ManagedProcess } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  proc?.exited.then(() => {
    exited = true;
  });
  for (;;) {
    if (exited) throw new Error(`${proc?.name} exited while waiting for ${what}`);
    try {
      if (await check()) return;
    } catch {
      // not ready yet
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Node flags the backend and the cluster-agent run with (`pnpm dev`, the tier 3 system, `pnpm bench`; the
 * manifests' and docker-compose's `command` carry the same): a young generation of 4 MB semi-spaces instead
 * of V8's default 16+ MB, and V8's heap sizing that favours memory over speed. Together they keep the peak
 * resident memory of these allocation-heavy, mostly idle services near what they hold at rest (about 150 MB
 * less at 1,000 deployments) at no cost visible in `pnpm bench` (docs/performance.md).
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--optimize-for-size'];
