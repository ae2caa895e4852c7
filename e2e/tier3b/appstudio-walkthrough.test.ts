/**
 * Tier 3b: the App Studio README's walkthrough, run as written. The `sh` block of its "Walkthrough" section is
 * taken from packages/appstudio/README.md and run with bash against the whole system (backend, agent, a real
 * Argo CD), the way a user pastes it next to `pnpm dev`: so the README cannot drift from what works. The
 * walkthrough's objects carry no shard label, so this file's backend runs unsharded (it serves only
 * unlabelled objects; every other test file labels its own).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppStudioKinds } from '@gitops/api';
import { repoRoot } from '@gitops/local-env';
import { collectionPath, HttpMethod, isNotFound, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { GROUP_VERSION, get, list } from '../fixture/kube.ts';
import { type RealSystem, startRealSystem } from '../fixture/real-argo-cd.ts';

const NAMESPACE = 'team-a';

/** The first ```sh block after the README's "## Walkthrough" heading. */
async function walkthroughScript(): Promise<string> {
  const readme = await readFile(join(repoRoot, 'packages', 'appstudio', 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Walkthrough'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, 'the README has a walkthrough script');
  return block;
}

function bash(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('tier 3b: the App Studio README walkthrough, as written', () => {
  let f: RealSystem;

  const removeNamespace = async () => {
    const kc = f.system.kc;
    // The bindings own the deployments: deleting them first lets Argo CD prune before the namespace goes.
    for (const b of (await list(
      kc,
      collectionPath({ ...AppStudioKinds.SnapshotEnvironmentBinding.resource, namespace: NAMESPACE }),
    ).catch(() => [])) as KubeObject[])
      await kubeRequest(kc, {
        method: HttpMethod.DELETE,
        path: `${collectionPath({ ...AppStudioKinds.SnapshotEnvironmentBinding.resource, namespace: NAMESPACE })}/${b.metadata.name}`,
      }).catch(() => {});
    await eventually(
      'the walkthrough deployments to be gone',
      async () =>
        (await list(kc, `/apis/${GROUP_VERSION}/namespaces/${NAMESPACE}/gitopsdeployments`).catch(() => []))
          .length === 0
          ? true
          : undefined,
      120_000,
    ).catch(() => {});
    await kubeRequest(kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${NAMESPACE}` }).catch(
      () => {},
    );
    await eventually(
      `namespace ${NAMESPACE} to be gone`,
      async () =>
        (await kubeRequest(kc, { method: HttpMethod.GET, path: `/api/v1/namespaces/${NAMESPACE}` }).then(
          () => false,
          (err: unknown) => isNotFound(err),
        ))
          ? true
          : undefined,
      120_000,
    );
  };

  beforeAll(async () => {
    f = await startRealSystem({ backendEnv: { GITOPS_BACKEND_SHARD: '' } });
    await removeNamespace(); // a run that failed half-way may have left it
  });

  afterAll(async () => {
    if (f) await removeNamespace().catch(() => {});
    await f?.stop();
    await rm('/tmp/gitops-work', { recursive: true, force: true });
    await rm('/tmp/gitops-repo.git', { recursive: true, force: true });
  });

  it('promotes shop-1 to staging: rendered, committed, deployed by Argo CD, the run Complete/Success', async ({
    annotate,
  }) => {
    // A fresh HOME: kubectl caches discovery per host:port for hours, and the test API servers reuse ports.
    const home = await mkdtemp(join(tmpdir(), 'walkthrough-home-'));
    const { code, output } = await bash(await walkthroughScript(), {
      PATH: process.env.PATH,
      HOME: home,
      KUBECONFIG: process.env.KUBECONFIG,
    }).finally(() => rm(home, { recursive: true, force: true }));
    await annotate(output);
    assert.equal(code, 0, output);
    assert.match(output, /Promote Snapshot shop-1 to Environment staging/);
    assert.match(output, /images\.example\/example\/web@sha256:0123456789abcdef/);
    const run = await get(
      f.system.kc,
      `${collectionPath({ ...AppStudioKinds.PromotionRun.resource, namespace: NAMESPACE })}/shop-1-to-staging`,
    );
    assert.equal(((run?.status ?? {}) as { completionResult?: string }).completionResult, 'Success');
    const cronJob = await get(f.system.kc, `/apis/batch/v1/namespaces/${NAMESPACE}/cronjobs/web`);
    assert.ok(cronJob, 'the CronJob is deployed');
    const spec = cronJob.spec as {
      jobTemplate: { spec: { template: { spec: { containers: { image: string }[] } } } };
    };
    assert.equal(
      spec.jobTemplate.spec.template.spec.containers[0]?.image,
      `images.example/example/web@sha256:${'0123456789abcdef'.repeat(4)}`,
    );
  });
});
