/**
 * The render of one binding, as named steps (what and why: render.feature.ts):
 * `target` (is this binding ours to render, and into which repository), `inputsOf` (the Snapshot's images,
 * the Environment's variables), `renderAndPush` (checkout, overlays, commit, push; rebased by rendering
 * again), `writeRendered` (status.components and the condition), `failWith` (the condition of a failure and
 * when to look again), and `followLaterCommits` (an unchanged render whose branch moved on).
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { AppStudioKinds, CoreKinds, Kinds, RenderEventReason, SecretKey } from '@gitops/api';
import {
  collectionPath,
  getObject,
  HttpMethod,
  type Informer,
  isConflict,
  jsonEqual,
  type KubeObject,
  kindParser,
  kubeRequest,
  type Logger,
  type ReconcileResult,
  splitObjectKey,
} from '@gitops/shared';
import { parseConditions } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import {
  type ApplicationCr,
  type BindingCr,
  type EnvironmentCr,
  type Json,
  list,
  type PromotionRunCr,
  record,
  type SnapshotCr,
  specOf,
  text,
} from '../objects.ts';
import { writeChangedStatus } from '../writes.ts';
import { checkout, type GitCredentials, GitError, withoutUserInfo } from './git.ts';
import {
  gitFailureCondition,
  managedElsewhere,
  RenderProblem,
  renderStateOf,
  repoCondition,
  USER_FIX_RETRY_MS,
} from './render.status.ts';
import {
  basePath,
  commitMessage,
  type GitOpsRepository,
  gitOpsRepositoryOf,
  overlayPath,
  RepoCondition,
  renderOverlay,
} from './render.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;

/** Pushes tried when someone else pushed first (fetch, render and commit again each time). */
const PUSH_ATTEMPTS = 5;
/** Backoff for an unreachable repository: 2 s doubling to 2 min. */
const UNREACHABLE_FIRST_MS = 2_000;
const UNREACHABLE_MAX_MS = 120_000;

export interface RenderDeps {
  bindings: Informer<BindingCr>;
  applications: Informer<ApplicationCr>;
  environments: Informer<EnvironmentCr>;
  promotionRuns: Informer<PromotionRunCr>;
}

type Image = { component: string; image: string };
type EnvVar = { name: string; value: string };

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

/** The Snapshot's image of each of the binding's components (sorted), or the message naming what is missing. */
export function imagesOf(binding: BindingCr, snapshot: SnapshotCr): Image[] | string {
  const imageOf = new Map((snapshot.spec?.components ?? []).map((c) => [c.name, c.containerImage]));
  const components = binding.spec.components
    .map((c) => c.name)
    .filter((c) => c !== '')
    .sort();
  const missing = components.filter((c) => !imageOf.get(c));
  if (missing.length > 0)
    return `Snapshot '${snapshot.metadata.name}' has no containerImage for component ${missing.join(', ')}`;
  return components.map((component) => ({ component, image: imageOf.get(component) ?? '' }));
}

