/**
 * Rendering a binding's Snapshot into its Application's GitOps repository (README: "GitOps repository
 * rendering"), the part App Studio's application service did: for one binding whose Application carries
 * `managed-gitops.redhat.com/render-gitops-repository: "true"` and names `spec.gitOpsRepository`,
 * 1. the Snapshot's image of each of the binding's components is written into the Environment's overlay
 *    (`components/<component>/overlays/<environment>/kustomization.yaml`, `images`; by digest when the
 *    reference has one), with the Environment's `configuration.env` where the overlay has a configMapGenerator
 *    `<component>-environment`; the base `components/<component>/base` must exist;
 * 2. committed (message naming the Snapshot, the Environment and the PromotionRun) only when something
 *    changed, and pushed; someone else's push in between: fetched, rendered and pushed again (5 times);
 * 3. `status.components` (url, branch, path, commitID) and `status.gitopsRepoConditions` (one
 *    `GitOpsResourcesGenerated` condition for the binding's generation) are written; the binding feature and
 *    the PromotionRun do the rest.
 * A failure writes only the condition (False, the reason in words, no credential): `status.components` keeps
 * the last render, so nothing half-written is deployed. Unreachable repositories are tried again with backoff.
 * A binding whose `status.components` or `gitopsRepoConditions` another writer (App Studio's own service)
 * manages is left alone.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  APPSTUDIO_FIELD_MANAGER,
  AppStudioKinds,
  CoreKinds,
  Kinds,
  RenderEventReason,
  SecretKey,
} from '@gitops/api';
import {
  annotationsChanged,
  anyOf,
  collectionPath,
  generationChanged,
  getObject,
  HttpMethod,
  type Informer,
  ignoreCreates,
  ignoreDeletes,
  isConflict,
  jsonEqual,
  type KubeCondition,
  type KubeObject,
  kubeRequest,
  type Logger,
  objectKey,
  type ReconcileResult,
  relist,
  setKubeCondition,
  specChanged,
  splitObjectKey,
  statusFieldsChanged,
  withTypeMeta,
} from '@gitops/shared';
import { parseConditions } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { byApplication, byEnvironment } from '../indexes.ts';
import { type Json, list, record, specOf, statusOf, text } from '../objects.ts';
import { writeChangedStatus } from '../writes.ts';
import { checkout, type GitCredentials, GitError, withoutUserInfo } from './git.ts';
import {
  basePath,
  commitMessage,
  type GitOpsRepository,
  gitOpsRepositoryOf,
  overlayPath,
  REFUSAL_REASONS,
  RepoCondition,
  renderOverlay,
} from './render.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;

/** Pushes tried when someone else pushed first (fetch, render and commit again each time). */
const PUSH_ATTEMPTS = 5;
/** A problem only the user can fix (missing base, refused push) is looked at again this often. */
const USER_FIX_RETRY_MS = 30_000;
/** Backoff for an unreachable repository: 2 s doubling to 2 min. */
const UNREACHABLE_FIRST_MS = 2_000;
const UNREACHABLE_MAX_MS = 120_000;

export interface RenderFeatureDeps {
  bindings: Informer<KubeObject>;
  applications: Informer<KubeObject>;
  environments: Informer<KubeObject>;
  promotionRuns: Informer<KubeObject>;
}

/** A failure the user sees in the condition. */
class RenderProblem extends Error {
  readonly retryAfterMs: number | 'backoff';
  /** The condition's reason (RepoCondition). */
  readonly reason: string;
  constructor(
    message: string,
    retryAfterMs: number | 'backoff' = USER_FIX_RETRY_MS,
    reason: string = RepoCondition.error,
  ) {
    super(message);
    this.retryAfterMs = retryAfterMs;
    this.reason = reason;
  }
}

/**
 * Whether a field manager other than ours writes the binding's `status.components` or
 * `status.gitopsRepoConditions` (App Studio's own application service does): then we stay out of its way.
 */
