/**
 * The chaos tier's workload: what users do while the faults happen. A plan drawn from a seed (creates,
 * spec changes and deletes of GitOpsDeployments spread over the churn window; SyncRuns of the manual ones;
 * ManagedEnvironments and RepositoryCredentials, one of each deleted again; an App Studio application
 * promoted to two environments; three tenants moved between the two engine instances and back by their
 * namespace label), run against the API server the way a user's client would: a request that
 * meets the API server down is sent again, and a create answered AlreadyExists on such a retry is taken
 * as done. Every step is recorded, so that the invariants know what each object should look like.
 */
import { AppStudioKinds, type KindDescriptor } from '@gitops/api';
import { gitOpsDeployment, repositoryCredential } from '@gitops/api/testing';
import { createGitRepo, type GitRepo, manifest } from '@gitops/local-env';
import { collectionPath, KubeApiError } from '@gitops/shared';
import { type ExternalTarget, externalCluster } from '../fixture/external-cluster.ts';
import {
  create,
  createTenantNamespace,
  type GitOpsDeployment,
  type GitOpsDeploymentSpec,
  GROUP_VERSION,
  get,
  list,
  mergePatch,
  paths,
  remove,
} from '../fixture/kube.ts';
import type { ChaosEnvironment } from './harness.ts';
import { sleep } from './harness.ts';

export const SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';
const ENGINE_INSTANCE_LABEL = 'managed-gitops.redhat.com/engine-instance';
const REPOSITORY_CREDENTIAL_SECRET = 'managed-gitops.redhat.com/repository-credential';
const PRIVATE_USER = 'chaos';
const PRIVATE_PASSWORD = 'chaos-Pa55word-5eed';
/** How long a user's client keeps re-sending a request the API server did not answer. */
const RETRY_FOR_MS = 180_000;

export const gitopsPath = (plural: string, namespace?: string, name?: string) =>
  `/apis/${GROUP_VERSION}${namespace ? `/namespaces/${namespace}` : ''}/${plural}${name ? `/${name}` : ''}`;

export type DeploymentKind = 'automated' | 'manual' | 'environment' | 'private';
export type Version = 'v1' | 'v2' | 'v3';

/**
 * The ConfigMap a deployment's path holds: v1 and v2 are two versions of `chaos-<i>`; v3 (after a re-create)
 * is another object, `chaos-<i>-new`, so that the old Application's prune and the new one's sync never meet
 * on one object.
 */
export const configMapName = (index: number, version: Version) =>
  version === 'v3' ? `chaos-${index}-new` : `chaos-${index}`;

/** One GitOpsDeployment of the plan, and what became of it. */
export interface DeploymentRecord {
  index: number;
  kind: DeploymentKind;
  namespace: string;
  name: string;
  /** Where its ConfigMap `chaos-<index>` lands. */
  destinationNamespace: string;
  repoURL: string;
  /** Seconds into the churn. */
  createAt: number;
  changeAt?: number;
  /** Deleted and created again under the same name (a new object: new uid, new Application), at v3. */
  recreateAt?: number;
  deleteAt?: number;
  // What happened:
  uid?: string;
  /** The uids of the objects this name had before a re-create. */
  previousUids: string[];
  version: Version;
  deleted: boolean;
  syncRuns: string[];
  /** What the test did to it, with the seconds since the churn started (for a failure's report). */
  events: string[];
}

export interface ChurnCounts {
  created: number;
  changed: number;
  recreated: number;
  deleted: number;
  syncRuns: number;
  managedEnvironments: number;
  managedEnvironmentsDeleted: number;
  repositoryCredentials: number;
  repositoryCredentialsDeleted: number;
  promotionRuns: number;
  /** Namespace label changes that move a tenant to the other engine instance. */
  tenantMoves: number;
  /** Requests sent again because the API server did not answer. */
  apiRetries: number;
  /** SyncRuns requested again after the faults, for a manual deployment whose sync Argo CD itself failed. */
  syncRetries: number;
}

