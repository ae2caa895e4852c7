/**
 * Tier 4: a rolling upgrade (docs/upgrades.md). The image of an earlier commit (`UPGRADE_FROM`, default
 * fa28c24: the last commit before migration 0010, so the roll crosses 0010 and 0011) is built from a git
 * worktree of that commit and installed with that commit's own manifests on the real node; with deployments
 * present, the database is migrated and the engine instance admitted (HEAD's agent connects with the
 * instance's own role: the Secret gitops-service-agent-database), then HEAD's manifests are applied (backend
 * first, the agent paused until the backend has rolled) while creates, spec changes, deletes and Git commits
 * keep coming. Versions N-1 and N run side by side against
 * N's schema throughout. Afterwards nothing is lost, nothing reports an error, nothing waits.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { createGitRepo, type GitRepo, manifest, repoRoot } from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  ARGOCD_NS,
  isTrue,
  type KubeItem,
  SERVICE_NS,
  type ServiceCluster,
  startServiceCluster,
} from './service-cluster.ts';

const execFileAsync = promisify(execFile);
const IMAGE = 'gitops-service:local';
const FROM = process.env.UPGRADE_FROM ?? 'fa28c24';
const COMPONENTS = ['gitops-backend', 'gitops-cluster-agent'] as const;
const CONVERGE_MS = 300_000;
/** Deployments present before the roll, and how many more the churn may create (one folder pair each). */
const INITIAL = 10;
const POOL = 100;
const log = (line: string) => {
  if (process.env.E2E_VERBOSE) process.stderr.write(`[upgrade] ${line}\n`);
};

/** A GitOpsDeployment of the churn: `d-<i>` deploys ConfigMap `cm-<i>` from `cm/<i>` or `alt/<i>`. */
interface Deployment {
  index: number;
  uid: string;
  path: string;
}

/** What a rolling component looked like at one moment. */
interface RollSample {
  oldReady: number;
  newReady: number;
  pods: number;
}

