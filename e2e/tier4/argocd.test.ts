/**
 * Tier 4: Argo CD installed the way users install it (issue 22 item 1). Argo CD's own release manifests of
 * the version tools/argocd builds (`core-install.yaml` from the Go module: application controller,
 * repo-server, redis, ApplicationSet controller) run as Pods on the real node, from images built locally
 * (`pnpm images`: the same binary on the local base, Debian's redis; nothing pulled). Then the settings
 * docs/api.md tells users to apply, the service's overlay with the RHOAS operator
 * (`manifests/overlays/local-cluster-rhoas`), and a user's Deployment deployed through it from an HTTPS Git
 * server whose certificate Argo CD trusts through argocd-tls-certs-cm.
 *
 * What differs from a production cluster, all from the local node (docs/testing.md): no kube-proxy and no
 * cluster DNS, so Pods reach the API server on the node network's gateway (as our overlay does) and Argo CD's
 * components reach redis and the repo-server at their Pod addresses, set in argocd-cmd-params-cm
 * (`redis.server`, `repo.server`, Argo CD's documented keys); images are never pulled.
 *
 * Then one image promotion the way a user without App Studio's other services does it (issue 23): the
 * backend's Pods render Snapshots' images into the GitOps repository on that HTTPS server (git in the image,
 * the server's CA trusted through the `git-ca` component), Argo CD deploys the overlay, and the Pod on the
 * node runs the user's image: a first Snapshot by tag, then a second by digest.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import {
  createGitRepo,
  type GitServer,
  manifest,
  NODE_GATEWAY,
  repoRoot,
  startGitServer,
} from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { RENDER_ANNOTATION } from '../fixture/appstudio.ts';
import {
  ARGOCD_NS,
  isTrue,
  SERVICE_NS,
  type ServiceCluster,
  startServiceCluster,
  webDeployment,
} from './service-cluster.ts';

const execFileAsync = promisify(execFile);
const IMAGE = 'gitops-service:local';
const ARGOCD_IMAGE = 'gitops-service/argocd:local';
const REDIS_IMAGE = 'gitops-service/redis:local';
/** A user's web server in two versions (built by this test on the service's image: nothing is pulled). */
const WEB_REPOSITORY = 'gitops-tier4/web';
const WEB_IMAGES = { '1': `${WEB_REPOSITORY}:1`, '2': `${WEB_REPOSITORY}:2` } as const;
/** The Application annotation that asks the service to render its GitOps repository (docs/api.md). */
const CONVERGE_MS = 300_000;
const log = (line: string) => {
  if (process.env.E2E_VERBOSE) process.stderr.write(`[tier4-argocd] ${line}\n`);
};

/** The node-only differences, per workload of the release manifests: never pull, the API server's address. */
const NODE_PATCHES = [
  ['StatefulSet', 'argocd-application-controller', ['argocd-application-controller'], []],
  ['Deployment', 'argocd-repo-server', ['argocd-repo-server'], ['copyutil']],
  ['Deployment', 'argocd-redis', ['redis'], ['secret-init']],
  ['Deployment', 'argocd-applicationset-controller', ['argocd-applicationset-controller'], []],
] as const;

