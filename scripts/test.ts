/**
 * `pnpm test`: runs every unit and integration test (`packages/* /src/**\/*.test.ts`, tier 3a e2e) against
 * one real PostgreSQL and one real control plane started here for the whole run.
 *
 *   node scripts/test.ts                 all tests
 *   node scripts/test.ts --unit          unit tests only (no PostgreSQL, no API server)
 *   node scripts/test.ts --e2e           tier 3b (`pnpm test:e2e`): e2e/tier3b with a real Argo CD per test file
 *                                        (builds Argo CD once: tools/argocd/build.sh)
 *   node scripts/test.ts <path>...       only these files (infrastructure started when any is *.int.test.ts or e2e)
 */
import { spawn } from 'node:child_process';
import { glob } from 'node:fs/promises';
import { relative, resolve } from 'node:path';
import { prepareTemplateDatabase } from '@gitops/db';
import {
  type ControlPlane,
  ensureArgoCdBinary,
  type PostgresServer,
  repoRoot,
  startControlPlane,
  startPostgres,
} from '@gitops/local-env';

const args = process.argv.slice(2);
const unitOnly = args.includes('--unit');
const e2e = args.includes('--e2e');
const explicit = args.filter((a) => !a.startsWith('--')).map((a) => resolve(process.cwd(), a));

async function collect(): Promise<string[]> {
  if (explicit.length > 0) return explicit;
  const files: string[] = [];
  const patterns = e2e
    ? ['e2e/tier3b/**/*.test.ts']
    : ['packages/*/src/**/*.test.ts', 'e2e/tier3a/**/*.test.ts'];
  for await (const f of glob(patterns, { cwd: repoRoot })) {
    files.push(resolve(repoRoot, f));
  }
  return files.filter((f) => !f.includes('node_modules')).sort();
}

const isUnit = (f: string) => f.endsWith('.test.ts') && !f.endsWith('.int.test.ts') && !f.includes('/e2e/');
const started = Date.now();
const say = (line: string) => process.stderr.write(`[test] ${line}\n`);

let files = await collect();
if (unitOnly) files = files.filter(isUnit);
if (files.length === 0) {
  say('no test files found');
  process.exit(1);
}
const needsInfra = files.some((f) => !isUnit(f));

let postgres: PostgresServer | undefined;
let controlPlane: ControlPlane | undefined;
let stopping = false;
async function teardown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await controlPlane?.stop().catch((e: unknown) => say(`control plane stop failed: ${String(e)}`));
  await postgres?.stop().catch((e: unknown) => say(`postgres stop failed: ${String(e)}`));
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    void teardown().then(() => process.exit(130));
  });
}

const env: NodeJS.ProcessEnv = { ...process.env };
try {
  if (needsInfra) {
    say('starting PostgreSQL and the control plane (the first run builds the control plane: 10-20 min)');
    [postgres, controlPlane] = await Promise.all([
      startPostgres({ forceEmbedded: !process.env.DATABASE_URL }),
      startControlPlane({ log: (l) => (l.startsWith('[') ? undefined : say(l)) }),
    ]);
    if (files.some((f) => f.includes('/e2e/tier3b/'))) {
      say('argo cd: building once if not cached (tools/argocd/build.sh; about 15-25 min cold on 2 cores)');
      env.ARGOCD_BINARY = await ensureArgoCdBinary(say);
      say(`argo cd: ${env.ARGOCD_BINARY}`);
    }
    const template = `gitops_template_${process.pid}`;
    await prepareTemplateDatabase(postgres.url, template);
    Object.assign(env, {
      KUBECONFIG: controlPlane.kubeconfigPath,
      GITOPS_TEST_USER_KUBECONFIG: controlPlane.userKubeconfigPath,
      GITOPS_TEST_DATABASE_URL: postgres.url,
      GITOPS_TEST_TEMPLATE_DATABASE: template,
    });
    say(`infrastructure ready in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  }
  say(`running ${files.length} test files: ${files.map((f) => relative(repoRoot, f)).join(' ')}`);
  const code = await new Promise<number>((resolveCode) => {
    const child = spawn(
      process.execPath,
      [
        '--test',
        '--test-reporter=spec',
        `--test-concurrency=${process.env.GITOPS_TEST_CONCURRENCY ?? (e2e ? '2' : '3')}`,
        `--test-timeout=${e2e ? 900_000 : 300_000}`,
        ...files,
      ],
      { stdio: 'inherit', env, cwd: repoRoot },
    );
    child.on('exit', (c, s) => resolveCode(c ?? (s ? 1 : 0)));
  });
  say(`test wall time ${((Date.now() - started) / 1000).toFixed(1)}s`);
  await teardown();
  process.exit(code);
} catch (error) {
  say(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  await teardown();
  process.exit(1);
}
