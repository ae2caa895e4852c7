/**
 * PromotionRun's reconcile as named steps (README: "PromotionRun"), for one run:
 * 1. Complete: nothing more, ever.
 * 2. `waitForEarlierRun`: an earlier run of the same application in the same namespace is not Complete:
 *    state `Waiting`, saying for which run; it starts by itself when that one completes (a fix: the original
 *    looked cluster-wide, never set Waiting and never came back).
 * 3. `startStep`: the environments: manual → the target; automated → the initial environment, then, one
 *    step at a time, each environment whose parentEnvironment completed and whose strategy is
 *    AppStudioAutomated. The step and its start are recorded first, so every wait is bounded by the timeout.
 * 4. `prepareBinding`: for the current step, the binding of (application, environment), generated from the
 *    application's Components when missing; the Snapshot must exist; the binding is pointed at the snapshot
 *    through its own write path (`pointBindingAt`).
 * 5. `followDeployments`: done when every deployment of the binding is Synced and Healthy (at the
 *    component's commitID when it has one); else In Progress until GITOPS_PROMOTION_TIMEOUT, measured from
 *    the step's start, ends it in Failure (`timedOut`; every wait, including the wait for the deployments).
 *    A render of the binding refused during the step (a refused push or credentials, an untrusted host key:
 *    REFUSAL_REASONS) ends it in Failure at once, with the refusal's message; other render failures wait.
 * Every step is a top-level function over a `deps` object (`PromotionRunSteps`: the context's client,
 * recorder, clock and settings, and the caches and index lookups it reads), so a test can drive one alone.
 */
import {
  AppStudioKinds,
  PromotionEnvironmentStatus,
  PromotionEventReason,
  PromotionRunMessage,
  PromotionRunResult,
  PromotionRunState,
} from '@gitops/api';
import {
  collectionPath,
  getObject,
  HttpMethod,
  type Informer,
  type KubeObject,
  kubeRequest,
  kubeTime,
  type Logger,
  type ReconcileResult,
  type Reconciler,
  splitObjectKey,
} from '@gitops/shared';
import { parseConditions, sameConditions } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import { requeueIn, type StepContext, stepContext } from '../controller.ts';
import { renderStateOf } from '../gitops-repository/render.status.ts';
import { byApplication, type NamespacedLookup } from '../indexes.ts';
import {
  applicationOf,
  type BindingCr,
  createdBefore,
  type EnvironmentCr,
  type Json,
  type PromotionRunCr,
  record,
} from '../objects.ts';
import { createBinding, pointBindingAt, writeChangedStatus } from '../writes.ts';
import {
  deploymentVerdicts,
  type EnvironmentStep,
  environmentStatusOf,
  errorCondition,
  generatedBindingName,
  nextAutomatedEnvironment,
  timedOutMessage,
  waitingFor,
  withEnvironmentStatus,
} from './promotion-run.render.ts';
import { isComplete } from './promotion-run.watches.ts';

const PromotionRun = AppStudioKinds.PromotionRun;

/** While waiting, look again at least this often (the binding's status changes also wake the run). */
const POLL_MS = 15_000;

export interface PromotionRunReconcilerDeps {
  promotionRuns: Informer<PromotionRunCr>;
  bindings: Informer<BindingCr>;
  environments: Informer<EnvironmentCr>;
}

/** One pass over a run whose current step is recorded (its environment, its start, the time left). */
export interface StepPass {
  /** The run as stored after the step was recorded. */
  run: PromotionRunCr;
  /** The run as the pass found it in the cache (the object of its Events). */
  cached: PromotionRunCr;
  namespace: string;
  snapshot: string;
  automated: boolean;
  /** The status before this pass (its `activeBindings`). */
  previous: NonNullable<PromotionRunCr['status']>;
  steps: EnvironmentStep[];
  current: string;
  succeeded: ReadonlySet<string>;
  stepStart: string;
  remainingMs: number;
}

export type Outcome = ReconcileResult | undefined;

/** What the steps use: the context's client, recorder, clock and settings, the caches and lookups they read. */
export interface PromotionRunSteps extends StepContext {
  promotionTimeoutMs: number;
  promotionRuns: Pick<Informer<PromotionRunCr>, 'get'>;
  bindings: Pick<Informer<BindingCr>, 'get'>;
  environments: Pick<Informer<EnvironmentCr>, 'list'>;
  runsOfApplication: NamespacedLookup<PromotionRunCr>;
  bindingsOfApplication: NamespacedLookup<BindingCr>;
}

