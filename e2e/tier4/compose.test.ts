/**
 * Tier 4 (`pnpm test:cluster`): the repository's docker-compose.yml, driven through testcontainers' compose
 * support (Debian's docker-compose), from the images `pnpm images` built: PostgreSQL, the backend and the
 * cluster-agent come up and become ready against a local control plane, as uid 1000 with a kubeconfig only
 * root could read on the host; the agent with its engine instance's own database role (admitted by the
 * one-shot `agent-database`) and no backend key; a user's GitOpsDeployment reaches its Argo CD Application;
 * down leaves nothing running. testcontainers' reaper is off (it would need an image from a registry): the test downs what it
 * upped, and checks that nothing is left.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type ControlPlane,
  createGitRepo,
  freePort,
  kubeRequest,
  manifest,
  repoRoot,
  startControlPlane,
} from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';

// Before testcontainers is loaded: no reaper container (its image would come from a registry).
process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
const { DockerComposeEnvironment, Wait } = await import('testcontainers');
type StartedEnvironment = Awaited<ReturnType<InstanceType<typeof DockerComposeEnvironment>['up']>>;

const execFileAsync = promisify(execFile);
const ARGOCD_NS = 'gitops-service-argocd';
const docker = async (...args: string[]) => (await execFileAsync('docker', args)).stdout.trim();

describe('tier 4: docker-compose.yml through testcontainers', () => {
  let controlPlane: ControlPlane;
  let workDir: string;
  let environment: StartedEnvironment | undefined;
  const project = `gitops-compose-${randomBytes(3).toString('hex')}`;
  /** The settings of the compose file this run uses (its variables). */
  let settings: Record<string, string>;
  /** `docker <command> --filter` this project's label (and `filters`) `--format <format>`. */
  const ofProject = (command: string[], format: string, ...filters: string[]) =>
    docker(
      ...command,
      '--filter',
      `label=com.docker.compose.project=${project}`,
      ...filters.flatMap((filter) => ['--filter', filter]),
      '--format',
      format,
    );

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'tier4-compose-'));
    controlPlane = await startControlPlane();
    await kubeRequest(controlPlane.endpoint, 'POST', '/api/v1/namespaces', { metadata: { name: ARGOCD_NS } });
    // The admin kubeconfig as kubectl writes one: readable by its owner (root here) only, in a folder of
    // its owner's; the processes run as uid 1000 all the same (the compose file's kubeconfig service).
    const kubeconfig = join(workDir, 'kubeconfig');
    await copyFile(controlPlane.kubeconfigPath, kubeconfig);
    await chmod(workDir, 0o700);
    await chmod(kubeconfig, 0o600);
    const ports = { pg: await freePort(), backend: await freePort(), agent: await freePort() };
    settings = {
      KUBECONFIG_FILE: kubeconfig,
      GITOPS_ENCRYPTION_KEYS: `k1=${randomBytes(32).toString('base64')}`,
      GITOPS_COMPOSE_PG_PORT: String(ports.pg),
      GITOPS_COMPOSE_PG_PASSWORD: randomBytes(12).toString('hex'),
      GITOPS_BACKEND_PORT: String(ports.backend),
      GITOPS_AGENT_PORT: String(ports.agent),
    };
    environment = await new DockerComposeEnvironment(repoRoot, 'docker-compose.yml')
      .withProjectName(project)
      .withClientOptions({ executable: { standalone: true } })
      .withEnvironment(settings)
      .withDefaultWaitStrategy(Wait.forHealthCheck())
      .withStartupTimeout(300_000)
      .up();
  });

  afterAll(async () => {
    await environment?.down({ removeVolumes: true, timeout: 10_000 }).catch(() => {});
    await controlPlane?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('up: PostgreSQL, the backend and the cluster-agent are healthy (/readyz)', async () => {
    const states = await ofProject(['ps'], '{{.Names}} {{.Status}}');
    const lines = states.split('\n').filter(Boolean);
    assert.equal(lines.length, 3, states);
    for (const line of lines) assert.match(line, /\(healthy\)/, line);
  });

  it('the backend and the cluster-agent run as uid 1000 and read a kubeconfig only its owner could read', async () => {
    for (const service of ['backend', 'cluster-agent']) {
      const name = await ofProject(['ps'], '{{.Names}}', `label=com.docker.compose.service=${service}`);
      assert.equal(await docker('exec', name, 'id', '-u'), '1000', `${service} runs as uid 1000`);
      // Its copy is its own and nobody else's.
      assert.equal(await docker('exec', name, 'stat', '-c', '%u %a', '/kube/kubeconfig'), '1000 400');
    }
    const copier = await ofProject(
      ['ps', '-a'],
      '{{.Status}}',
      'label=com.docker.compose.service=kubeconfig',
    );
    assert.match(copier, /^Exited \(0\)/, 'the one-shot copy finished');
  });

  it("the cluster-agent connects with its engine instance's own role and holds none of the backend's secrets", async () => {
    const admit = await ofProject(
      ['ps', '-a'],
      '{{.Status}}',
      'label=com.docker.compose.service=agent-database',
    );
    assert.match(admit, /^Exited \(0\)/, 'the one-shot admission finished');
    const agent = await ofProject(['ps'], '{{.Names}}', 'label=com.docker.compose.service=cluster-agent');
    // Its connection string: its own, readable by it alone.
    assert.equal(await docker('exec', agent, 'stat', '-c', '%u %a', '/agent-database/url'), '1000 600');
    // Neither the container's configuration nor its running process (PID 1) has the backend's connection
    // string or keys: names and counts only, never values.
    const configured = (
      JSON.parse(await docker('inspect', '--format', '{{json .Config.Env}}', agent)) as string[]
    ).map((entry) => entry.split('=')[0]);
    assert.ok(!configured.includes('GITOPS_ENCRYPTION_KEYS'), `configured: ${configured.join(' ')}`);
    assert.ok(!configured.includes('DATABASE_URL'), `configured: ${configured.join(' ')}`);
    const count = async (pattern: string) =>
      Number(
        await docker(
          'exec',
          agent,
          'sh',
          '-c',
          `tr '\\0' '\\n' </proc/1/environ | grep -c '${pattern}' || true`,
        ),
      );
    assert.equal(await count('^GITOPS_ENCRYPTION_KEYS='), 0, 'the agent process has no backend key');
    assert.equal(
      await count('^DATABASE_URL=postgres://gitops_ei_'),
      1,
      "the agent process uses an instance's role",
    );
    const logs = await eventually(
      'the agent registered its engine instance',
      async () => {
        const { stdout, stderr } = await execFileAsync('docker', ['logs', agent]);
        const text = stdout + stderr;
        return /"msg":"engine instance registered"/.test(text) && text;
      },
      120_000,
    );
    assert.doesNotMatch(logs, /backend's database role/);
    // The instance's key pair, made by the agent in its Argo CD namespace.
    const key = await kubeRequest(
      controlPlane.endpoint,
      'GET',
      `/api/v1/namespaces/${ARGOCD_NS}/secrets/gitops-service-instance-key`,
    );
    assert.equal(key.status, 200, 'the agent made the Secret gitops-service-instance-key');
  });

  it('a GitOpsDeployment through it reaches its Argo CD Application', async () => {
    const tenant = `tenant-${randomBytes(3).toString('hex')}`;
    await kubeRequest(controlPlane.endpoint, 'POST', '/api/v1/namespaces', { metadata: { name: tenant } });
    const repo = await createGitRepo(join(workDir, 'git'), 'app', {
      'dev/config.yaml': manifest.configMap('compose-config', { a: 'b' }),
    });
    const created = await kubeRequest(
      controlPlane.endpoint,
      'POST',
      `/apis/managed-gitops.redhat.com/v1alpha1/namespaces/${tenant}/gitopsdeployments`,
      {
        apiVersion: 'managed-gitops.redhat.com/v1alpha1',
        kind: 'GitOpsDeployment',
        metadata: { name: 'compose' },
        spec: { source: { repoURL: repo.fileUrl, path: 'dev' }, type: 'automated' },
      },
    );
    assert.ok(created.status < 300, JSON.stringify(created.body));
    const app = await eventually(
      'the Argo CD Application of the GitOpsDeployment',
      async () => {
        const res = await kubeRequest(
          controlPlane.endpoint,
          'GET',
          `/apis/argoproj.io/v1alpha1/namespaces/${ARGOCD_NS}/applications`,
        );
        const items =
          (res.body as { items?: { spec: { source: { repoURL: string; path: string } } }[] }).items ?? [];
        return items.find((a) => a.spec.source.repoURL === repo.fileUrl && a.spec.source.path === 'dev');
      },
      180_000,
    );
    assert.equal(app.spec.source.path, 'dev');
  });

  it("a second up keeps the running agent's connection string: no new password, the agent untouched", async () => {
    const agentId = () => ofProject(['ps'], '{{.ID}}', 'label=com.docker.compose.service=cluster-agent');
    const before = await agentId();
    await execFileAsync(
      'docker-compose',
      ['-p', project, '-f', join(repoRoot, 'docker-compose.yml'), 'up', '-d'],
      {
        cwd: repoRoot,
        env: { ...process.env, ...settings },
      },
    );
    const admit = await ofProject(
      ['ps', '-a'],
      '{{.Names}}',
      'label=com.docker.compose.service=agent-database',
    );
    const { stdout } = await execFileAsync('docker', ['logs', admit]);
    const last = stdout.trim().split('\n').at(-1) ?? '';
    assert.match(last, /still logs in: kept/, stdout);
    assert.equal(await agentId(), before, 'the same agent container runs on');
    await eventually(
      'the agent healthy',
      async () =>
        /\(healthy\)/.test(
          await ofProject(['ps'], '{{.Status}}', 'label=com.docker.compose.service=cluster-agent'),
        ),
      60_000,
    );
  });

  it('down leaves nothing running', async () => {
    await environment?.down({ removeVolumes: true, timeout: 10_000 });
    environment = undefined;
    const left = await ofProject(['ps', '-a'], '{{.Names}}');
    assert.equal(left, '', `containers left: ${left}`);
    const networks = await ofProject(['network', 'ls'], '{{.Name}}');
    assert.equal(networks, '', `networks left: ${networks}`);
    const volumes = await ofProject(['volume', 'ls'], '{{.Name}}');
    assert.equal(volumes, '', `volumes left: ${volumes}`);
  });
});
