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
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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

    // The settings docs/api.md asks for, as a user applies them.
    await patchConfigMap('argocd-cm', { 'resource.respectRBAC': 'normal' });
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

    await env.applyKustomization(join(repoRoot, 'manifests/overlays/local-cluster-rhoas'));
  });

  afterAll(async () => {
    await git?.stop();
    await env?.stop();
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