const writeStatus = (deps: Pick<PromotionRunSteps, 'kc'>, run: PromotionRunCr, patch: Json) =>
  writeChangedStatus(deps.kc, PromotionRun, run, patch);
/** While waiting, look again at least every POLL_MS, and at the step's timeout. */
const poll = (pass: StepPass) => Math.min(POLL_MS, pass.remainingMs);

async function fail(
  deps: PromotionRunSteps,
  run: PromotionRunCr,
  message: string,
  requeueAfter?: number,
): Promise<Outcome> {
  const conditions = errorCondition(run, 'True', 'ErrorOccurred', message, deps.now());
  if (!sameConditions(conditions, parseConditions(run.status?.conditions))) {
    await writeStatus(deps, run, { conditions });
    await deps.events.event(run, 'Warning', PromotionEventReason.ErrorOccurred, message);
  }
  return requeueIn(requeueAfter);
}

/** Step 2: true (and the run Waiting) when an earlier run of its application is not Complete. */
export async function waitForEarlierRun(deps: PromotionRunSteps, run: PromotionRunCr): Promise<boolean> {
  const application = run.spec?.application ?? '';
  const earlier = deps
    .runsOfApplication(run.metadata.namespace, application)
    .filter((r) => r.metadata.name !== run.metadata.name && !isComplete(r))
    .find((r) => createdBefore(r, run));
  if (!earlier) return false;
  const message = PromotionRunMessage.waitingForRun(earlier.metadata.name, application);
  if (run.status?.state !== PromotionRunState.Waiting)
    await deps.events.event(run, 'Normal', PromotionEventReason.PromotionWaiting, message);
  await writeStatus(deps, run, {
    state: PromotionRunState.Waiting,
    conditions: errorCondition(run, 'False', 'WaitingForActivePromotion', message, deps.now()),
  });
  return true;
}

/**
 * Step 3: the step this pass works on, recorded with its start; or the outcome when the run is over (every
 * step done) or has no target.
 */
export async function startStep(
  deps: PromotionRunSteps,
  run: PromotionRunCr,
): Promise<StepPass | { outcome: Outcome }> {
  const now = deps.now();
  const snapshot = run.spec?.snapshot ?? '';
  const status = run.status ?? {};
  const namespace = run.metadata.namespace ?? '';
  const manual = run.spec?.manualPromotion?.targetEnvironment ?? '';
  const automated = run.spec?.automatedPromotion?.initialEnvironment ?? '';
  if (!automated && !manual) return { outcome: await fail(deps, run, PromotionRunMessage.InvalidTarget) };
  let steps = environmentStatusOf(status);
  let current = steps.find((s) => s.status === PromotionEnvironmentStatus.InProgress)?.environmentName;
  const succeeded = new Set(
    steps.filter((s) => s.status === PromotionEnvironmentStatus.Success).map((s) => s.environmentName),
  );
  let stepStart = status.promotionStartTime ?? '';
  if (!current) {
    const started = new Set(steps.map((s) => s.environmentName));
    const next =
      steps.length === 0
        ? automated || manual
        : automated
          ? nextAutomatedEnvironment(deps.environments.list(namespace), succeeded, started)
          : undefined;
    if (!next) return { outcome: await complete(deps, run, `promoted to ${[...succeeded].join(', ')}`, {}) };
    current = next;
    steps = withEnvironmentStatus(
      steps,
      current,
      PromotionEnvironmentStatus.InProgress,
      PromotionRunMessage.WaitingForDeployments,
    );
    stepStart = kubeTime(now);
    const message = `promoting snapshot ${snapshot} to ${current}`;
    await deps.events.event(run, 'Normal', PromotionEventReason.PromotionStarted, message);
  }
  const recorded = await writeStatus(deps, run, {
    state: PromotionRunState.Active,
    promotionStartTime: stepStart,
    environmentStatus: steps,
  });
  return {
    run: recorded,
    cached: run,
    namespace,
    snapshot,
    automated: automated !== '',
    previous: status,
    steps,
    current,
    succeeded,
    stepStart,
    remainingMs: deps.promotionTimeoutMs - (now.getTime() - Date.parse(stepStart)),
  };
}