describe('tier 4: Argo CD from its release manifests as Pods on the node, the service against it', () => {
  let env: ServiceCluster;
  let git: GitServer;

  const kubectl = (...args: string[]) => env.kubectl(...args);
  const readyPod = async (selector: string, namespace = ARGOCD_NS) =>
    (await env.readyPods(namespace, selector))[0];
  /** Merges `data` into one of Argo CD's ConfigMaps, as Argo CD's documentation has users do it. */
  const patchConfigMap = (name: string, data: Record<string, string>) =>
    kubectl('patch', 'configmap', name, '-n', ARGOCD_NS, '--type=merge', '-p', JSON.stringify({ data }));
  const setCmdParams = (data: Record<string, string>) => patchConfigMap('argocd-cmd-params-cm', data);
  const restart = async (...workloads: string[]) => {
    for (const workload of workloads) await kubectl('rollout', 'restart', workload, '-n', ARGOCD_NS);
    for (const workload of workloads)
      await kubectl('rollout', 'status', workload, '-n', ARGOCD_NS, `--timeout=${CONVERGE_MS / 1000}s`);
  };

  beforeAll(async () => {
    env = await startServiceCluster({
      images: [IMAGE, ARGOCD_IMAGE, REDIS_IMAGE],
      name: 'tier4-argocd',
      log,
      argoCd: false,
    });

    // Argo CD's release manifests of the version we build, from the Go module tools/argocd requires.
    const module = (
      await execFileAsync('go', ['list', '-m', '-f', '{{.Dir}}', 'github.com/argoproj/argo-cd/v3'], {
        cwd: join(repoRoot, 'tools/argocd'),
        env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
      })
    ).stdout.trim();
    const install = join(env.workDir, 'argocd-install');
    await mkdir(install, { recursive: true });
    const release = await readFile(join(module, 'manifests/core-install.yaml'), 'utf8');
    await writeFile(join(install, 'core-install.yaml'), release);
    await writeFile(join(install, 'kustomization.yaml'), kustomization(imagesOf(release)));
    await kubectl('create', 'namespace', ARGOCD_NS);
    await env.applyKustomization(install);

    // The settings docs/api.md asks for, as a user applies them; and Git polled every 10 s instead of every
    // 2-3 min (Argo CD's `timeout.reconciliation`; a user would add a webhook), so a pushed render deploys soon.
    await patchConfigMap('argocd-cm', { 'resource.respectRBAC': 'normal', 'timeout.reconciliation': '10s' });
    // No Service routes here: redis first, then the repo-server (which uses redis), at their Pod addresses.
    const redis = await eventually(
      'argocd-redis ready',
      () => readyPod('app.kubernetes.io/name=argocd-redis'),
      CONVERGE_MS,
    );
    await setCmdParams({
      'controller.resource.health.persist': 'true',
      'redis.server': `${redis.status?.podIP}:6379`,
    });
    await restart('deployment/argocd-repo-server');
    const repoServer = await eventually(
      'argocd-repo-server ready',
      () => readyPod('app.kubernetes.io/name=argocd-repo-server'),
      CONVERGE_MS,
    );
    await setCmdParams({ 'repo.server': `${repoServer.status?.podIP}:8081` });
    await restart('statefulset/argocd-application-controller', 'deployment/argocd-applicationset-controller');

    // A Git server the Pods reach, its self-signed certificate trusted the way Argo CD documents it.
    git = await startGitServer({ host: NODE_GATEWAY });
    await patchConfigMap('argocd-tls-certs-cm', { [NODE_GATEWAY]: await readFile(git.caFile, 'utf8') });

    // The service's overlay with the component that makes the backend trust the Git server's CA (it renders
    // GitOps repositories there), and the ConfigMap that component reads, as an operator applies them.
    await kubectl(
      'create',
      'configmap',
      'gitops-service-git-ca',
      '-n',
      SERVICE_NS,
      `--from-file=ca.crt=${git.caFile}`,
    );
    const service = join(env.workDir, 'service');
    await mkdir(service, { recursive: true });
    await writeFile(
      join(service, 'kustomization.yaml'),
      JSON.stringify({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        resources: [relative(service, join(repoRoot, 'manifests/overlays/local-cluster-rhoas'))],
        components: [relative(service, join(repoRoot, 'manifests/components/git-ca'))],
      }),
    );
    await env.applyKustomization(service);
  });

  afterAll(async () => {
    await git?.stop();
    await env?.stop();
    await execFileAsync('docker', ['rmi', ...Object.values(WEB_IMAGES)]).catch(() => {});
  });

  it("Argo CD's components run as Pods from the locally built images", async () => {
    for (const name of [
      'argocd-application-controller',
      'argocd-repo-server',
      'argocd-redis',
      'argocd-applicationset-controller',
    ]) {
      const pod = await eventually(
        `${name} ready`,
        () => readyPod(`app.kubernetes.io/name=${name}`),
        CONVERGE_MS,
      );
      const images = (pod.spec?.containers ?? []).map((c) => c.image);
      assert.ok(
        images.every((image) => image === ARGOCD_IMAGE || image === REDIS_IMAGE),
        `${name} runs ${images.join(', ')}`,
      );
    }
  });

  it('the service (and the RHOAS operator) runs against it and the cluster-agent finds its settings', async () => {
    await eventually(
      'gitops-backend, gitops-cluster-agent and gitops-rhoas-operator Available',
      async () => {
        for (const name of ['gitops-backend', 'gitops-cluster-agent', 'gitops-rhoas-operator']) {
          if (!isTrue(await env.getJson('deployment', '-n', SERVICE_NS, name), 'Available')) return false;
        }
        return true;
      },
      CONVERGE_MS,
    );
    // The agent reads argocd-cmd-params-cm at start (docs/api.md): the installed Argo CD persists health.
    const agent = await readyPod('app.kubernetes.io/name=gitops-cluster-agent', SERVICE_NS);
    const metrics = await (await fetch(`http://${agent?.status?.podIP}:8081/metrics`)).text();
    assert.match(metrics, /gitops_argocd_resource_health_persisted\{[^}]*\} 1/);
  });

  it("a user's GitOpsDeployment of a Deployment and a Service from an HTTPS Git server ends Synced/Healthy with its Pods Running", async () => {
    const repo = await createGitRepo(git.reposDir, 'web', {
      'app/deployment.yaml': webDeployment('web', IMAGE),
      'app/service.yaml': manifest.service('web', 8080),
    });
    const tenant = `tenant-${randomBytes(3).toString('hex')}`;
    await kubectl('create', 'namespace', tenant);
    const file = join(env.workDir, 'web.json');
    await writeFile(
      file,
      JSON.stringify({
        apiVersion: 'managed-gitops.redhat.com/v1alpha1',
        kind: 'GitOpsDeployment',
        metadata: { name: 'web', namespace: tenant },
        spec: { source: { repoURL: git.url('web'), path: 'app' }, type: 'automated' },
      }),
    );
    await kubectl('apply', '-f', file);
    const head = await repo.head();
    await eventually(
      'GitOpsDeployment web Synced/Healthy at the head',
      async () => {
        const gd = await env.getJson('gitopsdeployment', '-n', tenant, 'web');
        return (
          gd.status?.sync?.status === 'Synced' &&
          gd.status.sync.revision === head &&
          gd.status?.health?.status === 'Healthy'
        );
      },
      CONVERGE_MS,
    );
    assert.equal((await env.readyPods(tenant, 'app=web')).length, 2, 'both replicas Running and Ready');
    await env.getJson('service', '-n', tenant, 'web');
  });
  it("promotion with real Pods: Snapshots rendered into the GitOps repository by the service's Pods, deployed by Argo CD, running on the node", async () => {
    // The user's two images: the same web server, answering with its version. Imported into the node, where
    // each is known by its tag and by its digest.
    for (const [version, image] of Object.entries(WEB_IMAGES)) {
      await new Promise<void>((resolve, reject) => {
        const build = execFile(
          'docker',
          ['build', '-q', '-t', image, '-'],
          { env: { ...process.env, DOCKER_BUILDKIT: '0' } },
          (error) => (error ? reject(error) : resolve()),
        );
        build.stdin?.end(`FROM ${IMAGE}\nENV WEB_VERSION=${version}\n`);
      });
    }
    const digests = await env.cluster.node.importImages(Object.values(WEB_IMAGES));
    const digest2 = digests[WEB_IMAGES['2']] ?? '';

    // The GitOps repository, App Studio's layout: the component's base and the dev overlay.
    const server =
      "require('node:http').createServer((q, s) => s.end('web ' + process.env.WEB_VERSION)).listen(8080)";
    const repo = await createGitRepo(git.reposDir, 'shop-gitops', {
      'components/web/base/kustomization.yaml': 'resources:\n  - deployment.yaml\n',
      'components/web/base/deployment.yaml': JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              containers: [
                {
                  name: 'web',
                  image: `${WEB_REPOSITORY}:base`,
                  imagePullPolicy: 'Never',
                  command: ['node', '-e', server],
                  ports: [{ containerPort: 8080 }],
                  readinessProbe: { httpGet: { path: '/', port: 8080 }, periodSeconds: 2 },
                },
              ],
            },
          },
        },
      }),
      'components/web/overlays/dev/kustomization.yaml': 'resources:\n  - ../../base\n',
    });
    const password = randomBytes(12).toString('hex');
    git.setPassword('shop-gitops', 'jane', password);

    // What the user applies: write access to the repository, the Application that asks the service to
    // render it, its Component, an Environment and two Snapshots (the second names its image by digest).
    const tenant = `shop-${randomBytes(3).toString('hex')}`;
    await kubectl('create', 'namespace', tenant);
    await kubectl(
      'create',
      'secret',
      'generic',
      'git-creds',
      '-n',
      tenant,
      '--type=managed-gitops.redhat.com/repository-credential',
      '--from-literal=username=jane',
      `--from-literal=password=${password}`,
    );
    const appStudio = (kind: string, name: string, body: Record<string, unknown>) => ({
      apiVersion: 'appstudio.redhat.com/v1alpha1',
      kind,
      ...body,
      metadata: { ...(body.metadata as object | undefined), name, namespace: tenant },
    });
    const apply = async (objects: unknown[], name: string) => {
      const file = join(env.workDir, `${tenant}-${name}.json`);
      await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
      await kubectl('apply', '-f', file);
    };
    await apply(
      [
        {
          apiVersion: 'managed-gitops.redhat.com/v1alpha1',
          kind: 'GitOpsDeploymentRepositoryCredential',
          metadata: { name: 'shop-gitops', namespace: tenant },
          spec: { repository: git.url('shop-gitops'), secret: 'git-creds' },
        },
        appStudio('Application', 'shop', {
          metadata: { annotations: { [RENDER_ANNOTATION]: 'true' } },
          spec: { displayName: 'shop', gitOpsRepository: { url: git.url('shop-gitops'), branch: 'main' } },
        }),
        appStudio('Component', 'web', { spec: { componentName: 'web', application: 'shop' } }),
        appStudio('Environment', 'dev', {
          spec: { displayName: 'dev', deploymentStrategy: 'AppStudioAutomated' },
        }),
        appStudio('Snapshot', 's1', {
          spec: { application: 'shop', components: [{ name: 'web', containerImage: WEB_IMAGES['1'] }] },
        }),
        appStudio('Snapshot', 's2', {
          spec: {
            application: 'shop',
            components: [{ name: 'web', containerImage: `${WEB_IMAGES['2']}@${digest2}` }],
          },
        }),
      ],
      'setup',
    );

    /** Promotes a Snapshot to dev and checks what the user sees: the run, the commit, the Deployment, the Pod. */
    const promote = async (snapshot: 's1' | 's2', version: '1' | '2', image: string) => {
      const run = `shop-${snapshot}-to-dev`;
      await apply(
        [
          appStudio('PromotionRun', run, {
            spec: { snapshot, application: 'shop', manualPromotion: { targetEnvironment: 'dev' } },
          }),
        ],
        run,
      );
      const done = await eventually(
        `PromotionRun ${run} Complete`,
        async () => {
          const r = await env.getJson('promotionrun', '-n', tenant, run);
          return r.status?.state === 'Complete' ? r : undefined;
        },
        CONVERGE_MS,
      );
      assert.equal(done.status?.completionResult, 'Success', JSON.stringify(done.status));

      // The commit the service pushed, as `git log` shows it, pins the image in the dev overlay.
      const binding = await env.getJson(
        'snapshotenvironmentbinding',
        '-n',
        tenant,
        'shop-dev-generated-binding',
      );
      const [component] =
        (binding.status as { components?: { gitopsRepository: { commitID: string; path: string } }[] })
          .components ?? [];
      assert.equal(component?.gitopsRepository.path, 'components/web/overlays/dev');
      const commit = component?.gitopsRepository.commitID ?? '';
      assert.equal(commit, await repo.head(), 'the render is the head of main');
      const bareGit = async (...args: string[]) =>
        (await execFileAsync('git', ['-C', repo.bareDir, ...args])).stdout;
      assert.match(
        await bareGit('log', '-1', '--format=%an <%ae>%n%B', commit),
        new RegExp(
          `^GitOps Service <gitops-service@managed-gitops.redhat.com>\\nPromote Snapshot ${snapshot} to Environment dev\\n[\\s\\S]*By: PromotionRun ${run}\\n`,
        ),
      );
      const overlay = await bareGit('show', `${commit}:components/web/overlays/dev/kustomization.yaml`);
      assert.match(
        overlay,
        snapshot === 's1'
          ? new RegExp(`- name: ${WEB_REPOSITORY}\\n {4}newTag: "?1"?\\n`)
          : new RegExp(`- name: ${WEB_REPOSITORY}\\n {4}digest: ${digest2}\\n`),
      );

      // The Deployment Argo CD applied, and its one Pod Running on the node with that image, answering.
      await eventually(
        `Deployment web with ${image} rolled out`,
        async () => {
          const deployment = await env.getJson('deployment', '-n', tenant, 'web');
          return deployment.spec?.template?.spec?.containers?.[0]?.image === image &&
            deployment.status?.updatedReplicas === 1 &&
            deployment.status?.replicas === 1 &&
            deployment.status?.availableReplicas === 1
            ? deployment
            : undefined;
        },
        CONVERGE_MS,
      );
      const pods = await eventually(
        `only Pods with ${image}`,
        async () => {
          const all = await env.items('pods', '-n', tenant, '-l', 'app=web');
          const ready = await env.readyPods(tenant, 'app=web');
          return all.length === 1 && ready.length === 1 ? ready : undefined;
        },
        CONVERGE_MS,
      );
      const [pod] = pods;
      assert.equal(pod?.spec?.containers?.[0]?.image, image);
      assert.equal(
        pod?.status?.containerStatuses?.[0]?.imageID,
        `docker.io/${WEB_REPOSITORY}@${digests[WEB_IMAGES[version]]}`,
        'the container runs that exact image',
      );
      assert.equal(await (await fetch(`http://${pod?.status?.podIP}:8080/`)).text(), `web ${version}`);
    };

    // The RepositoryCredential is checked by the backend's git (in its Pod, trusting the CA) first.
    await eventually(
      'RepositoryCredential shop-gitops valid',
      async () =>
        isTrue(
          await env.getJson('gitopsdeploymentrepositorycredential', '-n', tenant, 'shop-gitops'),
          'ValidRepositoryCredential',
        ),
      CONVERGE_MS,
    );
    await promote('s1', '1', WEB_IMAGES['1']);
    await promote('s2', '2', `${WEB_REPOSITORY}@${digest2}`);
  });
});

