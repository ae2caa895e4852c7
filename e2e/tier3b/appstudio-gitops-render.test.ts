/**
 * Tier 3b, issue 23: promotion that works on its own. Nobody plays App Studio's application service: the
 * backend renders each Snapshot into the Application's GitOps repository (the local HTTPS Git server, push
 * over `git http-backend` with basic auth, credentials from the tenant's RepositoryCredential), the binding
 * turns the commit into GitOpsDeployments, a real Argo CD deploys them, and the PromotionRun completes when
 * they are Synced and Healthy at that commit. The component is a suspended CronJob (its health needs no
 * Pods; tier 3b has no node) whose image the overlays pin; each environment's overlay names it `web-<env>`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { AppStudioKinds } from '@gitops/api';
import {
  createGitRepo,
  type GitRepo,
  type GitServer,
  type GitSshServer,
  generateSshKey,
  startGitServer,
  startGitSshServer,
} from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AppStudioObjects, appStudioObjects, cronJobComponent } from '../fixture/appstudio.ts';
import { GROUP_VERSION, get } from '../fixture/kube.ts';
import { CONVERGE_MS, type RealSystem, startRealSystem } from '../fixture/real-argo-cd.ts';

const exec = promisify(execFile);
/** The Application annotation that asks the service to render its GitOps repository (packages/appstudio README). */
const PASSWORD = 'tier3b-render-Pa55-feed';
const IMAGE = 'images.example/shop/web';
const DIGEST = { s1: `sha256:${'a1'.repeat(32)}`, s2: `sha256:${'b2'.repeat(32)}` } as const;
const ENVIRONMENTS = ['dev', 'staging', 'prod'] as const;
const CART_IMAGE = 'images.example/shop/cart';

const overlay = (env: string) =>
  [
    'resources:',
    '  - ../../base',
    `nameSuffix: -${env}`,
    ...(env === 'dev'
      ? [
          'generatorOptions:',
          '  disableNameSuffixHash: true',
          'configMapGenerator:',
          '  - name: web-environment',
          '    literals: []',
        ]
      : []),
    '',
  ].join('\n');

