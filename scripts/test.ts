/**
 * `pnpm test`: runs the tests with vitest (vitest.config.ts: one project per package, tier 3a, tier 3b).
 * The global setup (packages/test-support/src/global-setup.ts) starts one real PostgreSQL and one real
 * control plane for the whole run when any selected file needs them, and workers get their addresses.
 *
 *   node scripts/test.ts                   unit + integration tests of every package and tier 3a
 *   node scripts/test.ts --unit            unit tests only (no PostgreSQL, no API server)
 *   node scripts/test.ts --e2e             tier 3b (`pnpm test:e2e`): e2e/tier3b with a real Argo CD per test
 *                                          file (builds Argo CD once: tools/argocd/build.sh), 2 files at once
 *   node scripts/test.ts --cluster         tier 4 (`pnpm test:cluster`): builds the images first (scripts/images.sh),
 *                                          then e2e/tier4 on a real kubelet + containerd node, one file at a time
 *   node scripts/test.ts --chaos           the chaos tier (`pnpm test:chaos`): e2e/chaos, the whole system with its own
 *                                          PostgreSQL, control plane and Argo CD under churn and injected faults
 *                                          (builds Argo CD once), one file at a time
 *   node scripts/test.ts --project <name>  one project (a package's `pnpm test`: `api`, `backend`, `tier3a`...)
 *   node scripts/test.ts <path>...         only these files (any project; infrastructure started when any is
 *                                          *.int.test.ts or e2e)
 *
 * `GITOPS_TEST_CONCURRENCY` sets how many files run at once (default 3, 2 for tier 3b).
 */
import { spawn, spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { repoRoot } from '@gitops/local-env';

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const projects: string[] = [];
const files: string[] = [];
for (let i = 0; i < args.length; i++) {
  const arg = args[i]!;
  if (arg === '--project') projects.push(args[++i] ?? '');
  else if (!arg.startsWith('--')) files.push(resolve(process.cwd(), arg));
}

const packages = [
  'api',
  'shared',
  'db',
  'local-env',
  'test-support',
  'appstudio',
  'backend',
  'cluster-agent',
  'rhoas-operator',
  'cli',
];
const vitestArgs = ['run'];
if (files.length > 0) {
  // Explicit files: whatever project they belong to.
  vitestArgs.push(...files);
} else if (flag('--e2e')) {
  vitestArgs.push('--project', 'tier3b');
} else if (flag('--cluster')) {
  vitestArgs.push('--project', 'tier4');
} else if (flag('--chaos')) {
  vitestArgs.push('--project', 'chaos');
} else if (projects.length > 0) {
  for (const p of projects) vitestArgs.push('--project', p);
} else {
  for (const p of [...packages, ...(flag('--unit') ? [] : ['tier3a'])]) vitestArgs.push('--project', p);
}
if (flag('--unit')) vitestArgs.push('--exclude', '**/*.int.test.ts');

const env = { ...process.env };
if (flag('--e2e')) env.GITOPS_TEST_CONCURRENCY ??= '2';
// Each chaos file runs the whole system and restarts its infrastructure: one at a time.
if (flag('--chaos')) env.GITOPS_TEST_CONCURRENCY = '1';
if (flag('--cluster')) {
  // One node per machine: one file at a time. The images come from this checkout.
  env.GITOPS_TEST_CONCURRENCY = '1';
  const images = spawnSync('bash', [resolve(repoRoot, 'scripts/images.sh')], { stdio: 'inherit', env });
  if (images.status !== 0) process.exit(images.status ?? 1);
}

const started = Date.now();
const child = spawn(process.execPath, [resolve(repoRoot, 'node_modules/vitest/vitest.mjs'), ...vitestArgs], {
  stdio: 'inherit',
  env,
  cwd: repoRoot,
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  process.stderr.write(`[test] test wall time ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  process.exit(code ?? (signal ? 1 : 0));
});
