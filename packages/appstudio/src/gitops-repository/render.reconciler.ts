/**
 * The render of one binding, as named steps (what and why: render.feature.ts):
 * `target` (is this binding ours to render, and into which repository), `inputsOf` (the Snapshot's images,
 * the Environment's variables), `renderAndPush` (checkout, overlays, commit, push; rebased by rendering
 * again), `tellPushed` (the host told of a pushed commit), `writeRendered` (status.components and the
 * condition), `failWith` (the condition of a failure and when to look again), and `followLaterCommits` (an
 * unchanged render whose branch moved on). The two that work in a clone of the repository are in
 * render.git-steps.ts, the credentials they use in render.credentials.ts. Every step is a top-level function
 * over a `deps` object (`RenderSteps`: the context's client, recorder, clock and settings, the caches it reads
 * and the render's memory), so a test can drive one alone.
 */
import { createHash } from 'node:crypto';
import { AppStudioKinds, RenderEventReason } from '@gitops/api';
import {
  getObject,
  type Informer,
  isConflict,
  jsonEqual,
  kindParser,
  type Logger,
  type ReconcileResult,
  type Reconciler,
  splitObjectKey,
} from '@gitops/shared';
import { parseConditions } from '../condition-pair.ts';
import type { AppStudioContext, PushedCommit } from '../context.ts';
import { type StepContext, stepContext } from '../controller.ts';
import {
  type ApplicationCr,
  type BindingCr,
  type EnvironmentCr,
  type Json,
  type PromotionRunCr,
  type SnapshotCr,
  text,
} from '../objects.ts';
import { writeChangedStatus } from '../writes.ts';
import { GitError } from './git.ts';
import { credentialsFor } from './render.credentials.ts';
import { followLaterCommits, renderAndPush } from './render.git-steps.ts';
import {
  gitFailureCondition,
  managedElsewhere,
  RenderProblem,
  renderStateOf,
  repoCondition,
  USER_FIX_RETRY_MS,
} from './render.status.ts';
import {
  commitMessage,
  type GitOpsRepository,
  gitOpsRepositoryOf,
  overlayPath,
  RepoCondition,
} from './render.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;

/** Backoff for an unreachable repository: 2 s doubling to 2 min. */
const UNREACHABLE_FIRST_MS = 2_000;
const UNREACHABLE_MAX_MS = 120_000;

export interface RenderDeps {
  bindings: Informer<BindingCr>;
  applications: Informer<ApplicationCr>;
  environments: Informer<EnvironmentCr>;
  promotionRuns: Informer<PromotionRunCr>;
}

/** What the render remembers between passes, by binding key (in memory: a restart renders once more). */
export interface RenderMemory {
  /** key → fingerprint of the inputs last rendered and written. */
  rendered: Map<string, string>;
  /** key → consecutive unreachable failures, for the backoff. */
  unreachable: Map<string, number>;
  /** Keys whose other writer was already reported (once). */
  warnedElsewhere: Set<string>;
  /** Keys whose pushed commit the host was not yet told of (onPushed failed): told at the next pass. */
  pushNotTold: Set<string>;
}

export const newRenderMemory = (): RenderMemory => ({
  rendered: new Map(),
  unreachable: new Map(),
  warnedElsewhere: new Set(),
  pushNotTold: new Set(),
});

/** What the steps use: the context's client, recorder, clock and settings, the caches, and the memory. */
export interface RenderSteps extends StepContext {
  gitOptions: { timeoutMs: number; sshKnownHostsFile: string };
  onPushed: (push: PushedCommit) => Promise<void>;
  bindings: Pick<Informer<BindingCr>, 'get'>;
  applications: Pick<Informer<ApplicationCr>, 'get'>;
  environments: Pick<Informer<EnvironmentCr>, 'get'>;
  promotionRuns: Pick<Informer<PromotionRunCr>, 'list'>;
  memory: RenderMemory;
}

export type Image = { component: string; image: string };
export type EnvVar = { name: string; value: string };
type RunOfBinding = { run: PromotionRunCr; active: boolean } | undefined;

const writeStatus = (deps: Pick<RenderSteps, 'kc'>, binding: BindingCr, patch: Json) =>
  writeChangedStatus(deps.kc, Binding, binding, patch);

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