export function managedElsewhere(binding: KubeObject): string | undefined {
  for (const entry of list(binding.metadata.managedFields)) {
    const e = record(entry);
    if (text(e.manager) === APPSTUDIO_FIELD_MANAGER) continue;
    const status = record(record(e.fieldsV1)['f:status']);
    if ('f:components' in status || 'f:gitopsRepoConditions' in status) return text(e.manager) || 'unknown';
  }
  return undefined;
}

/**
 * What a PromotionRun should think of a binding's GitOps repository: `rendering` while this service has
 * not rendered the binding's current generation yet, `failed` with the condition's message, else `ready`
 * (also for bindings another service renders, whose conditions carry no observedGeneration).
 */
export function renderStateOf(
  binding: KubeObject,
):
  | { state: 'ready' }
  | { state: 'rendering' }
  | { state: 'failed'; message: string; refused: boolean; since: string } {
  const conditions = parseConditions(statusOf(binding).gitopsRepoConditions);
  const own = conditions.find((c) => c.type === RepoCondition.type);
  const observed = list(statusOf(binding).gitopsRepoConditions)
    .map(record)
    .find((c) => c.type === RepoCondition.type)?.observedGeneration;
  if (!own || typeof observed !== 'number') return { state: 'ready' };
  if (observed < (binding.metadata.generation ?? 0)) return { state: 'rendering' };
  if (own.status === 'False')
    return {
      state: 'failed',
      message: own.message ?? '',
      // A refusal (REFUSAL_REASONS) and since when the condition says so: a PromotionRun ends at once on a
      // refusal reported during its step.
      refused: REFUSAL_REASONS.has(own.reason ?? ''),
      since: own.lastTransitionTime ?? '',
    };
  return { state: 'ready' };
}

function decode(value: unknown): string | undefined {
  return typeof value === 'string' ? Buffer.from(value, 'base64').toString('utf8') : undefined;
}

