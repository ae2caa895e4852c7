/**
 * The GitOps repository render's integration tests' scenario (render.int.test.ts, render-ssh.int.test.ts): a
 * real HTTPS Git server (`git http-backend`, basic auth) with the repository `gitops` (a `web` component's
 * base and its `dev` overlay), a namespace with its RepositoryCredential and Secret, the Application `shop`
 * that asks for the render, the Environments `dev` and `staging`, the Snapshots `s1` (by digest), `s2` and
 * `s2-again` (by tag), and the binding, render and PromotionRun features started alone (no core, so no
 * deployment syncs: the commits are read from the bare repository).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createGitRepo, type GitRepo, type GitServer, startGitServer } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll } from 'vitest';
import type { PushedCommit } from '../context.ts';
import { RENDER_ANNOTATION } from '../gitops-repository/render.ts';
import { type AppStudioFixture, createAppStudioFixture, Kind, statusOf } from './appstudio-fixture.ts';

export { specOf, statusOf } from './appstudio-fixture.ts';

const exec = promisify(execFile);
export const USER = 'jane';
export const PASSWORD = 'pw-render-s3cret';
export const IMAGE = 'images.example/shop/web';
export const S1 = `${IMAGE}@sha256:${'1'.repeat(64)}`;
export const S2 = `${IMAGE}:2.0`;

export const repoCondition = (o: KubeObject | undefined) =>
  ((statusOf(o).gitopsRepoConditions as Record<string, unknown>[] | undefined) ?? [])[0];

const base = {
  'components/web/base/kustomization.yaml': 'resources:\n  - deployment.yaml\n',
  'components/web/base/deployment.yaml': [
    'apiVersion: apps/v1',
    'kind: Deployment',
    'metadata: {name: web}',
    'spec:',
    '  replicas: 0',
    '  selector: {matchLabels: {app: web}}',
    '  template:',
    '    metadata: {labels: {app: web}}',
    `    spec: {containers: [{name: web, image: "${IMAGE}:base"}]}`,
    '',
  ].join('\n'),
  'components/web/overlays/dev/kustomization.yaml': [
    'resources:',
    '  - ../../base',
    'configMapGenerator:',
    '  - name: web-environment',
    '    literals: []',
    '',
  ].join('\n'),
};

/** Registers the scenario's beforeAll/afterAll in the calling describe and returns its helpers. */
export function useRenderScenario() {
  const f: AppStudioFixture = createAppStudioFixture();
  let server: GitServer;
  const features = ['appstudio-binding', 'appstudio-gitops-render', 'appstudio-promotionrun'];
  let repo: GitRepo;
  let ns: string;
  let previousCa: string | undefined;

  const git = async (...args: string[]) =>
    (
      await exec('git', ['-C', repo.bareDir, ...args], {
        env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' },
      })
    ).stdout.trim();
  const show = (path: string, rev = 'main') => git('show', `${rev}:${path}`);
  const binding = (name: string, environment: string, snapshot: string, components = ['web']) =>
    f.create(Kind.SnapshotEnvironmentBinding, ns, name, {
      spec: {
        application: 'shop',
        environment,
        snapshot,
        components: components.map((c) => ({ name: c })),
      },
    });
  const get = (name: string) => f.get(Kind.SnapshotEnvironmentBinding, ns, name);
  /** What the host was told of (ctx.onPushed): the backend refreshes the Applications of each. */
  const pushes: PushedCommit[] = [];
  /** The binding once its repo condition is about its current generation and has `status`. */
  const rendered = (name: string, status: 'True' | 'False', timeoutMs = 60_000) =>
    eventually(
      `${name}'s GitOps repository condition ${status} for its generation`,
      async () => {
        const b = await get(name);
        const c = repoCondition(b);
        return c && c.status === status && c.observedGeneration === b?.metadata.generation ? b : undefined;
      },
      timeoutMs,
    );
  /** A PromotionRun once Complete with Failure: its condition's and its step's messages. */
  const endedInFailure = (name: string) =>
    eventually(
      `${name} Complete with Failure`,
      async () => {
        const r = statusOf(await f.get(Kind.PromotionRun, ns, name)) as {
          state?: string;
          completionResult?: string;
          conditions?: { status: string; message: string }[];
          environmentStatus?: { status: string; displayStatus: string }[];
        };
        if (r.state !== 'Complete') return undefined;
        assert.equal(r.completionResult, 'Failure');
        assert.equal(r.conditions?.[0]?.status, 'True');
        assert.equal(r.environmentStatus?.[0]?.status, 'Failed');
        return {
          condition: r.conditions?.[0]?.message ?? '',
          step: r.environmentStatus?.[0]?.displayStatus ?? '',
        };
      },
      120_000,
    );
  const environment = (name: string, env: { name: string; value: string }[] = []) =>
    f.create(Kind.Environment, ns, name, {
      spec: { displayName: name, deploymentStrategy: 'Manual', configuration: { env } },
    });
  const snapshot = (name: string, image: string, more: Record<string, string> = {}) =>
    f.create(Kind.Snapshot, ns, name, {
      spec: {
        application: 'shop',
        components: [
          { name: 'web', containerImage: image },
          ...Object.entries(more).map(([name, containerImage]) => ({ name, containerImage })),
        ],
      },
    });

  beforeAll(async () => {
    server = await startGitServer();
    previousCa = process.env.GIT_SSL_CAINFO;
    process.env.GIT_SSL_CAINFO = server.caFile;
    repo = await createGitRepo(server.reposDir, 'gitops', base);
    server.setPassword('gitops', USER, PASSWORD);
    ns = await f.createNamespace('render');
    await f.create(Kind.Secret, ns, 'gitops-write', {
      type: 'Opaque',
      stringData: { username: USER, password: PASSWORD },
    });
    await f.create(Kind.GitOpsDeploymentRepositoryCredential, ns, 'gitops', {
      spec: { repository: server.url('gitops'), secret: 'gitops-write' },
    });
    await f.create(Kind.Application, ns, 'shop', {
      metadata: { annotations: { [RENDER_ANNOTATION]: 'true' } },
      spec: { displayName: 'shop', gitOpsRepository: { url: server.url('gitops'), branch: 'main' } },
    });
    await environment('dev', [{ name: 'MODE', value: 'development' }]);
    await environment('staging');
    await snapshot('s1', S1, { api: `${IMAGE}-api:1` });
    await snapshot('s2', S2);
    await snapshot('s2-again', S2);
    await f.start({ onPushed: async (push) => void pushes.push(push) }, { only: features });
  }, 120_000);

  afterAll(async () => {
    await f.cleanup();
    await server?.stop();
    if (previousCa === undefined) delete process.env.GIT_SSL_CAINFO;
    else process.env.GIT_SSL_CAINFO = previousCa;
  });

  return {
    f,
    features,
    pushes,
    git,
    show,
    binding,
    get,
    rendered,
    endedInFailure,
    environment,
    snapshot,
    /** Set once the scenario's beforeAll ran. */
    get ns() {
      return ns;
    },
    get server() {
      return server;
    },
    get repo() {
      return repo;
    },
  };
}