export function createRenderReconciler(ctx: AppStudioContext, deps: RenderDeps) {
  const { kc, events } = ctx;
  /** key → fingerprint of the inputs last rendered and written (in memory: a restart renders once more). */
  const rendered = new Map<string, string>();
  /** key → consecutive unreachable failures, for the backoff. */
  const unreachable = new Map<string, number>();
  const warnedElsewhere = new Set<string>();
  /** Keys whose pushed commit the host was not yet told of (ctx.onPushed failed): told at the next pass. */
  const pushNotTold = new Set<string>();
  const gitOptions = { timeoutMs: ctx.renderGitTimeoutMs, sshKnownHostsFile: ctx.sshKnownHostsFile };
  const writeStatus = (binding: BindingCr, patch: Json) => writeChangedStatus(kc, Binding, binding, patch);

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
  function promotionRunOf(binding: BindingCr): { run: PromotionRunCr; active: boolean } | undefined {
    const { snapshot, application } = binding.spec;
    const runs = deps.promotionRuns
      .list(binding.metadata.namespace)
      .filter((r) => r.spec?.application === application && r.spec?.snapshot === snapshot)
      .sort((a, b) => text(b.metadata.creationTimestamp).localeCompare(text(a.metadata.creationTimestamp)));
    const active = runs.find((r) => r.status?.state !== 'Complete');
    if (active) return { run: active, active: true };
    return runs[0] ? { run: runs[0], active: false } : undefined;
  }

  /**
   * Step 1: the binding (read live: the cache has no managedFields) and the repository its Application asks
   * us to render into; undefined when there is nothing for us to do (not asked, another writer, no Snapshot
   * or Environment yet: the binding feature reports a missing Environment).
   */
  async function target(key: string, logger: Logger) {
    const { namespace = '', name } = splitObjectKey(key);
    const cached = deps.bindings.get(namespace, name);
    if (!cached || cached.metadata.deletionTimestamp) {
      rendered.delete(key);
      unreachable.delete(key);
      pushNotTold.delete(key);
      return undefined;
    }
    const application = deps.applications.get(namespace, cached.spec.application);
    const repo = application ? gitOpsRepositoryOf(application) : undefined;
    if (repo === undefined) return undefined; // not asked to render: App Studio's own service may do it
    const binding = await getObject(
      kc,
      { ...Binding, namespace, name },
      { parse: kindParser<BindingCr>(Binding) },
    );
    if (!binding || binding.metadata.deletionTimestamp) return undefined;
    const writer = managedElsewhere(binding);
    if (writer) {
      if (!warnedElsewhere.has(key)) {
        warnedElsewhere.add(key);
        logger.info({ writer }, 'another service writes the binding status.components; not rendering');
        await events.event(
          binding,
          'Warning',
          RenderEventReason.GitOpsRepositoryManagedElsewhere,
          `not rendering the GitOps repository: ${writer} writes this binding's status.components`,
        );
      }
      return undefined;
    }
    const environment = deps.environments.get(namespace, binding.spec.environment);
    if (!binding.spec.snapshot || !environment) return undefined;
    return { binding, repo, environment };
  }

  /** Step 2: the Snapshot's images and the Environment's variables, or the message of what is missing. */
  async function inputsOf(
    binding: BindingCr,
    environment: EnvironmentCr,
  ): Promise<{ images: Image[]; env: EnvVar[] } | string> {
    const { snapshot: snapshotName } = binding.spec;
    const snapshot = await getObject(
      kc,
      { ...AppStudioKinds.Snapshot, namespace: binding.metadata.namespace, name: snapshotName },
      { parse: kindParser<SnapshotCr>(AppStudioKinds.Snapshot) },
    );
    if (!snapshot) return `Snapshot '${snapshotName}' does not exist`;
    const images = imagesOf(binding, snapshot);
    if (typeof images === 'string') return images;
    const env = (environment.spec?.configuration?.env ?? []).filter((e) => e.name !== '');
    return { images, env };
  }

  /**
   * The condition of a failure (an Event when it changes) and when to look again: `retry` ms, or the
   * unreachable backoff. Its time is fresh for the running PromotionRun's step (repoCondition).
   */
  async function failWith(
    key: string,
    binding: BindingCr,
    run: { run: PromotionRunCr; active: boolean } | undefined,
    failure: { message: string; retry: number | 'backoff'; reason?: string },
  ): Promise<ReconcileResult> {
    const freshSince = run?.active
      ? run.run.status?.promotionStartTime || text(run.run.metadata.creationTimestamp)
      : undefined;
    const { message, retry, reason } = failure;
    const conditions = repoCondition(binding, { ok: false, message, reason, freshSince }, ctx.now());
    if (!jsonEqual(parseConditions(binding.status?.gitopsRepoConditions), conditions)) {
      await writeStatus(binding, { gitopsRepoConditions: conditions });
      await events.event(binding, 'Warning', RenderEventReason.GitOpsRepositoryRenderFailed, message);
    }
    rendered.delete(key);
    // A verdict in the very second the step started cannot be told from one before it: tried again a
    // second later, so the PromotionRun gets one it can tell (at most once per step).
    const written = conditions.find((c) => c.type === RepoCondition.type)?.lastTransitionTime;
    if (freshSince && Date.parse(written ?? '') <= Date.parse(freshSince)) return { requeueAfter: 1_000 };
    if (retry !== 'backoff') return { requeueAfter: retry };
    const failures = (unreachable.get(key) ?? 0) + 1;
    unreachable.set(key, failures);
    return { requeueAfter: Math.min(UNREACHABLE_MAX_MS, UNREACHABLE_FIRST_MS * 2 ** (failures - 1)) };
  }

  /** Step 3: renders, commits and pushes; returns the commit the branch is at with the render in it. */
  async function renderAndPush(input: {
    binding: BindingCr;
    repo: GitOpsRepository;
    credentials: GitCredentials;
    images: Image[];
    env: EnvVar[];
    message: string;
    logger: Logger;
  }): Promise<{ commit: string; pushed: boolean }> {
    const { environment } = input.binding.spec;
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

  /** Step 4: status.components at the commit, and the success condition. False: the binding changed meanwhile. */
  async function writeRendered(
    binding: BindingCr,
    repo: GitOpsRepository,
    images: Image[],
    commit: string,
  ): Promise<boolean> {
    const { snapshot, environment } = binding.spec;
    const message = `Snapshot ${snapshot} rendered for Environment ${environment} at commit ${commit}`;
    try {
      await writeStatus(binding, {
        components: images.map(({ component }) => ({
          name: component,
          gitopsRepository: {
            url: repo.url,
            branch: repo.branch,
            path: overlayPath(repo, component, environment),
            generatedResources: [],
            commitID: commit,
          },
        })),
        gitopsRepoConditions: repoCondition(binding, { ok: true, message }, ctx.now()),
      });
      return true;
    } catch (err) {
      // The next pass renders its new state (an unchanged render commits nothing).
      if (isConflict(err)) return false;
      throw err;
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
    binding: BindingCr,
    repo: GitOpsRepository,
    logger: Logger,
  ): Promise<void> {
    const { environment } = binding.spec;
    const deployed = new Map(
      (binding.status?.gitopsDeployments ?? []).map((d) => [d.componentName, d.commitID ?? '']),
    );
    const components = binding.status?.components ?? [];
    const drifted = components.filter((c) => {
      const revision = deployed.get(c.name) ?? '';
      return revision !== '' && revision !== c.gitopsRepository.commitID;
    });
    if (drifted.length === 0) return;
    let tree: Awaited<ReturnType<typeof checkout>> | undefined;
    try {
      const credentials = await credentialsFor(binding.metadata.namespace ?? '', repo.url);
      tree = await checkout(repo.url, repo.branch, credentials, gitOptions);
      let changed = false;
      const next: Json[] = [];
      for (const c of components) {
        const ours = c.gitopsRepository.commitID;
        const theirs = deployed.get(c.name) ?? '';
        let same = false;
        if (theirs !== '' && theirs !== ours && (await tree.isAncestor(ours, theirs))) {
          same = true;
          for (const path of [basePath(repo, c.name), overlayPath(repo, c.name, environment)])
            if ((await tree.objectAt(ours, path)) !== (await tree.objectAt(theirs, path))) same = false;
        }
        next.push(same ? { ...c, gitopsRepository: { ...c.gitopsRepository, commitID: theirs } } : c);
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
        return;
      }
      throw err;
    } finally {
      await tree?.dispose();
    }
  }

  return async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const found = await target(key, logger);
    if (!found) return undefined;
    const { binding, repo, environment } = found;
    const run = promotionRunOf(binding);
    if (typeof repo === 'string')
      return failWith(key, binding, run, { message: repo, retry: USER_FIX_RETRY_MS });
    const inputs = await inputsOf(binding, environment);
    if (typeof inputs === 'string')
      return failWith(key, binding, run, { message: inputs, retry: USER_FIX_RETRY_MS });
    const { images, env } = inputs;
    const fingerprint = createHash('sha256')
      .update(JSON.stringify([repo, images, env, binding.metadata.generation]))
      .digest('hex');
    const own = parseConditions(binding.status?.gitopsRepoConditions).some(
      (c) => c.type === RepoCondition.type && c.status === 'True',
    );
    if (rendered.get(key) === fingerprint && own && renderStateOf(binding).state === 'ready') {
      await followLaterCommits(binding, repo, logger);
      return undefined;
    }
    const { snapshot, environment: environmentName, application } = binding.spec;
    const promotionRun = run?.run.metadata.name;
    let result: { commit: string; pushed: boolean };
    try {
      result = await renderAndPush({
        binding,
        repo,
        credentials: await credentialsFor(binding.metadata.namespace ?? '', repo.url),
        images,
        env,
        message: commitMessage({
          snapshot,
          environment: environmentName,
          application,
          promotionRun,
          binding: binding.metadata.name,
          images,
        }),
        logger,
      });
    } catch (err) {
      if (err instanceof RenderProblem)
        return failWith(key, binding, run, {
          message: err.message,
          retry: err.retryAfterMs,
          reason: err.reason,
        });
      if (!(err instanceof GitError)) throw err;
      logger.warn({ failure: err.failure }, 'rendering the GitOps repository failed');
      return failWith(key, binding, run, gitFailureCondition(err, repo));
    }
    unreachable.delete(key);
    // Argo CD is asked to look at the branch now (not at its next poll); a failure is retried with the
    // reconcile, whose render then pushes nothing, so the key remembers that the host was not told yet.
    if (result.pushed) pushNotTold.add(key);
    if (pushNotTold.has(key)) {
      const namespace = binding.metadata.namespace ?? '';
      await ctx.onPushed({ namespace, repoURL: repo.url, branch: repo.branch, commit: result.commit });
      pushNotTold.delete(key);
    }
    if (!(await writeRendered(binding, repo, images, result.commit))) return { requeueAfter: 1 };
    rendered.set(key, fingerprint);
    logger.info({ commit: result.commit, pushed: result.pushed, snapshot }, 'rendered');
    if (result.pushed)
      await events.event(
        binding,
        'Normal',
        RenderEventReason.GitOpsRepositoryRendered,
        `commit ${result.commit} pushed to branch ${repo.branch}: Snapshot ${snapshot} to Environment ${environmentName}${promotionRun ? ` (PromotionRun ${promotionRun})` : ''}`,
      );
    return undefined;
  };
}