describe(`tier 4: a rolling upgrade from ${FROM} to HEAD with deployments present and changing`, () => {
  let env: ServiceCluster;
  let treeDir: string;
  let worktree: string | undefined;
  let repo: GitRepo;
  let oldImage: string;
  let tenant: string;
  const live = new Map<string, Deployment>();
  const gone: Deployment[] = [];
  /** The value of each folder's ConfigMap at the repository's head. */
  const values = new Map<string, string>();
  const errorsSeen = new Set<string>();
  /** What the churn did, per phase of the roll (printed as one line: figures, not asserted). */
  let phase = 'before';
  const done: Record<string, Record<string, number>> = {};
  const count = (what: string) => {
    const counts = done[phase] ?? {};
    counts[what] = (counts[what] ?? 0) + 1;
    done[phase] = counts;
  };
  const rolls = new Map<string, RollSample[]>();

  const kubectl = (...args: string[]) => env.kubectl(...args);
  const items = (...args: string[]) => env.items(...args);
  const podsOf = async (component: string) =>
    (await items('pods', '-n', SERVICE_NS, '-l', `app.kubernetes.io/name=${component}`)).filter(
      (p) => !p.metadata.deletionTimestamp,
    );
  const readyPods = async (component: string) =>
    (await podsOf(component)).filter((p) => p.status?.phase === 'Running' && isTrue(p, 'Ready'));
  const imageOf = (pod: KubeItem) => pod.spec?.containers?.[0]?.image;

  beforeAll(async () => {
    // The earlier commit: its tree in a worktree, its image built once and kept (a later run reuses it).
    const sha = await execFileAsync('git', [
      '-C',
      repoRoot,
      'rev-parse',
      '--verify',
      '--quiet',
      `${FROM}^{commit}`,
    ])
      .then((r) => r.stdout.trim())
      .catch(() => '');
    if (!sha) {
      throw new Error(
        `the upgrade starts from commit ${FROM}, which this checkout does not have (a shallow clone? git fetch --unshallow)`,
      );
    }
    oldImage = `gitops-service:upgrade-from-${sha.slice(0, 12)}`;
    treeDir = await mkdtemp(join(tmpdir(), 'tier4-upgrade-from-'));
    worktree = join(treeDir, 'tree');
    await execFileAsync('git', ['-C', repoRoot, 'worktree', 'add', '--detach', worktree, sha]);
    await buildImageOnce(worktree, oldImage, sha.slice(0, 12));

    // Version N-1's agent uses the backend's Secret; the agent's own one is made before the roll (below).
    env = await startServiceCluster({ images: [IMAGE, oldImage], name: 'tier4-upgrade', log, admit: false });
    // Version N-1 installed as its own commit documented it: its overlay, with its image.
    const oldOverlay = join(worktree, 'manifests/overlays/upgrade-from');
    await mkdir(oldOverlay, { recursive: true });
    await writeFile(
      join(oldOverlay, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources: [../local-cluster]',
        `images: [{ name: gitops-service, newTag: ${oldImage.split(':')[1]} }]`,
        '',
      ].join('\n'),
    );
    await env.applyKustomization(oldOverlay);

    const files: Record<string, string> = {};
    for (let i = 0; i < POOL; i++) {
      for (const folder of ['cm', 'alt']) {
        const path = `${folder}/${i}`;
        values.set(path, `${path}@0`);
        files[`${path}/config.yaml`] = manifest.configMap(`cm-${i}`, { value: `${path}@0` });
      }
    }
    repo = await createGitRepo(join(env.workDir, 'git'), 'upgrade', files);
    tenant = `upgrade-${randomBytes(3).toString('hex')}`;
    await kubectl('create', 'namespace', tenant);
  });

  afterAll(async () => {
    await env?.stop();
    if (worktree)
      await execFileAsync('git', ['-C', repoRoot, 'worktree', 'remove', '--force', worktree]).catch(() => {});
    if (treeDir) await rm(treeDir, { recursive: true, force: true });
  });

  it(`version N-1 (${FROM}) runs on the node and deploys`, async () => {
    await eventually(
      'both Deployments of the old version Available',
      async () => {
        for (const component of COMPONENTS) {
          // As many as that version's manifests ask for (older ones ran a single agent).
          const { spec } = await env.getJson<{ spec: { replicas: number } }>(
            'deployment',
            '-n',
            SERVICE_NS,
            component,
          );
          const ready = await readyPods(component);
          if (ready.length !== spec.replicas || ready.some((p) => imageOf(p) !== oldImage)) return false;
        }
        return true;
      },
      CONVERGE_MS,
    );
    for (let i = 0; i < INITIAL; i++) await create();
    await converged('the first deployments Synced/Healthy on the old version');
  });

  it('HEAD rolls out one replica at a time while deployments are created, changed, deleted and synced: nothing lost, no error, nothing stuck', async () => {
    let churning = true;
    const churn = (async () => {
      for (let step = 0; churning; step++) {
        await churnStep(step);
        await sleep(250);
      }
    })();
    const errors = watchErrors(() => churning);

    // What an operator does (docs/upgrades.md): HEAD's agent connects with its engine instance's own role, so
    // first the database is migrated (version N-1 keeps serving against N's schema) and the instance admitted,
    // its connection string in the Secret gitops-service-agent-database; then the agent waits while the
    // backend rolls.
    await env.admitAgent();
    await kubectl('rollout', 'pause', 'deployment/gitops-cluster-agent', '-n', SERVICE_NS);
    await env.applyKustomization(join(repoRoot, 'manifests/overlays/local-cluster'));
    phase = 'backend rolling';
    const started = Date.now();
    rolls.set('gitops-backend', await rolledOut('gitops-backend'));
    const backendSeconds = (Date.now() - started) / 1000;
    phase = 'agent rolling';
    await kubectl('rollout', 'resume', 'deployment/gitops-cluster-agent', '-n', SERVICE_NS);
    rolls.set('gitops-cluster-agent', await rolledOut('gitops-cluster-agent'));
    const agentSeconds = (Date.now() - started) / 1000 - backendSeconds;
    // A little more churn against HEAD alone, then let everything settle.
    phase = 'after';
    await sleep(10_000);
    churning = false;
    await churn;
    await errors;
    process.stderr.write(
      `${JSON.stringify({ figure: 'upgrade', from: FROM, backendSeconds, agentSeconds, churn: done, live: live.size, deleted: gone.length })}\n`,
    );

    for (const component of COMPONENTS) {
      const samples = rolls.get(component) ?? [];
      assert.ok(
        samples.some((s) => s.oldReady > 0 && s.newReady > 0),
        `${component}: old and new replicas served side by side`,
      );
      assert.ok(
        samples.every((s) => s.oldReady + s.newReady >= 1),
        `${component} always had a ready replica`,
      );
      assert.ok(
        samples.every((s) => s.pods <= 3),
        `${component}: one replica at a time (at most one Pod beyond its two)`,
      );
    }
    assert.ok(gone.length > 0 && live.size > INITIAL, 'the churn created and deleted during the roll');

    await converged('every deployment Synced/Healthy at the head, its ConfigMap current');
    assert.deepEqual([...errorsSeen], [], 'no GitOpsDeployment reported ErrorOccurred at any time');

    // Nothing waits, runs or failed in the database, and its schema is HEAD's.
    const url = new URL(env.postgres.url);
    url.pathname = '/gitops';
    const db = new pg.Client({ connectionString: url.toString() });
    await db.connect();
    try {
      const unfinished = await db.query<{ state: string; count: number }>(
        `select state, count(*)::int as count from operation where state <> 'Completed' group by state`,
      );
      assert.deepEqual(unfinished.rows, [], 'every operation Completed');
      const migrations = (await db.query<{ name: string }>('select name from kysely_migration order by name'))
        .rows;
      const shipped = (await readdir(join(repoRoot, 'db/migrations')))
        .filter((f) => f.endsWith('.sql'))
        .map((f) => f.replace(/\.sql$/, ''))
        .sort();
      assert.deepEqual(
        migrations.map((m) => m.name),
        shipped,
      );
    } finally {
      await db.end();
    }
  });

  it("every replica runs HEAD's version and answers /version; one agent is active; none restarted", async () => {
    const version = (
      JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as { version: string }
    ).version;
    for (const [component, port] of [
      ['gitops-backend', 8080],
      ['gitops-cluster-agent', 8081],
    ] as const) {
      const pods = await readyPods(component);
      assert.equal(pods.length, 2, `${component}: two replicas ready`);
      for (const pod of pods) {
        assert.equal(imageOf(pod), IMAGE);
        assert.equal(
          pod.status?.containerStatuses?.[0]?.restartCount,
          0,
          `${pod.metadata.name} never restarted`,
        );
        // The node's Pod network is reachable from this host (its bridge's gateway).
        const answer = (await (await fetch(`http://${pod.status?.podIP}:${port}/version`)).json()) as {
          component: string;
          version: string;
          revision: string;
        };
        assert.equal(answer.component, component.replace(/^gitops-/, ''));
        assert.equal(answer.version, version);
        assert.match(answer.revision, /^[0-9a-f]{12}(-dirty)?$/, 'the commit the image was built from');
        if (component === 'gitops-cluster-agent') {
          // HEAD's agents took the instance's own role from the Secret made before the roll.
          const text = await kubectl('logs', '-n', SERVICE_NS, pod.metadata.name, '--tail=-1');
          assert.match(text, /"msg":"engine instance registered"/);
          assert.doesNotMatch(text, /backend's database role/, `${pod.metadata.name}: the backend's role`);
        }
      }
    }
    assert.equal(await env.activeAgents(), 1, 'one active agent, one standby');
  });

  /** Creates `d-<next>` from `cm/<next>`; false once the pool of folders is used up. */
  async function create(): Promise<boolean> {
    const index = live.size + gone.length;
    if (index >= POOL) return false;
    const path = `cm/${index}`;
    const file = join(env.workDir, `d-${index}.json`);
    await writeFile(
      file,
      JSON.stringify({
        apiVersion: 'managed-gitops.redhat.com/v1alpha1',
        kind: 'GitOpsDeployment',
        metadata: { name: `d-${index}`, namespace: tenant },
        spec: { source: { repoURL: repo.fileUrl, path }, type: 'automated' },
      }),
    );
    const created = JSON.parse(await kubectl('create', '-f', file, '-o', 'json')) as KubeItem;
    live.set(`d-${index}`, { index, uid: created.metadata.uid ?? '', path });
    return true;
  }

  /** One change of the churn: creates, a spec change (the other folder), a delete, a Git commit. */
  async function churnStep(step: number): Promise<void> {
    const names = [...live.keys()];
    const pick = () => live.get(names[(step * 7) % names.length]!)!;
    switch (step % 5) {
      case 0:
      case 1:
        if (await create()) count('created');
        return;
      case 2: {
        const d = pick();
        const path = d.path.startsWith('cm/') ? `alt/${d.index}` : `cm/${d.index}`;
        await kubectl(
          'patch',
          'gitopsdeployment',
          `d-${d.index}`,
          '-n',
          tenant,
          '--type=merge',
          '-p',
          JSON.stringify({ spec: { source: { path } } }),
        );
        d.path = path;
        count('changed');
        return;
      }
      case 3: {
        const d = pick();
        live.delete(`d-${d.index}`);
        gone.push(d);
        await kubectl('delete', 'gitopsdeployment', `d-${d.index}`, '-n', tenant, '--wait=false');
        count('deleted');
        return;
      }
      default: {
        // A new commit of a deployed folder: Argo CD goes OutOfSync, syncs, and the status follows.
        const d = pick();
        const value = `${d.path}@${step}`;
        values.set(d.path, value);
        await repo.commit({ [`${d.path}/config.yaml`]: manifest.configMap(`cm-${d.index}`, { value }) });
        count('committed');
      }
    }
  }

  /** Samples the component at each look (every 100 ms plus kubectl's time) until it runs HEAD's image only. */
  async function rolledOut(component: string): Promise<RollSample[]> {
    const samples: RollSample[] = [];
    await eventually(
      `${component} rolled out to ${IMAGE}`,
      async () => {
        const pods = await podsOf(component);
        const ready = pods.filter((p) => p.status?.phase === 'Running' && isTrue(p, 'Ready'));
        const sample = {
          oldReady: ready.filter((p) => imageOf(p) === oldImage).length,
          newReady: ready.filter((p) => imageOf(p) === IMAGE).length,
          pods: pods.length,
        };
        samples.push(sample);
        return sample.newReady === 2 && pods.length === 2 && sample.oldReady === 0;
      },
      CONVERGE_MS,
    );
    log(`${component} rolled: ${JSON.stringify(samples)}`);
    return samples;
  }

  /** Records every GitOpsDeployment that reports ErrorOccurred=True while `running()`. */
  async function watchErrors(running: () => boolean): Promise<void> {
    while (running()) {
      for (const gd of await items('gitopsdeployments', '-n', tenant)) {
        const error = gd.status?.conditions?.find((c) => c.type === 'ErrorOccurred' && c.status === 'True');
        if (error) errorsSeen.add(`${gd.metadata.name}: ${error.message ?? ''}`);
      }
      await sleep(2000);
    }
  }

  /**
   * Every live deployment Synced/Healthy at the repository's head with its ConfigMap holding its folder's
   * latest value and exactly its Application; every deleted one gone with its Application and ConfigMap.
   */
  async function converged(what: string): Promise<void> {
    await eventually(
      what,
      async () => {
        const head = await repo.head();
        const gds = await items('gitopsdeployments', '-n', tenant);
        if (gds.length !== live.size) return false;
        const configMaps = new Map(
          (await items('configmaps', '-n', tenant)).map((c) => [c.metadata.name, c.data?.value]),
        );
        for (const gd of gds) {
          const d = live.get(gd.metadata.name);
          if (!d || gd.spec?.source?.path !== d.path) return false;
          if (gd.status?.sync?.status !== 'Synced' || gd.status?.health?.status !== 'Healthy') return false;
          if (gd.status.sync.revision !== head || isTrue(gd, 'ErrorOccurred')) return false;
          if (configMaps.get(`cm-${d.index}`) !== values.get(d.path)) return false;
        }
        if (gone.some((d) => configMaps.has(`cm-${d.index}`))) return false;
        const apps = (await items('applications.argoproj.io', '-n', ARGOCD_NS)).map((a) => a.metadata.name);
        const expected = [...live.values()].map((d) => `gitopsdepl-${d.uid}`);
        return apps.length === expected.length && expected.every((name) => apps.includes(name));
      },
      CONVERGE_MS,
    );
  }
});

/**
 * Builds `image` from a checkout's Dockerfile unless the Docker engine has it already, on the base image
 * `pnpm images` used (the classic builder's layer cache shares what the two Dockerfiles have in common).
 */
async function buildImageOnce(dir: string, image: string, revision: string): Promise<void> {
  const has = (name: string) =>
    execFileAsync('docker', ['image', 'inspect', name]).then(
      () => true,
      () => false,
    );
  if (await has(image)) return;
  const base =
    process.env.GITOPS_NODE_IMAGE ??
    ((await has('node:24'))
      ? 'node:24'
      : `gitops-service/node:24-${process.env.GITOPS_IMAGE_TAG ?? 'local'}`);
  const caDir = '/usr/local/share/ca-certificates';
  const cas = await readdir(caDir).catch(() => [] as string[]);
  const extraCa = (
    await Promise.all(cas.filter((f) => f.endsWith('.crt')).map((f) => readFile(join(caDir, f), 'utf8')))
  ).join('\n');
  const started = Date.now();
  await execFileAsync(
    'docker',
    [
      'build',
      '--network',
      'host',
      '--build-arg',
      `NODE_IMAGE=${base}`,
      '--build-arg',
      `EXTRA_CA_CERTS=${extraCa}`,
      '--build-arg',
      `GITOPS_REVISION=${revision}`,
      '-t',
      image,
      dir,
    ],
    { env: { ...process.env, DOCKER_BUILDKIT: '0' }, maxBuffer: 256 * 1024 * 1024 },
  );
  process.stderr.write(`[upgrade] ${image} built in ${((Date.now() - started) / 1000).toFixed(0)}s\n`);
}
