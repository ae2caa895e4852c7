/**
 * Vitest global setup (vitest.config.ts): starts the test run's infrastructure once per run, in a child
 * process (infrastructure.ts: one embedded PostgreSQL, one control plane, the migrated template database
 * every test file clones, and the Argo CD binary when tier 3b files are selected), and stops it at the end.
 * Workers receive the connection details through `provide` (`gitopsTestEnv`, copied into `process.env` by
 * worker-setup.ts). Nothing is started when every selected file is a unit test.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { hasOwnInfrastructure, isUnitTestFile, needsArgoCd } from './test-files.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Environment variables every test file sees (KUBECONFIG, GITOPS_TEST_DATABASE_URL, ...). */
    gitopsTestEnv: Record<string, string>;
  }
}

const infrastructure = fileURLToPath(new URL('./infrastructure.ts', import.meta.url));

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The files of this run (collected before the global setup runs). Experimental API: when it gives
  // nothing, start the infrastructure rather than fail every integration test.
  const files = project.vitest.state.getPaths();
  const needsInfra = files.length === 0 || files.some((f) => !isUnitTestFile(f) && !hasOwnInfrastructure(f));
  if (!needsInfra) return async () => {};

  const child = spawn(process.execPath, [infrastructure, ...(files.some(needsArgoCd) ? ['--argocd'] : [])], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const ready = new Promise<Record<string, string>>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.startsWith('READY '))
        resolve(JSON.parse(line.slice('READY '.length)) as Record<string, string>);
    });
    void exited.then(([code]) =>
      reject(new Error(`the test infrastructure exited (code ${code}) before it was ready`)),
    );
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    project.provide('gitopsTestEnv', await ready);
  } catch (error) {
    await stop();
    throw error;
  }
  return stop;
}