/**
 * A SyncRun whose sync Argo CD ran and ended in error itself (e.g. it could not read the cluster while the API
 * server restarted): truthfully Failed, the SyncRun reporting Argo CD's own verdict. Nothing syncs a manual
 * deployment after that but its user asking again.
 */
export function syncFailedInArgoCd(
  status:
    | { phase?: string; startedAt?: string; conditions?: { type?: string; message?: string }[] }
    | undefined,
): boolean {
  const error = status?.conditions?.find((c) => c.type === 'ErrorOccurred')?.message ?? '';
  return (
    status?.phase === 'Failed' &&
    typeof status.startedAt === 'string' &&
    /^the sync ended with phase (Error|Failed): /.test(error) &&
    !/no longer exists|terminated before/.test(error)
  );
}

export interface ChurnPlan {
  readonly deployments: DeploymentRecord[];
  readonly tenants: string[];
  readonly appStudioTenant: string;
  readonly promotionRuns: string[];
  /** ManagedEnvironments and RepositoryCredentials that must exist at the end, and those deleted. */
  readonly environments: { namespace: string; name: string; deleted: boolean }[];
  readonly credentials: { namespace: string; name: string; deleted: boolean }[];
  readonly heads: Map<string, string>;
  /** The engine instance each tenant namespace the test labelled must end on (the others: placed by load). */
  readonly placements: Map<string, string>;
  readonly counts: ChurnCounts;
  /** Runs every step at its time; resolves when the last one is done. */
  run(startedAt: number): Promise<void>;
  /** Ends what still runs (the played component service). */
  stop(): Promise<void>;
  /**
   * After the faults, as a user would: a manual deployment whose latest sync Argo CD itself failed gets a new
   * SyncRun (which must then succeed like any other). Returns how many were asked.
   */
  retryFailedSyncs(): Promise<number>;
  /**
   * The soak's steady churn: `count` live deployments (drawn; not the re-created ones) switch their spec to
   * the other version of their ConfigMap (v1 ↔ v2), a manual one with a SyncRun after it. `startedAt` dates
   * the events. Returns how many were changed.
   */
  changeSome(count: number, startedAt: number): Promise<number>;
}

const isUnanswered = (error: unknown) =>
  error instanceof KubeApiError &&
  (error.statusCode === 0 || error.statusCode >= 500 || error.statusCode === 429);
const isAlreadyExists = (error: unknown) => error instanceof KubeApiError && error.statusCode === 409;

export interface ChurnOptions {
  deployments: number;
  tenants: number;
  churnSeconds: number;
  random: () => number;
  log: (line: string) => void;
}