const normalizeUrl = (url: string) => {
  let u = url.trim().toLowerCase();
  while (u.endsWith('/')) u = u.slice(0, -1);
  return u.endsWith('.git') ? u.slice(0, -4) : u;
};

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** The condition of a git failure: its message (no credential: git's words are redacted), retry and reason. */
function gitFailureCondition(
  err: GitError,
  repo: GitOpsRepository,
): { message: string; retry: number | 'backoff'; reason: string } {
  const where = `the GitOps repository ${withoutUserInfo(repo.url)} (branch ${repo.branch})`;
  switch (err.failure) {
    case 'refused':
      return {
        message: `the push to ${where} was refused: ${err.message}`,
        retry: USER_FIX_RETRY_MS,
        reason: RepoCondition.pushRefused,
      };
    case 'auth':
      return {
        message: `the credentials for ${where} were refused (the namespace's RepositoryCredential for it): ${err.message}`,
        retry: USER_FIX_RETRY_MS,
        reason: RepoCondition.credentialsRefused,
      };
    case 'hostKey':
      return {
        message: `the SSH host key of ${where} is not trusted (not the key GITOPS_SSH_KNOWN_HOSTS_FILE lists for it): ${err.message}`,
        retry: USER_FIX_RETRY_MS,
        reason: RepoCondition.hostKeyNotTrusted,
      };
    case 'notFound':
      return {
        message: `${where} could not be read: ${err.message}`,
        retry: USER_FIX_RETRY_MS,
        reason: RepoCondition.error,
      };
    default:
      return {
        message: `${where} could not be reached, retrying: ${err.message}`,
        retry: 'backoff',
        reason: RepoCondition.error,
      };
  }
}

export function createRenderFeature(ctx: AppStudioContext, deps: RenderFeatureDeps): AppStudioController {
  const { kc, events } = ctx;
  /** key → fingerprint of the inputs last rendered and written (in memory: a restart renders once more). */
  const rendered = new Map<string, string>();
  /** key → consecutive unreachable failures, for the backoff. */
  const unreachable = new Map<string, number>();
  const warnedElsewhere = new Set<string>();
  const gitOptions = { timeoutMs: ctx.renderGitTimeoutMs, sshKnownHostsFile: ctx.sshKnownHostsFile };
  if (!ctx.sshKnownHostsFile)
    ctx.logger.warn(
      'GITOPS_SSH_KNOWN_HOSTS_FILE is not set: the SSH host key of a GitOps repository the service renders is accepted on first use (set it to a known_hosts file, e.g. the ssh_known_hosts of argocd-ssh-known-hosts-cm, to verify host keys)',
    );

  /** The tenant's credentials for `url`: its RepositoryCredential of that repository, and the Secret it names. */
  async function credentialsFor(namespace: string, url: string): Promise<GitCredentials> {
    const answer = record(
      await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: collectionPath({ ...Kinds.GitOpsDeploymentRepositoryCredential.resource, namespace }),
      }),
    );
    const wanted = normalizeUrl(withoutUserInfo(url));
    const credential = list(answer.items)
      .map((i) => i as KubeObject)
      .find(
        (c) => normalizeUrl(withoutUserInfo(text(specOf(c).repository) || text(specOf(c).url))) === wanted,
      );
    if (!credential) return {};
    const secretName = text(specOf(credential).secret);
    const secret = secretName
      ? await getObject(kc, { ...CoreKinds.Secret, namespace, name: secretName })
      : undefined;
    if (!secret)
      throw new RenderProblem(
        `the RepositoryCredential ${credential.metadata.name} of the GitOps repository names Secret '${secretName}', which does not exist`,
      );
    const data = record(secret.data);
    const sshPrivateKey = decode(data[SecretKey.SshPrivateKey]);
    if (sshPrivateKey?.trim()) return { sshPrivateKey };
    return { username: decode(data[SecretKey.Username]), password: decode(data[SecretKey.Password]) };
  }

  /**
   * The PromotionRun that pointed this binding at its snapshot: the newest one that is running, else the
   * newest one (`active` says which).
   */
  function promotionRunOf(binding: KubeObject): { run: KubeObject; active: boolean } | undefined {
    const snapshot = text(specOf(binding).snapshot);
    const application = text(specOf(binding).application);
    const runs = deps.promotionRuns
      .list(binding.metadata.namespace)
      .filter((r) => text(specOf(r).application) === application && text(specOf(r).snapshot) === snapshot)
      .sort((a, b) => text(b.metadata.creationTimestamp).localeCompare(text(a.metadata.creationTimestamp)));
    const active = runs.find((r) => text(statusOf(r).state) !== 'Complete');
    if (active) return { run: active, active: true };
    return runs[0] ? { run: runs[0], active: false } : undefined;
  }

  /** Renders, commits and pushes; returns the commit the branch is at with the render in it. */
  async function renderAndPush(input: {
    binding: KubeObject;
    repo: GitOpsRepository;
    credentials: GitCredentials;
    images: { component: string; image: string }[];
    env: { name: string; value: string }[];
    message: string;
    logger: Logger;
  }): Promise<{ commit: string; pushed: boolean }> {
    const environment = text(specOf(input.binding).environment);
    for (let attempt = 1; ; attempt++) {
      const tree = await checkout(input.repo.url, input.repo.branch, input.credentials, gitOptions);
      try {
        for (const { component, image } of input.images) {
          if (!(await exists(join(tree.dir, basePath(input.repo, component)))))
            throw new RenderProblem(
              `the GitOps repository has no ${basePath(input.repo, component)} for component ${component} (branch ${input.repo.branch})`,
            );
          const file = join(tree.dir, overlayPath(input.repo, component, environment), 'kustomization.yaml');
          const before = await readFile(file, 'utf8').catch(() => undefined);
          const after = renderOverlay(before, { component, image, env: input.env });
          if (after !== before) {
            await mkdir(dirname(file), { recursive: true });
            await writeFile(file, after);
          }
        }
        const commit = await tree.commitAll(input.message);
        if (!commit) return { commit: await tree.head(), pushed: false };
        try {
          await tree.push();
          return { commit, pushed: true };
        } catch (err) {
          if (!(err instanceof GitError) || err.failure !== 'conflict' || attempt >= PUSH_ATTEMPTS) throw err;
          input.logger.info({ attempt }, 'the branch moved while rendering; fetching and rendering again');
          await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 400 * attempt));
        }
      } finally {
        await tree.dispose();
      }
    }
  }

  /**
   * Argo CD syncs a branch's head: when someone commits to the branch after our render (another
   * environment's promotion, another application), the deployment reports that later commit and would never
   * match our `commitID`. When the later commit has the render in its history and the component's base and
   * this environment's overlay are the same there, what is deployed is what we rendered: the component's
   * `commitID` follows it (so a PromotionRun waiting for "Synced and Healthy at that commit" completes).
   */
  async function followLaterCommits(
    binding: KubeObject,
    repo: GitOpsRepository,
    logger: Logger,
  ): Promise<ReconcileResult | undefined> {
    const status = statusOf(binding);
    const environment = text(specOf(binding).environment);
    const deployed = new Map(
      list(status.gitopsDeployments).map((d) => [text(record(d).componentName), text(record(d).commitID)]),
    );
    const components = list(status.components).map(record);
    const drifted = components.filter((c) => {
      const revision = deployed.get(text(c.name)) ?? '';
      return revision !== '' && revision !== text(record(c.gitopsRepository).commitID);
    });
    if (drifted.length === 0) return undefined;
    let tree: Awaited<ReturnType<typeof checkout>> | undefined;
    try {
      tree = await checkout(
        repo.url,
        repo.branch,
        await credentialsFor(binding.metadata.namespace ?? '', repo.url),
        gitOptions,
      );
      let changed = false;
      const next: Json[] = [];
      for (const c of components) {
        const name = text(c.name);
        const source = record(c.gitopsRepository);
        const ours = text(source.commitID);
        const theirs = deployed.get(name) ?? '';
        let same = false;
        if (theirs !== '' && theirs !== ours && (await tree.isAncestor(ours, theirs))) {
          same = true;
          for (const path of [basePath(repo, name), overlayPath(repo, name, environment)])
            if ((await tree.objectAt(ours, path)) !== (await tree.objectAt(theirs, path))) same = false;
        }
        next.push(same ? { ...c, gitopsRepository: { ...source, commitID: theirs } } : c);
        changed ||= same;
      }
      if (changed) {
        logger.info('the branch moved on without changing the render; following the deployed commit');
        await writeStatus(binding, { components: next });
      }
    } catch (err) {
      // Only a convenience for the PromotionRun: the next status change or resync looks again.
      if (err instanceof GitError || err instanceof RenderProblem || isConflict(err)) {
        logger.debug({ err }, 'could not compare the deployed commit with the render');
        return undefined;
      }
      throw err;
    } finally {
      await tree?.dispose();
    }
    return undefined;
  }

  const writeStatus = (binding: KubeObject, patch: Json) => writeChangedStatus(kc, Binding, binding, patch);

  /**
   * The binding's condition with this verdict. `freshSince`: a verdict not later than this (the start of the
   * running PromotionRun's step) is given a new lastTransitionTime even when it says the same, because it is
   * now about that promotion's attempt: the PromotionRun ends only on a refusal whose time is after its
   * step's start (times are in whole seconds, so one in the same second is not taken as after it).
   */
  const repoCondition = (
    binding: KubeObject,
    verdict: { ok: boolean; message: string; reason?: string; freshSince?: string },
  ): KubeCondition[] => {
    const existing = parseConditions(statusOf(binding).gitopsRepoConditions).filter(
      (c) => c.type === RepoCondition.type,
    );
    const since = Date.parse(verdict.freshSince ?? '');
    const stale = existing.some((c) => Date.parse(c.lastTransitionTime ?? '') <= since);
    return setKubeCondition(
      stale ? [] : existing,
      {
        type: RepoCondition.type,
        status: verdict.ok ? 'True' : 'False',
        reason: verdict.ok ? RepoCondition.success : (verdict.reason ?? RepoCondition.error),
        message: verdict.message,
        observedGeneration: binding.metadata.generation ?? 0,
      },
      ctx.now(),
    );
  };

  async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const cached = deps.bindings.get(namespace, name);
    if (!cached || cached.metadata.deletionTimestamp) {
      rendered.delete(key);
      unreachable.delete(key);
      return undefined;
    }
    const application = deps.applications.get(namespace, text(specOf(cached).application));
    const repo = application ? gitOpsRepositoryOf(application) : undefined;
    if (repo === undefined) return undefined; // not asked to render: App Studio's own service may do it
    // The informer's cache has no managedFields: who writes the status is read from the live object.
    const binding = await getObject(kc, { ...Binding, namespace, name });
    if (!binding || binding.metadata.deletionTimestamp) return undefined;
    const spec = specOf(binding);
    const writer = managedElsewhere(binding);
    if (writer) {
      if (!warnedElsewhere.has(key)) {
        warnedElsewhere.add(key);
        logger.info({ writer }, 'another service writes the binding status.components; not rendering');
        await events.event(
          withTypeMeta(Binding, binding),
          'Warning',
          RenderEventReason.GitOpsRepositoryManagedElsewhere,
          `not rendering the GitOps repository: ${writer} writes this binding's status.components`,
        );
      }
      return undefined;
    }
    const snapshotName = text(spec.snapshot);
    const environmentName = text(spec.environment);
    const environment = deps.environments.get(namespace, environmentName);
    if (!snapshotName || !environment) return undefined; // the binding feature reports a missing Environment

    const run = promotionRunOf(binding);
    const fail = async (message: string, retry: number | 'backoff', reason?: string) => {
      const freshSince = run?.active
        ? text(statusOf(run.run).promotionStartTime) || text(run.run.metadata.creationTimestamp)
        : undefined;
      const conditions = repoCondition(binding, { ok: false, message, reason, freshSince });
      const before = parseConditions(statusOf(binding).gitopsRepoConditions);
      if (!jsonEqual(before, conditions)) {
        await writeStatus(binding, { gitopsRepoConditions: conditions });
        await events.event(
          withTypeMeta(Binding, binding),
          'Warning',
          RenderEventReason.GitOpsRepositoryRenderFailed,
          message,
        );
      }
      rendered.delete(key);
      // A verdict in the very second the step started cannot be told from one before it: tried again a
      // second later, so the PromotionRun gets one it can tell (at most once per step).
      const written = conditions.find((c) => c.type === RepoCondition.type)?.lastTransitionTime;
      if (freshSince && Date.parse(written ?? '') <= Date.parse(freshSince)) return { requeueAfter: 1_000 };
      if (retry !== 'backoff') return { requeueAfter: retry };
      const failures = (unreachable.get(key) ?? 0) + 1;
      unreachable.set(key, failures);
      return {
        requeueAfter: Math.min(UNREACHABLE_MAX_MS, UNREACHABLE_FIRST_MS * 2 ** (failures - 1)),
      };
    };
    if (typeof repo === 'string') return fail(repo, USER_FIX_RETRY_MS);

    const snapshot = await getObject(kc, { ...AppStudioKinds.Snapshot, namespace, name: snapshotName });
    if (!snapshot) return fail(`Snapshot '${snapshotName}' does not exist`, USER_FIX_RETRY_MS);
    const imageOf = new Map(
      list(specOf(snapshot).components).map((c) => [text(record(c).name), text(record(c).containerImage)]),
    );
    const components = list(spec.components)
      .map((c) => text(record(c).name))
      .filter((c) => c !== '')
      .sort();
    const missing = components.filter((c) => !imageOf.get(c));
    if (missing.length > 0)
      return fail(
        `Snapshot '${snapshotName}' has no containerImage for component ${missing.join(', ')}`,
        USER_FIX_RETRY_MS,
      );
    const images = components.map((component) => ({ component, image: imageOf.get(component) ?? '' }));
    const env = list(record(specOf(environment).configuration).env)
      .map(record)
      .map((e) => ({ name: text(e.name), value: text(e.value) }))
      .filter((e) => e.name !== '');

    const fingerprint = createHash('sha256')
      .update(JSON.stringify([repo, images, env, binding.metadata.generation]))
      .digest('hex');
    const state = renderStateOf(binding);
    const own = parseConditions(statusOf(binding).gitopsRepoConditions).some(
      (c) => c.type === RepoCondition.type && c.status === 'True',
    );
    if (rendered.get(key) === fingerprint && own && state.state === 'ready')
      return followLaterCommits(binding, repo, logger);

    const promotionRun = run?.run.metadata.name;
    let result: { commit: string; pushed: boolean };
    try {
      const credentials = await credentialsFor(namespace, repo.url);
      result = await renderAndPush({
        binding,
        repo,
        credentials,
        images,
        env,
        message: commitMessage({
          snapshot: snapshotName,
          environment: environmentName,
          application: text(spec.application),
          promotionRun,
          binding: name,
          images,
        }),
        logger,
      });
    } catch (err) {
      if (err instanceof RenderProblem) return fail(err.message, err.retryAfterMs, err.reason);
      if (err instanceof GitError) {
        logger.warn({ failure: err.failure }, 'rendering the GitOps repository failed');
        const { message, retry, reason } = gitFailureCondition(err, repo);
        return fail(message, retry, reason);
      }
      throw err;
    }
    unreachable.delete(key);
    const message = `Snapshot ${snapshotName} rendered for Environment ${environmentName} at commit ${result.commit}`;
    try {
      await writeStatus(binding, {
        components: images.map(({ component }) => ({
          name: component,
          gitopsRepository: {
            url: repo.url,
            branch: repo.branch,
            path: overlayPath(repo, component, environmentName),
            generatedResources: [],
            commitID: result.commit,
          },
        })),
        gitopsRepoConditions: repoCondition(binding, { ok: true, message }),
      });
    } catch (err) {
      // The binding changed meanwhile: the next pass renders its new state (an unchanged render commits nothing).
      if (isConflict(err)) return { requeueAfter: 1 };
      throw err;
    }
    rendered.set(key, fingerprint);
    logger.info({ commit: result.commit, pushed: result.pushed, snapshot: snapshotName }, 'rendered');
    if (result.pushed)
      await events.event(
        withTypeMeta(Binding, binding),
        'Normal',
        RenderEventReason.GitOpsRepositoryRendered,
        `commit ${result.commit} pushed to branch ${repo.branch}: Snapshot ${snapshotName} to Environment ${environmentName}${promotionRun ? ` (PromotionRun ${promotionRun})` : ''}`,
      );
    return undefined;
  }

  const bindingsOfApplication = byApplication(deps.bindings);
  const bindingsOfEnvironment = byEnvironment(deps.bindings);
  return (
    newAppStudioController(ctx, 'appstudio-gitops-render')
      // Spec changes (a new snapshot, components), resyncs, and the deployments' revisions (to follow later
      // commits); other status writes are not a reason to look.
      .for(deps.bindings, {
        predicates: [anyOf(relist, generationChanged, statusFieldsChanged('gitopsDeployments'))],
      })
      // A PromotionRun starting a step (its promotionStartTime): the bindings of its application at its
      // snapshot are tried again at once, so a refusal the run sees is about its own attempt.
      .watches(
        deps.promotionRuns,
        (run) =>
          bindingsOfApplication(run.metadata.namespace, text(specOf(run).application))
            .filter((b) => text(specOf(b).snapshot) === text(specOf(run).snapshot))
            .map(objectKey),
        { predicates: [ignoreDeletes, statusFieldsChanged('promotionStartTime')] },
      )
      // An Application created, or its render annotation or spec changed.
      .watches(
        deps.applications,
        (app) => bindingsOfApplication(app.metadata.namespace, app.metadata.name).map(objectKey),
        { predicates: [ignoreDeletes, anyOf(annotationsChanged, specChanged)] },
      )
      // An Environment's spec changed (its variables).
      .watches(
        deps.environments,
        (env) => bindingsOfEnvironment(env.metadata.namespace, env.metadata.name).map(objectKey),
        { predicates: [ignoreCreates, ignoreDeletes, generationChanged] },
      )
      .complete(quietInTerminatingNamespace(reconcile))
  );
}