/** The images the release manifests name (every container and init container), without duplicates. */
function imagesOf(release: string): string[] {
  const images = new Set<string>();
  for (const doc of parseAllDocuments(release)) {
    const spec = (doc.toJS() as { spec?: { template?: { spec?: Record<string, unknown> } } } | null)?.spec
      ?.template?.spec;
    for (const list of [spec?.containers, spec?.initContainers]) {
      for (const container of (list as { image?: string }[] | undefined) ?? []) {
        if (container.image) images.add(container.image);
      }
    }
  }
  return [...images];
}

/**
 * The kustomization a user of a cluster without a registry writes over the release manifests: the namespace,
 * the local images (Argo CD's own for every argocd image, Debian's redis for redis), and (this node only)
 * never pull and the API server's address.
 */
function kustomization(releaseImages: string[]): string {
  const local = (image: string) => {
    const name = image.replace(/[:@].*$/, '');
    if (name.endsWith('/argocd')) return { name, newName: 'gitops-service/argocd', newTag: 'local' };
    if (name.endsWith('/redis')) return { name, newName: 'gitops-service/redis', newTag: 'local' };
    throw new Error(`the release manifests name an image tier 4 does not build: ${image}`);
  };
  const env = [
    { name: 'KUBERNETES_SERVICE_HOST', value: NODE_GATEWAY },
    { name: 'KUBERNETES_SERVICE_PORT', value: '16443' },
  ];
  const patches = NODE_PATCHES.map(([kind, name, containers, initContainers]) => ({
    target: { kind, name },
    patch: JSON.stringify({
      apiVersion: 'apps/v1',
      kind,
      metadata: { name },
      spec: {
        template: {
          spec: {
            containers: containers.map((c) => ({ name: c, imagePullPolicy: 'Never', env })),
            ...(initContainers.length > 0
              ? { initContainers: initContainers.map((c) => ({ name: c, imagePullPolicy: 'Never', env })) }
              : {}),
          },
        },
      },
    }),
  }));
  // Argo CD's documented step for a namespace other than `argocd`: its ClusterRoleBinding names the namespace.
  const bindingNamespace = {
    target: { kind: 'ClusterRoleBinding', name: 'argocd-application-controller' },
    patch: JSON.stringify([{ op: 'replace', path: '/subjects/0/namespace', value: ARGOCD_NS }]),
  };
  return JSON.stringify({
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    namespace: ARGOCD_NS,
    resources: ['core-install.yaml'],
    images: releaseImages.map(local),
    patches: [...patches, bindingNamespace],
  });
}