/**
 * The PromotionRun that pointed this binding at its snapshot: the newest one that is running, else the
 * newest one (`active` says which).
 */
export function promotionRunOf(deps: Pick<RenderSteps, 'promotionRuns'>, binding: BindingCr): RunOfBinding {
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
export async function target(deps: RenderSteps, key: string, logger: Logger) {
  const { memory } = deps;
  const { namespace = '', name } = splitObjectKey(key);
  const cached = deps.bindings.get(namespace, name);
  if (!cached || cached.metadata.deletionTimestamp) {
    memory.rendered.delete(key);
    memory.unreachable.delete(key);
    memory.pushNotTold.delete(key);
    return undefined;
  }
  const application = deps.applications.get(namespace, cached.spec.application);
  const repo = application ? gitOpsRepositoryOf(application) : undefined;
  if (repo === undefined) return undefined; // not asked to render: App Studio's own service may do it
  const binding = await getObject(
    deps.kc,
    { ...Binding, namespace, name },
    { parse: kindParser<BindingCr>(Binding) },
  );
  if (!binding || binding.metadata.deletionTimestamp) return undefined;
  const writer = managedElsewhere(binding);
  if (writer) {
    if (!memory.warnedElsewhere.has(key)) {
      memory.warnedElsewhere.add(key);
      logger.info({ writer }, 'another service writes the binding status.components; not rendering');
      await deps.events.event(
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
export async function inputsOf(
  deps: Pick<RenderSteps, 'kc'>,
  binding: BindingCr,
  environment: EnvironmentCr,
): Promise<{ images: Image[]; env: EnvVar[] } | string> {
  const { snapshot: snapshotName } = binding.spec;
  const snapshot = await getObject(
    deps.kc,
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
export async function failWith(
  deps: RenderSteps,
  key: string,
  binding: BindingCr,
  run: RunOfBinding,
  failure: { message: string; retry: number | 'backoff'; reason?: string },
): Promise<ReconcileResult> {
  const freshSince = run?.active
    ? run.run.status?.promotionStartTime || text(run.run.metadata.creationTimestamp)
    : undefined;
  const { message, retry, reason } = failure;
  const conditions = repoCondition(binding, { ok: false, message, reason, freshSince }, deps.now());
  if (!jsonEqual(parseConditions(binding.status?.gitopsRepoConditions), conditions)) {
    await writeStatus(deps, binding, { gitopsRepoConditions: conditions });
    await deps.events.event(binding, 'Warning', RenderEventReason.GitOpsRepositoryRenderFailed, message);
  }
  deps.memory.rendered.delete(key);
  // A verdict in the very second the step started cannot be told from one before it: tried again a
  // second later, so the PromotionRun gets one it can tell (at most once per step).
  const written = conditions.find((c) => c.type === RepoCondition.type)?.lastTransitionTime;
  if (freshSince && Date.parse(written ?? '') <= Date.parse(freshSince)) return { requeueAfter: 1_000 };
  if (retry !== 'backoff') return { requeueAfter: retry };
  const failures = (deps.memory.unreachable.get(key) ?? 0) + 1;
  deps.memory.unreachable.set(key, failures);
  return { requeueAfter: Math.min(UNREACHABLE_MAX_MS, UNREACHABLE_FIRST_MS * 2 ** (failures - 1)) };
}

/**
 * Argo CD is asked to look at the branch now (not at its next poll); a failure is retried with the
 * reconcile, whose render then pushes nothing, so the key remembers that the host was not told yet.
 */
export async function tellPushed(
  deps: Pick<RenderSteps, 'onPushed' | 'memory'>,
  key: string,
  binding: BindingCr,
  repo: GitOpsRepository,
  result: { commit: string; pushed: boolean },
): Promise<void> {
  const { pushNotTold } = deps.memory;
  if (result.pushed) pushNotTold.add(key);
  if (!pushNotTold.has(key)) return;
  const namespace = binding.metadata.namespace ?? '';
  await deps.onPushed({ namespace, repoURL: repo.url, branch: repo.branch, commit: result.commit });
  pushNotTold.delete(key);
}

/** Step 4: status.components at the commit, and the success condition. False: the binding changed meanwhile. */
export async function writeRendered(
  deps: Pick<RenderSteps, 'kc' | 'now'>,
  binding: BindingCr,
  repo: GitOpsRepository,
  images: Image[],
  commit: string,
): Promise<boolean> {
  const { snapshot, environment } = binding.spec;
  const message = `Snapshot ${snapshot} rendered for Environment ${environment} at commit ${commit}`;
  try {
    await writeStatus(deps, binding, {
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
      gitopsRepoConditions: repoCondition(binding, { ok: true, message }, deps.now()),
    });
    return true;
  } catch (err) {
    // The next pass renders its new state (an unchanged render commits nothing).
    if (isConflict(err)) return false;
    throw err;
  }
}

/** The fingerprint of a render's inputs: the same one again with a ready condition renders nothing. */
const fingerprintOf = (binding: BindingCr, repo: GitOpsRepository, images: Image[], env: EnvVar[]) =>
  createHash('sha256')
    .update(JSON.stringify([repo, images, env, binding.metadata.generation]))
    .digest('hex');

/** One reconcile of the binding `key`. */
export async function reconcileRender(
  deps: RenderSteps,
  key: string,
  logger: Logger,
): Promise<ReconcileResult | undefined> {
  const found = await target(deps, key, logger);
  if (!found) return undefined;
  const { binding, repo, environment } = found;
  const run = promotionRunOf(deps, binding);
  if (typeof repo === 'string')
    return failWith(deps, key, binding, run, { message: repo, retry: USER_FIX_RETRY_MS });
  const inputs = await inputsOf(deps, binding, environment);
  if (typeof inputs === 'string')
    return failWith(deps, key, binding, run, { message: inputs, retry: USER_FIX_RETRY_MS });
  const { images, env } = inputs;
  const fingerprint = fingerprintOf(binding, repo, images, env);
  const own = parseConditions(binding.status?.gitopsRepoConditions).some(
    (c) => c.type === RepoCondition.type && c.status === 'True',
  );
  if (deps.memory.rendered.get(key) === fingerprint && own && renderStateOf(binding).state === 'ready') {
    await followLaterCommits(deps, binding, repo, logger);
    return undefined;
  }
  const { snapshot, environment: environmentName, application } = binding.spec;
  const promotionRun = run?.run.metadata.name;
  let result: { commit: string; pushed: boolean };
  try {
    result = await renderAndPush(deps, {
      binding,
      repo,
      credentials: await credentialsFor(deps.kc, binding.metadata.namespace ?? '', repo.url),
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
      return failWith(deps, key, binding, run, {
        message: err.message,
        retry: err.retryAfterMs,
        reason: err.reason,
      });
    if (!(err instanceof GitError)) throw err;
    logger.warn({ failure: err.failure }, 'rendering the GitOps repository failed');
    return failWith(deps, key, binding, run, gitFailureCondition(err, repo));
  }
  deps.memory.unreachable.delete(key);
  await tellPushed(deps, key, binding, repo, result);
  if (!(await writeRendered(deps, binding, repo, images, result.commit))) return { requeueAfter: 1 };
  deps.memory.rendered.set(key, fingerprint);
  logger.info({ commit: result.commit, pushed: result.pushed, snapshot }, 'rendered');
  if (result.pushed)
    await deps.events.event(
      binding,
      'Normal',
      RenderEventReason.GitOpsRepositoryRendered,
      `commit ${result.commit} pushed to branch ${repo.branch}: Snapshot ${snapshot} to Environment ${environmentName}${promotionRun ? ` (PromotionRun ${promotionRun})` : ''}`,
    );
  return undefined;
}

/** The render reconciler over the context and the feature's informers. */
export function createRenderReconciler(ctx: AppStudioContext, deps: RenderDeps): Reconciler {
  const steps: RenderSteps = {
    ...stepContext(ctx),
    gitOptions: { timeoutMs: ctx.renderGitTimeoutMs, sshKnownHostsFile: ctx.sshKnownHostsFile },
    onPushed: ctx.onPushed,
    ...deps,
    memory: newRenderMemory(),
  };
  return (key, { logger }) => reconcileRender(steps, key, logger);
}