describe('tier 3b: promotion renders the GitOps repository itself (real Argo CD, HTTPS push)', () => {
  let git: GitServer;
  let ssh: GitSshServer;
  let sshKey: { privateKey: string; publicKey: string };
  let f: RealSystem;
  let tenant: string;
  let repo: GitRepo;

  let apps: AppStudioObjects;
  const bareGit = async (...args: string[]) =>
    (
      await exec('git', ['-C', repo.bareDir, ...args], {
        env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' },
      })
    ).stdout.trim();
  const completed = (name: string) =>
    eventually(
      `PromotionRun ${name} Complete`,
      async () => {
        const r = await apps.read(AppStudioKinds.PromotionRun, name);
        return (r?.status as { state?: string } | undefined)?.state === 'Complete' ? r : undefined;
      },
      CONVERGE_MS * 2,
    );
  const promote = (name: string, snapshot: string, spec: Record<string, unknown>) =>
    apps.create(AppStudioKinds.PromotionRun, name, { snapshot, application: 'shop', ...spec });

  /** What a user checks after a step: the commit, the deployed image, the deployment at that commit. */
  async function deployedAt(env: string, snapshot: 's1' | 's2', run: string): Promise<void> {
    const binding = await apps.read(
      AppStudioKinds.SnapshotEnvironmentBinding,
      `shop-${env}-generated-binding`,
    );
    const components = (
      (binding?.status ?? {}) as { components?: { gitopsRepository: { commitID: string; path: string } }[] }
    ).components;
    const commit = components?.[0]?.gitopsRepository.commitID ?? '';
    assert.equal(components?.[0]?.gitopsRepository.path, `components/web/overlays/${env}`);
    // The commit that last rendered the overlay (the component's commitID follows later commits that leave
    // it alone) says what it promoted, and the overlay pins the image by digest.
    const message = await bareGit('log', '-1', '--format=%B', commit, '--', `components/web/overlays/${env}`);
    assert.match(message, new RegExp(`^Promote Snapshot ${snapshot} to Environment ${env}\\n`));
    assert.match(message, new RegExp(`By: PromotionRun ${run}\\n`));
    assert.match(
      await bareGit('show', `${commit}:components/web/overlays/${env}/kustomization.yaml`),
      new RegExp(`- name: ${IMAGE}\\n {4}digest: ${DIGEST[snapshot]}`),
    );
    // The deployment reached that commit (or a later one: the next environment's commit) and the image runs.
    const deployment = await get(
      f.system.kc,
      `/apis/${GROUP_VERSION}/namespaces/${tenant}/gitopsdeployments/shop-${env}-generated-binding-shop-${env}-web`,
    );
    const sync = ((deployment?.status ?? {}) as { sync?: { status?: string; revision?: string } }).sync;
    assert.equal(sync?.status, 'Synced');
    assert.equal(
      await exec('git', [
        '-C',
        repo.bareDir,
        'merge-base',
        '--is-ancestor',
        commit,
        sync?.revision ?? '',
      ]).then(
        () => true,
        () => false,
      ),
      true,
    );
    const cronJob = await eventually(
      `CronJob web-${env} with the ${snapshot} image`,
      async () => {
        const cj = await get(f.system.kc, `/apis/batch/v1/namespaces/${tenant}/cronjobs/web-${env}`);
        const image = (
          cj?.spec as { jobTemplate: { spec: { template: { spec: { containers: { image: string }[] } } } } }
        )?.jobTemplate.spec.template.spec.containers[0]?.image;
        return image === `${IMAGE}@${DIGEST[snapshot]}` ? cj : undefined;
      },
      CONVERGE_MS,
    );
    assert.ok(cronJob);
  }

  const stepsOf = (run: KubeObject) =>
    (
      (run.status as { environmentStatus: { environmentName: string; status: string }[] })
        .environmentStatus ?? []
    ).map((s) => `${s.environmentName}:${s.status}`);

  beforeAll(async () => {
    git = await startGitServer();
    // The same repositories over SSH (public key), trusted by Argo CD through its known_hosts.
    ssh = await startGitSshServer({ reposDir: git.reposDir });
    sshKey = await generateSshKey();
    ssh.authorize(sshKey.publicKey);
    f = await startRealSystem({
      trustedCertificates: { '127.0.0.1': await readFile(git.caFile, 'utf8') },
      caFile: git.caFile,
      sshKnownHosts: [ssh.knownHostsLine],
    });
    tenant = await f.given.tenant('render');
    apps = appStudioObjects(f.system, tenant);
    const files: Record<string, string> = cronJobComponent('web', IMAGE);
    for (const env of ENVIRONMENTS) files[`components/web/overlays/${env}/kustomization.yaml`] = overlay(env);
    // A second application, rendered over SSH: its component's base is the same kind of CronJob, named `cart`.
    Object.assign(files, cronJobComponent('cart', CART_IMAGE));
    files['components/cart/overlays/dev/kustomization.yaml'] =
      'resources:\n  - ../../base\nnameSuffix: -dev\n';
    repo = await createGitRepo(git.reposDir, 'shop-gitops', files);
    git.setPassword('shop-gitops', 'jane', PASSWORD);
    await f.given.repositoryCredential(
      tenant,
      'shop-gitops',
      { repository: git.url('shop-gitops') },
      { name: 'git-creds', credentials: { username: 'jane', password: PASSWORD } },
    );
    await apps.createRenderedApplication('shop', { url: git.url('shop-gitops'), branch: 'main' }, ['web']);
    for (const [i, env] of ENVIRONMENTS.entries())
      await apps.create(AppStudioKinds.Environment, env, {
        displayName: env,
        deploymentStrategy: 'AppStudioAutomated',
        ...(i > 0 ? { parentEnvironment: ENVIRONMENTS[i - 1] } : {}),
        ...(env === 'dev' ? { configuration: { env: [{ name: 'MODE', value: 'development' }] } } : {}),
      });
    for (const snapshot of ['s1', 's2'] as const)
      await apps.create(AppStudioKinds.Snapshot, snapshot, {
        application: 'shop',
        components: [{ name: 'web', containerImage: `${IMAGE}:${snapshot}@${DIGEST[snapshot]}` }],
      });
  });

  afterAll(async () => {
    await apps?.removeBindings();
    await f?.stop();
    await ssh?.stop();
    await git?.stop();
  });

  it('Snapshot s1 goes dev → staging → prod by automated promotion, each step a commit that Argo CD deploys', async () => {
    await promote('shop-s1', 's1', { automatedPromotion: { initialEnvironment: 'dev' } });
    const run = await completed('shop-s1');
    assert.equal((run.status as { completionResult?: string }).completionResult, 'Success');
    assert.deepEqual(stepsOf(run), ['dev:Success', 'staging:Success', 'prod:Success']);
    for (const env of ENVIRONMENTS) await deployedAt(env, 's1', 'shop-s1');
    // The overlay that has a configMapGenerator for it deploys the Environment's variables.
    const cm = await f.expect.object(tenant, 'ConfigMap', 'web-environment-dev');
    assert.equal(cm.data?.MODE, 'development');
  });

  it('Snapshot s2 the same way replaces the image everywhere', async () => {
    await promote('shop-s2', 's2', { automatedPromotion: { initialEnvironment: 'dev' } });
    const run = await completed('shop-s2');
    assert.equal((run.status as { completionResult?: string }).completionResult, 'Success');
    assert.deepEqual(stepsOf(run), ['dev:Success', 'staging:Success', 'prod:Success']);
    for (const env of ENVIRONMENTS) await deployedAt(env, 's2', 'shop-s2');
  });

  it('over SSH: an application whose GitOps repository is an ssh:// URL is rendered with the sshPrivateKey and deployed by Argo CD', async () => {
    await f.given.repositoryCredential(
      tenant,
      'shop-gitops-ssh',
      { repository: ssh.url('shop-gitops') },
      { name: 'git-ssh', credentials: { sshPrivateKey: sshKey.privateKey } },
    );
    await apps.createRenderedApplication('cart', { url: ssh.url('shop-gitops') }, ['cart']);
    await apps.create(AppStudioKinds.Snapshot, 'cart-1', {
      application: 'cart',
      components: [{ name: 'cart', containerImage: `${CART_IMAGE}@${DIGEST.s1}` }],
    });
    await promote('cart-1-to-dev', 'cart-1', {
      application: 'cart',
      manualPromotion: { targetEnvironment: 'dev' },
    });
    const run = await eventually(
      'PromotionRun cart-1-to-dev Complete',
      async () => {
        const r = await apps.read(AppStudioKinds.PromotionRun, 'cart-1-to-dev');
        return (r?.status as { state?: string } | undefined)?.state === 'Complete' ? r : undefined;
      },
      CONVERGE_MS * 2,
    );
    assert.equal((run.status as { completionResult?: string }).completionResult, 'Success');
    const binding = await apps.read(AppStudioKinds.SnapshotEnvironmentBinding, 'cart-dev-generated-binding');
    const source = (
      (binding?.status ?? {}) as { components?: { gitopsRepository: { url: string; commitID: string } }[] }
    ).components?.[0]?.gitopsRepository;
    assert.equal(source?.url, ssh.url('shop-gitops'));
    assert.match(
      await bareGit('log', '-1', '--format=%B', source?.commitID ?? ''),
      /^Promote Snapshot cart-1 to Environment dev\n[\s\S]*By: PromotionRun cart-1-to-dev\n/,
    );
    const cronJob = await get(f.system.kc, `/apis/batch/v1/namespaces/${tenant}/cronjobs/cart-dev`);
    assert.ok(cronJob, 'Argo CD deployed the CronJob it read over SSH');
    assert.equal(
      (cronJob.spec as { jobTemplate: { spec: { template: { spec: { containers: { image: string }[] } } } } })
        .jobTemplate.spec.template.spec.containers[0]?.image,
      `${CART_IMAGE}@${DIGEST.s1}`,
    );
    assert.ok(ssh.logins.accepted > 0);
  });

  it('rollback is a promotion: s1 to prod renders its image again and deploys it, the others keep s2', async () => {
    await promote('shop-rollback-prod', 's1', { manualPromotion: { targetEnvironment: 'prod' } });
    const run = await completed('shop-rollback-prod');
    assert.equal((run.status as { completionResult?: string }).completionResult, 'Success');
    assert.deepEqual(stepsOf(run), ['prod:Success']);
    await deployedAt('prod', 's1', 'shop-rollback-prod');
    await deployedAt('staging', 's2', 'shop-s2');
    // The password went nowhere: no process log line carries it.
    assert.equal(f.logs.filter((l) => l.includes(PASSWORD)).length, 0);
  });

  it('a protected branch: the PromotionRun ends in Failure at once, saying why; once the push is allowed the binding renders by itself and the next promotion succeeds', async () => {
    const head = await repo.head();
    await git.protectBranch('shop-gitops', 'main', 'main is protected: changes need a review');
    await promote('shop-s2-to-prod', 's2', { manualPromotion: { targetEnvironment: 'prod' } });
    // Long before GITOPS_PROMOTION_TIMEOUT (10 minutes here).
    const failed = await completed('shop-s2-to-prod');
    const url = git.url('shop-gitops');
    const status = (failed.status ?? {}) as {
      completionResult?: string;
      conditions?: { status: string; message: string }[];
    };
    assert.equal(status.completionResult, 'Failure');
    assert.deepEqual(stepsOf(failed), ['prod:Failed']);
    assert.equal(status.conditions?.[0]?.status, 'True');
    assert.equal(
      status.conditions?.[0]?.message,
      `the GitOps repository of binding shop-prod-generated-binding could not be rendered: the push to the GitOps repository ${url} (branch main) was refused: pushing to branch main: main is protected: changes need a review; ! [remote rejected] HEAD -> main (pre-receive hook declined); failed to push some refs to '${url}'`,
    );
    assert.equal(await repo.head(), head);
    // Prod still runs what it ran.
    const cronJob = await get(f.system.kc, `/apis/batch/v1/namespaces/${tenant}/cronjobs/web-prod`);
    assert.match(JSON.stringify(cronJob?.spec), new RegExp(DIGEST.s1));

    await git.protectBranch('shop-gitops', 'main-is-free', 'unused');
    await promote('shop-s2-to-prod-again', 's2', { manualPromotion: { targetEnvironment: 'prod' } });
    const run = await completed('shop-s2-to-prod-again');
    assert.equal((run.status as { completionResult?: string }).completionResult, 'Success');
    // The binding's own retry (every 30 s) or the new run's attempt, whichever came first, rendered it.
    await deployedAt('prod', 's2', 'shop-s2-to-prod(-again)?');
  });
});