/**
 * Complete with Success: `fields` are the last status fields of the run (the base of its last step);
 * `cached` is the run as the pass found it.
 */
async function complete(
  deps: PromotionRunSteps,
  run: PromotionRunCr,
  message: string,
  fields: Json,
  cached = run,
): Promise<Outcome> {
  await writeStatus(deps, run, {
    conditions: errorCondition(run, 'False', '', '', deps.now()),
    ...fields,
    state: PromotionRunState.Complete,
    completionResult: PromotionRunResult.Success,
  });
  await deps.events.event(cached, 'Normal', PromotionEventReason.PromotionSucceeded, message);
  return undefined;
}

/**
 * The run ends in Failure: the step Failed with `message`, the run Complete with Failure, the message in its
 * ErrorOccurred condition (every wait at the timeout; a refused push of the step's render at once).
 */
async function endInFailure(deps: PromotionRunSteps, pass: StepPass, message: string): Promise<Outcome> {
  await writeStatus(deps, pass.run, {
    state: PromotionRunState.Complete,
    completionResult: PromotionRunResult.Failure,
    environmentStatus: withEnvironmentStatus(
      pass.steps,
      pass.current,
      PromotionEnvironmentStatus.Failed,
      message,
    ),
    conditions: errorCondition(pass.run, 'True', 'ErrorOccurred', message, deps.now()),
  });
  await deps.events.event(pass.cached, 'Warning', PromotionEventReason.PromotionFailed, message);
  return undefined;
}

const timedOut = (deps: PromotionRunSteps, pass: StepPass) =>
  endInFailure(deps, pass, timedOutMessage(deps.promotionTimeoutMs));

/** The binding of (application, environment), generated from the application's Components when missing. */
async function bindingFor(
  deps: PromotionRunSteps,
  pass: StepPass,
  logger: Logger,
): Promise<BindingCr | string> {
  const { run, namespace, current: environment } = pass;
  const application = run.spec?.application ?? '';
  const existing = deps
    .bindingsOfApplication(namespace, application)
    .find((b) => b.spec.environment === environment);
  if (existing) return existing;
  const components = (
    record(
      await kubeRequest(deps.kc, {
        method: HttpMethod.GET,
        path: collectionPath({ ...AppStudioKinds.Component.resource, namespace }),
      }),
    ).items as KubeObject[] | undefined
  )?.filter((c) => applicationOf(c) === application);
  if (!components || components.length === 0) return PromotionRunMessage.noComponents(application);
  const name = generatedBindingName(application, environment);
  const created = await createBinding(deps.kc, {
    namespace,
    name,
    application,
    environment,
    snapshot: pass.snapshot,
    components: components.map((c) => c.metadata.name),
    shardLabels: deps.shardLabels,
  }).catch((err: unknown) => {
    logger.warn({ err, binding: name }, 'generating the binding failed');
    throw err;
  });
  const message = `SnapshotEnvironmentBinding ${name} generated for environment ${environment}`;
  await deps.events.event(run, 'Normal', PromotionEventReason.BindingGenerated, message);
  return created;
}

/**
 * Step 4: the binding of the step pointed at the snapshot, as fresh as known (the cache or the write's
 * answer, whichever is newer: the cache may lag behind); or the outcome when it cannot be.
 */
export async function prepareBinding(
  deps: PromotionRunSteps,
  pass: StepPass,
  logger: Logger,
): Promise<{ binding: BindingCr; latest: BindingCr } | { outcome: Outcome }> {
  const { run, namespace, snapshot } = pass;
  const binding = await bindingFor(deps, pass, logger);
  if (typeof binding === 'string') return { outcome: await fail(deps, run, binding, poll(pass)) };
  const bindingName = binding.metadata.name;
  const active = pass.previous.activeBindings ?? [];
  if (!pass.automated && active.length > 0 && !active.includes(bindingName))
    return {
      outcome: await fail(deps, run, PromotionRunMessage.bindingChanged(active.join(', '), bindingName)),
    };
  if (!(await getObject(deps.kc, { ...AppStudioKinds.Snapshot, namespace, name: snapshot })))
    return {
      outcome: await fail(deps, run, PromotionRunMessage.snapshotNotFound(snapshot, bindingName), poll(pass)),
    };
  const pointed = await pointBindingAt(deps.kc, binding, snapshot);
  const cached = deps.bindings.get(namespace, bindingName) ?? binding;
  const latest =
    pointed && (pointed.metadata.generation ?? 0) > (cached.metadata.generation ?? 0) ? pointed : cached;
  return { binding, latest };
}

