/**
 * Vitest global setup (vitest.config.ts): starts one embedded PostgreSQL and one control plane for the
 * whole run, migrates the template database every test file clones, and, when tier 3b files are selected,
 * makes sure the Argo CD binary is built. Workers receive the connection details through `provide`
 * (`gitopsTestEnv`, copied into `process.env` by worker-setup.ts). Nothing is started when every selected
 * file is a unit test.
 */
import { prepareTemplateDatabase } from '@gitops/db/testing';
import {
  type ControlPlane,
  ensureArgoCdBinary,
  type PostgresServer,
  startControlPlane,
  startPostgres,
} from '@gitops/local-env';
import type { TestProject } from 'vitest/node';
import { isUnitTestFile, needsArgoCd } from './test-files.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Environment variables every test file sees (KUBECONFIG, GITOPS_TEST_DATABASE_URL, ...). */
    gitopsTestEnv: Record<string, string>;
  }
}

const say = (line: string) => process.stderr.write(`[test] ${line}\n`);

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now();
  // The files of this run (collected before the global setup runs). Experimental API: when it gives
  // nothing, start everything rather than fail every integration test.
  const files = project.vitest.state.getPaths();
  const needsInfra = files.length === 0 || files.some((f) => !isUnitTestFile(f));
  if (!needsInfra) return async () => {};

  let postgres: PostgresServer | undefined;
  let controlPlane: ControlPlane | undefined;
  let stopping: Promise<void> | undefined;
  const teardown = () => {
    stopping ??= (async () => {
      await controlPlane?.stop().catch((e: unknown) => say(`control plane stop failed: ${String(e)}`));
      await postgres?.stop().catch((e: unknown) => say(`postgres stop failed: ${String(e)}`));
    })();
    return stopping;
  };
  const onSignal = () => void teardown().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    say('starting PostgreSQL and the control plane (the first run builds the control plane: 10-20 min)');
    [postgres, controlPlane] = await Promise.all([
      startPostgres({ forceEmbedded: !process.env.DATABASE_URL }),
      startControlPlane({ log: (l) => (l.startsWith('[') ? undefined : say(l)) }),
    ]);
    const env: Record<string, string> = {};
    if (files.some(needsArgoCd)) {
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
    project.provide('gitopsTestEnv', env);
    say(`infrastructure ready in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  } catch (error) {
    await teardown();
    throw error;
  }
  return async () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await teardown();
  };
}
