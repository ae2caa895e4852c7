/**
 * `pnpm bench`: runs the benchmarks in e2e/bench/ against a local PostgreSQL and control plane started here.
 * Figures are printed as JSON lines (never pass/fail). `pnpm bench <file>` runs one benchmark.
 */
import { spawn } from 'node:child_process';
import { glob } from 'node:fs/promises';
import { resolve } from 'node:path';
import { prepareTemplateDatabase } from '@gitops/db/testing';
import { repoRoot, startControlPlane, startPostgres } from '@gitops/local-env';

const say = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const files: string[] = process.argv.slice(2).map((f) => resolve(process.cwd(), f));
if (files.length === 0)
  for await (const f of glob('e2e/bench/*.bench.ts', { cwd: repoRoot })) files.push(resolve(repoRoot, f));

const [postgres, controlPlane] = await Promise.all([
  startPostgres({ forceEmbedded: !process.env.DATABASE_URL, statementStatistics: true }),
  startControlPlane({ log: (l) => (l.startsWith('[') ? undefined : say(l)) }),
]);
const teardown = async () => {
  await controlPlane.stop().catch(() => {});
  await postgres.stop().catch(() => {});
};
process.on('SIGINT', () => void teardown().then(() => process.exit(130)));
let code = 0;
try {
  const template = `gitops_template_${process.pid}`;
  await prepareTemplateDatabase(postgres.url, template);
  const env = {
    ...process.env,
    KUBECONFIG: controlPlane.kubeconfigPath,
    GITOPS_TEST_DATABASE_URL: postgres.url,
    GITOPS_TEST_TEMPLATE_DATABASE: template,
    BENCH_APISERVER_ENDPOINT: JSON.stringify(controlPlane.endpoint),
    E2E_LOG_LEVEL: process.env.E2E_LOG_LEVEL ?? 'warn',
  };
  for (const file of files.sort()) {
    say(`running ${file}`);
    const exit = await new Promise<number>((r) => {
      const child = spawn(process.execPath, [file], { stdio: 'inherit', env, cwd: repoRoot });
      child.on('exit', (c) => r(c ?? 1));
    });
    if (exit !== 0) code = exit;
  }
} finally {
  await teardown();
}
process.exit(code);