/**
 * Step 5: the verdict of the binding's deployments, once the GitOps repository holds the snapshot when this
 * service renders it; the next step, or the run's completion, when they are all done.
 */
export async function followDeployments(
  deps: PromotionRunSteps,
  pass: StepPass,
  binding: BindingCr,
  latest: BindingCr,
): Promise<Outcome> {
  const { run, current } = pass;
  const bindingName = binding.metadata.name;
  const render = renderStateOf(latest);
  if (render.state === 'failed') {
    const message = PromotionRunMessage.gitOpsRepositoryFailed(bindingName, render.message);
    // A refusal reported during this step (not one left from before it: its time is after the step's start,
    // both in whole seconds; the render feature reports again when it cannot tell) will not go away by waiting.
    if (render.refused && Date.parse(render.since) > Date.parse(pass.stepStart))
      return endInFailure(deps, pass, message);
    return fail(deps, run, message, poll(pass));
  }
  const verdicts = deploymentVerdicts(render.state === 'rendering' ? {} : (latest.status ?? {}));
  const expected = binding.spec.components.length;
  const active = pass.previous.activeBindings ?? [];
  const base = {
    state: PromotionRunState.Active,
    activeBindings: pass.automated ? [...new Set([...active, bindingName])] : [bindingName],
    promotionStartTime: pass.stepStart,
    conditions: errorCondition(run, 'False', '', '', deps.now()),
  };
  const waitingMessage = waitingFor(verdicts, expected);
  if (waitingMessage !== undefined) {
    await writeStatus(deps, run, {
      ...base,
      environmentStatus: withEnvironmentStatus(
        pass.steps,
        current,
        PromotionEnvironmentStatus.InProgress,
        waitingMessage,
      ),
    });
    return { requeueAfter: poll(pass) };
  }
  const steps = withEnvironmentStatus(
    pass.steps,
    current,
    PromotionEnvironmentStatus.Success,
    PromotionRunMessage.AllSyncedHealthy,
  );
  const message = `snapshot ${pass.snapshot} deployed to ${current}`;
  await deps.events.event(pass.cached, 'Normal', PromotionEventReason.EnvironmentPromoted, message);
  const started = new Set(steps.map((s) => s.environmentName));
  const more = pass.automated
    ? nextAutomatedEnvironment(
        deps.environments.list(pass.namespace),
        new Set([...pass.succeeded, current]),
        started,
      )
    : undefined;
  const fields = { ...base, environmentStatus: steps };
  if (!more) return complete(deps, run, `snapshot ${pass.snapshot} promoted`, fields, pass.cached);
  // The next step starts at the next pass (its own start time and timeout).
  await writeStatus(deps, run, fields);
  return { requeueAfter: 1 };
}

/** One reconcile of the run `key`. */
export async function reconcilePromotionRun(
  deps: PromotionRunSteps,
  key: string,
  logger: Logger,
): Promise<Outcome> {
  const { namespace = '', name } = splitObjectKey(key);
  const run = deps.promotionRuns.get(namespace, name);
  if (!run || run.metadata.deletionTimestamp || isComplete(run)) return undefined;
  if (await waitForEarlierRun(deps, run)) return undefined;
  const pass = await startStep(deps, run);
  if ('outcome' in pass) return pass.outcome;
  if (pass.remainingMs <= 0) return timedOut(deps, pass);
  const prepared = await prepareBinding(deps, pass, logger);
  if ('outcome' in prepared) return prepared.outcome;
  return followDeployments(deps, pass, prepared.binding, prepared.latest);
}

/** The PromotionRun reconciler over the context and the feature's informers. */
export function createPromotionRunReconciler(
  ctx: AppStudioContext,
  deps: PromotionRunReconcilerDeps,
): Reconciler {
  const steps: PromotionRunSteps = {
    ...stepContext(ctx),
    promotionTimeoutMs: ctx.promotionTimeoutMs,
    ...deps,
    runsOfApplication: byApplication(deps.promotionRuns),
    bindingsOfApplication: byApplication(deps.bindings),
  };
  return (key, { logger }) => reconcilePromotionRun(steps, key, logger);
}