/** Draws the plan and prepares what users would have beforehand: namespaces, Git repositories, targets. */
export async function planChurn(env: ChaosEnvironment, options: ChurnOptions): Promise<ChurnPlan> {
  const { system } = env;
  const kc = system.kc;
  const rnd = options.random;
  const between = (a: number, b: number) => a + rnd() * (b - a);
  const counts: ChurnCounts = {
    created: 0,
    changed: 0,
    recreated: 0,
    deleted: 0,
    syncRuns: 0,
    syncRetries: 0,
    managedEnvironments: 0,
    managedEnvironmentsDeleted: 0,
    repositoryCredentials: 0,
    repositoryCredentialsDeleted: 0,
    promotionRuns: 0,
    tenantMoves: 0,
    apiRetries: 0,
  };
  let stopped = false;

  /** Sends `action` until the API server answers (a user's client retrying through a restart). */
  async function persist<T>(what: string, action: (retry: boolean) => Promise<T>): Promise<T> {
    const deadline = Date.now() + RETRY_FOR_MS;
    for (let retry = false; ; retry = true) {
      try {
        return await action(retry);
      } catch (error) {
        if (!isUnanswered(error) || Date.now() > deadline) {
          throw new Error(`${what}: ${String(error)}`, { cause: error });
        }
        counts.apiRetries++;
        await sleep(1_000);
      }
    }
  }
  /** Creates once: AlreadyExists after a request that got no answer means the first one went through. */
  const createOnce = <T>(what: string, createIt: () => Promise<T>, read: () => Promise<T | undefined>) =>
    persist(what, async (retry) => {
      try {
        return await createIt();
      } catch (error) {
        if (!(retry && isAlreadyExists(error))) throw error;
        const existing = await read();
        if (existing === undefined) throw error;
        return existing;
      }
    });

  // Tenants, and the repositories: one ConfigMap `chaos-<i>` per deployment and version.
  // Tenants 0 (a ManagedEnvironment), 2 (a RepositoryCredential and the spare environment) and 4 start on
  // the first engine instance by their label and move during the churn; the others are placed by load.
  const instances = [system.engineInstanceName, system.secondEngineInstanceName] as const;
  const movingTenants = [0, 2, 4].filter((t) => t < options.tenants);
  const placements = new Map<string, string>();
  const tenants: string[] = [];
  for (let t = 0; t < options.tenants; t++) {
    const labels = movingTenants.includes(t) ? { [ENGINE_INSTANCE_LABEL]: instances[0] } : undefined;
    const namespace = await createTenantNamespace(kc, `chaos-${t}`, labels);
    if (labels) placements.set(namespace, instances[0]);
    tenants.push(namespace);
  }
  const appStudioTenant = await createTenantNamespace(kc, 'chaos-appstudio');
  const layout = (indexes: number[]) => {
    const files: Record<string, string> = {};
    for (const i of indexes)
      for (const version of ['v1', 'v2', 'v3'] as const)
        files[`apps/${i}/${version}/configmap.yaml`] = manifest.configMap(configMapName(i, version), {
          deployment: String(i),
          version,
        });
    return files;
  };

  const n = options.deployments;
  const environmentCount = Math.max(2, Math.round(n * 0.05));
  const privateCount = Math.max(2, Math.round(n * 0.04));
  const manualCount = Math.max(2, Math.round(n * 0.06));
  const kinds: DeploymentKind[] = Array.from({ length: n }, (_, i) =>
    i < environmentCount
      ? 'environment'
      : i < environmentCount + privateCount
        ? 'private'
        : i < environmentCount + privateCount + manualCount
          ? 'manual'
          : 'automated',
  );
  // Shuffle, so that every kind is spread over the window.
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j] as DeploymentKind, kinds[i] as DeploymentKind];
  }
  const indexesOf = (kind: DeploymentKind) => kinds.flatMap((k, i) => (k === kind ? [i] : []));

  const publicRepo: GitRepo = await createGitRepo(
    env.gitRoot,
    'chaos',
    layout([...indexesOf('automated'), ...indexesOf('manual'), ...indexesOf('environment')]),
  );
  const privateRepo = await createGitRepo(env.git.reposDir, 'private', layout(indexesOf('private')));
  env.git.setPassword('private', PRIVATE_USER, PRIVATE_PASSWORD);
  await createGitRepo(env.git.reposDir, 'spare', { 'README.txt': 'spare' });
  env.git.setPassword('spare', PRIVATE_USER, PRIVATE_PASSWORD);
  const privateURL = env.git.url('private');
  const heads = new Map([
    [publicRepo.fileUrl, await publicRepo.head()],
    [privateURL, await privateRepo.head()],
  ]);

  // ManagedEnvironments: tenants 0 and 1 deploy through one each into a namespace of the "external
  // cluster" (the same API server, a ServiceAccount that may only administer that namespace); tenant 2 has
  // one that is deleted again. RepositoryCredentials: tenants 2 and 3 read the private repository; tenant 4
  // has one for another repository that is deleted again.
  const external = externalCluster(kc, system.shard);
  const targets: ExternalTarget[] = [];
  for (let t = 0; t < 3; t++) targets.push(await external.target(`chaos-target-${t}`));
  const environmentTenants = [0, 1];
  const credentialTenants = [2, 3];

  const window = options.churnSeconds;
  const deployments: DeploymentRecord[] = kinds.map((kind, index) => {
    const tenantIndex =
      kind === 'environment'
        ? (environmentTenants[index % 2] as number)
        : kind === 'private'
          ? (credentialTenants[index % 2] as number)
          : index % tenants.length;
    const namespace = tenants[tenantIndex] as string;
    const createAt = (index / n) * window * 0.7 + rnd() * 2;
    const record: DeploymentRecord = {
      index,
      kind,
      namespace,
      name: `app-${index}`,
      destinationNamespace:
        kind === 'environment' ? (targets[tenantIndex] as ExternalTarget).namespace : namespace,
      repoURL: kind === 'private' ? privateURL : publicRepo.fileUrl,
      createAt,
      version: 'v1',
      previousUids: [],
      deleted: false,
      syncRuns: [],
      events: [],
    };
    const roll = rnd();
    // 30 % get a spec change, 5 % of all (changed ones) are then deleted and created again under the same
    // name, 20 % are deleted (some of those right after they were created).
    if (roll < 0.3) record.changeAt = Math.min(window, createAt + between(2, 30));
    if (roll >= 0.05 && roll < 0.1)
      record.recreateAt = Math.min(window, (record.changeAt ?? createAt) + between(2, 30));
    if (roll > 0.8 || roll < 0.05)
      record.deleteAt = Math.min(
        window,
        (record.changeAt ?? createAt) + (rnd() < 0.3 ? between(0, 2) : between(2, 30)),
      );
    return record;
  });

  const specOf = (d: DeploymentRecord): GitOpsDeploymentSpec => ({
    source: { repoURL: d.repoURL, path: `apps/${d.index}/${d.version}` },
    type: d.kind === 'manual' ? 'manual' : 'automated',
    ...(d.kind === 'environment'
      ? { destination: { environment: 'external', namespace: d.destinationNamespace } }
      : {}),
  });
  const deploymentPath = (d: DeploymentRecord) => paths.gitopsDeployment(d.namespace, d.name);
  const syncRunPath = (namespace: string, name?: string) =>
    gitopsPath('gitopsdeploymentsyncruns', namespace, name);

  async function requestSync(d: DeploymentRecord) {
    const name = `${d.name}-sync-${d.syncRuns.length + 1}`;
    await createOnce(
      `SyncRun ${d.namespace}/${name}`,
      () => system.createSyncRun(d.namespace, name, { gitopsDeploymentName: d.name }),
      () => get(kc, syncRunPath(d.namespace, name)),
    );
    d.syncRuns.push(name);
    counts.syncRuns++;
    d.events.push(`SyncRun ${name}`);
  }

  const at = (startedAt: number, seconds: number) => sleep(startedAt + seconds * 1000 - Date.now());

  async function runDeployment(startedAt: number, d: DeploymentRecord) {
    const event = (what: string) =>
      d.events.push(`t=${((Date.now() - startedAt) / 1000).toFixed(1)}s ${what}`);
    await at(startedAt, d.createAt);
    if (stopped) return;
    await createDeployment(d);
    event(`created ${d.uid}`);
    if (d.kind === 'manual') await requestSync(d);
    if (d.changeAt !== undefined) {
      await at(startedAt, d.changeAt);
      if (stopped) return;
      d.version = 'v2';
      await persist(`change ${d.namespace}/${d.name}`, () =>
        mergePatch(kc, deploymentPath(d), { spec: { source: { path: `apps/${d.index}/v2` } } }),
      );
      counts.changed++;
      event('changed to v2');
      if (d.kind === 'manual') await requestSync(d);
    }
    if (d.recreateAt !== undefined) {
      await at(startedAt, d.recreateAt);
      if (stopped) return;
      await persist(`delete ${d.namespace}/${d.name} to re-create it`, () => remove(kc, deploymentPath(d)));
      d.previousUids.push(d.uid ?? '');
      d.version = 'v3';
      await createDeployment(d);
      counts.recreated++;
      event(`re-created ${d.uid} at v3`);
      if (d.kind === 'manual') await requestSync(d);
    }
    if (d.deleteAt !== undefined) {
      await at(startedAt, d.deleteAt);
      if (stopped) return;
      await persist(`delete ${d.namespace}/${d.name}`, () => remove(kc, deploymentPath(d)));
      d.deleted = true;
      counts.deleted++;
      event('deleted');
      // The user removes the SyncRuns of a deployment they deleted too (one left would wait for its parent).
      for (const name of d.syncRuns)
        await persist(`delete SyncRun ${name}`, () => remove(kc, syncRunPath(d.namespace, name)));
    }
  }

  async function createDeployment(d: DeploymentRecord) {
    const gd = await createOnce(
      `create ${d.namespace}/${d.name}`,
      () =>
        create<GitOpsDeployment>(
          kc,
          paths.gitopsDeployments(d.namespace),
          gitOpsDeployment(d.name, specOf(d) as Parameters<typeof gitOpsDeployment>[1], {
            labels: { [SHARD_LABEL]: system.shard },
          }),
        ),
      () => get<GitOpsDeployment>(kc, deploymentPath(d)),
    );
    d.uid = gd.metadata.uid;
    counts.created++;
  }

  const environments: ChurnPlan['environments'] = [];
  const credentials: ChurnPlan['credentials'] = [];

  async function createEnvironment(namespace: string, name: string, target: ExternalTarget) {
    const objects = external.environmentObjects(name, target);
    await createOnce(
      `Secret ${namespace}/${name}-creds`,
      () => create(kc, `/api/v1/namespaces/${namespace}/secrets`, objects.secret),
      () => get(kc, `/api/v1/namespaces/${namespace}/secrets/${name}-creds`),
    );
    await createOnce(
      `ManagedEnvironment ${namespace}/${name}`,
      () => create(kc, gitopsPath('gitopsdeploymentmanagedenvironments', namespace), objects.environment),
      () => get(kc, gitopsPath('gitopsdeploymentmanagedenvironments', namespace, name)),
    );
    counts.managedEnvironments++;
  }

  async function createCredential(namespace: string, name: string, repository: string) {
    await createOnce(
      `Secret ${namespace}/${name}-creds`,
      () =>
        create(kc, `/api/v1/namespaces/${namespace}/secrets`, {
          metadata: { name: `${name}-creds` },
          type: REPOSITORY_CREDENTIAL_SECRET,
          stringData: { username: PRIVATE_USER, password: PRIVATE_PASSWORD },
        }),
      () => get(kc, `/api/v1/namespaces/${namespace}/secrets/${name}-creds`),
    );
    await createOnce(
      `RepositoryCredential ${namespace}/${name}`,
      () =>
        create(
          kc,
          gitopsPath('gitopsdeploymentrepositorycredentials', namespace),
          repositoryCredential(
            name,
            { repository, secret: `${name}-creds` },
            { labels: { [SHARD_LABEL]: system.shard } },
          ),
        ),
      () => get(kc, gitopsPath('gitopsdeploymentrepositorycredentials', namespace, name)),
    );
    counts.repositoryCredentials++;
  }

  async function runEnvironmentsAndCredentials(startedAt: number) {
    const steps: { atSeconds: number; run: () => Promise<void> }[] = [];
    for (const t of environmentTenants) {
      const namespace = tenants[t] as string;
      environments.push({ namespace, name: 'external', deleted: false });
      steps.push({
        atSeconds: between(0, window * 0.3),
        run: () => createEnvironment(namespace, 'external', targets[t] as ExternalTarget),
      });
    }
    for (const t of credentialTenants) {
      const namespace = tenants[t] as string;
      credentials.push({ namespace, name: 'private', deleted: false });
      steps.push({
        atSeconds: between(0, window * 0.3),
        run: () => createCredential(namespace, 'private', privateURL),
      });
    }
    const spareEnvironment = { namespace: tenants[2] as string, name: 'spare', deleted: false };
    environments.push(spareEnvironment);
    const spareCredential = {
      namespace: tenants[4 % tenants.length] as string,
      name: 'spare',
      deleted: false,
    };
    credentials.push(spareCredential);
    const spareAt = between(window * 0.2, window * 0.5);
    steps.push({
      atSeconds: spareAt,
      run: async () => {
        await createEnvironment(spareEnvironment.namespace, 'spare', targets[2] as ExternalTarget);
        await createCredential(spareCredential.namespace, 'spare', env.git.url('spare'));
        await at(startedAt, spareAt + between(5, 30));
        await persist('delete the spare ManagedEnvironment', () =>
          remove(kc, gitopsPath('gitopsdeploymentmanagedenvironments', spareEnvironment.namespace, 'spare')),
        );
        spareEnvironment.deleted = true;
        counts.managedEnvironmentsDeleted++;
        await persist('delete the spare RepositoryCredential', () =>
          remove(kc, gitopsPath('gitopsdeploymentrepositorycredentials', spareCredential.namespace, 'spare')),
        );
        spareCredential.deleted = true;
        counts.repositoryCredentialsDeleted++;
      },
    });
    await Promise.all(
      steps.map(async (step) => {
        await at(startedAt, step.atSeconds);
        if (!stopped) await step.run();
      }),
    );
  }

  // App Studio: an application with one component, its snapshot, two environments, and a promotion to each
  // (the second waits for the first: one active promotion per application). The test plays the component
  // service, which writes each binding's status.components.
  const appStudioRepo = await createGitRepo(env.gitRoot, 'chaos-appstudio', {
    'components/web/overlays/staging/config.yaml': manifest.configMap('web-staging', {
      environment: 'staging',
    }),
    'components/web/overlays/prod/config.yaml': manifest.configMap('web-prod', { environment: 'prod' }),
  });
  heads.set(appStudioRepo.fileUrl, await appStudioRepo.head());
  const appStudioPath = (kind: KindDescriptor, name = '') =>
    `${collectionPath({ ...kind.resource, namespace: appStudioTenant })}${name ? `/${name}` : ''}`;
  const createAppStudio = (kind: KindDescriptor, name: string, spec: Record<string, unknown>) =>
    createOnce(
      `${kind.kind} ${name}`,
      () =>
        create(kc, appStudioPath(kind), {
          apiVersion: kind.apiVersion,
          kind: kind.kind,
          metadata: { name, namespace: appStudioTenant, labels: { [SHARD_LABEL]: system.shard } },
          spec,
        }),
      () => get(kc, appStudioPath(kind, name)),
    );
  const promotionRuns = ['shop-1-to-staging', 'shop-1-to-prod'];

  async function playComponentService() {
    const head = await appStudioRepo.head();
    while (!stopped) {
      try {
        for (const b of await list(kc, appStudioPath(AppStudioKinds.SnapshotEnvironmentBinding))) {
          if ((b.status as { components?: unknown } | undefined)?.components) continue;
          const spec = b.spec as { environment: string; components: { name: string }[] };
          await mergePatch(
            kc,
            `${appStudioPath(AppStudioKinds.SnapshotEnvironmentBinding, b.metadata.name)}/status`,
            {
              status: {
                components: spec.components.map((c) => ({
                  name: c.name,
                  gitopsRepository: {
                    url: appStudioRepo.fileUrl,
                    branch: 'main',
                    path: `components/${c.name}/overlays/${spec.environment}`,
                    generatedResources: [],
                    commitID: head,
                  },
                })),
              },
            },
          );
        }
      } catch {
        // The API server may be restarting; bindings come and go: the next round sees the current state.
      }
      await sleep(1_000);
    }
  }

  async function runAppStudio(startedAt: number) {
    await at(startedAt, between(0, window * 0.2));
    await createAppStudio(AppStudioKinds.Application, 'shop', { displayName: 'shop' });
    await createAppStudio(AppStudioKinds.Component, 'web', { componentName: 'web', application: 'shop' });
    await createAppStudio(AppStudioKinds.Snapshot, 'shop-1', {
      application: 'shop',
      components: [{ name: 'web', containerImage: 'images.example/example/web@sha256:1' }],
    });
    for (const environment of ['staging', 'prod'])
      await createAppStudio(AppStudioKinds.Environment, environment, {
        displayName: environment,
        deploymentStrategy: 'Manual',
      });
    await at(startedAt, between(window * 0.2, window * 0.4));
    await createAppStudio(AppStudioKinds.PromotionRun, 'shop-1-to-staging', {
      snapshot: 'shop-1',
      application: 'shop',
      manualPromotion: { targetEnvironment: 'staging' },
    });
    counts.promotionRuns++;
    await at(startedAt, between(window * 0.4, window * 0.6));
    await createAppStudio(AppStudioKinds.PromotionRun, 'shop-1-to-prod', {
      snapshot: 'shop-1',
      application: 'shop',
      manualPromotion: { targetEnvironment: 'prod' },
    });
    counts.promotionRuns++;
  }

  /** Each moving tenant goes to the other instance and back, and half of them over again. */
  async function runTenantMoves(startedAt: number) {
    await Promise.all(
      movingTenants.map(async (t) => {
        const namespace = tenants[t] as string;
        const times = [between(0.2, 0.45), between(0.55, 0.8)];
        if (rnd() < 0.5) times.push(between(0.85, 0.95));
        for (const [i, fraction] of times.entries()) {
          await at(startedAt, fraction * window);
          if (stopped) return;
          const to = instances[(i + 1) % 2] as string;
          await persist(`move ${namespace} to ${to}`, () =>
            mergePatch(kc, `/api/v1/namespaces/${namespace}`, {
              metadata: { labels: { [ENGINE_INSTANCE_LABEL]: to } },
            }),
          );
          placements.set(namespace, to);
          counts.tenantMoves++;
          for (const d of deployments)
            if (d.namespace === namespace)
              d.events.push(`t=${((Date.now() - startedAt) / 1000).toFixed(1)}s tenant moved to ${to}`);
        }
      }),
    );
  }

  let componentService: Promise<void> | undefined;
  return {
    async changeSome(count, startedAt) {
      const candidates = deployments.filter((d) => !d.deleted && d.uid && d.version !== 'v3');
      const chosen: DeploymentRecord[] = [];
      while (chosen.length < Math.min(count, candidates.length)) {
        const [d] = candidates.splice(Math.floor(rnd() * candidates.length), 1);
        if (d) chosen.push(d);
      }
      await Promise.all(
        chosen.map(async (d) => {
          const version = d.version === 'v1' ? 'v2' : 'v1';
          await persist(`change ${d.namespace}/${d.name}`, () =>
            mergePatch(kc, deploymentPath(d), { spec: { source: { path: `apps/${d.index}/${version}` } } }),
          );
          d.version = version;
          counts.changed++;
          d.events.push(`t=${((Date.now() - startedAt) / 1000).toFixed(1)}s changed to ${version} (soak)`);
          if (d.kind === 'manual') await requestSync(d);
        }),
      );
      return chosen.length;
    },
    async retryFailedSyncs() {
      let asked = 0;
      for (const d of deployments) {
        const latest = d.syncRuns.at(-1);
        if (d.kind !== 'manual' || d.deleted || !latest) continue;
        const run = await get<{ status?: Parameters<typeof syncFailedInArgoCd>[0] }>(
          kc,
          syncRunPath(d.namespace, latest),
        ).catch(() => undefined);
        if (!syncFailedInArgoCd(run?.status)) continue;
        await requestSync(d);
        counts.syncRetries++;
        asked++;
      }
      return asked;
    },
    deployments,
    tenants,
    appStudioTenant,
    promotionRuns,
    environments,
    credentials,
    heads,
    placements,
    counts,
    async run(startedAt) {
      componentService = playComponentService();
      await Promise.all([
        ...deployments.map((d) => runDeployment(startedAt, d)),
        runEnvironmentsAndCredentials(startedAt),
        runAppStudio(startedAt),
        runTenantMoves(startedAt),
      ]);
    },
    async stop() {
      stopped = true;
      await componentService;
    },
  };
}
