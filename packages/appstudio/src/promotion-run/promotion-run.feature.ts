/**
 * PromotionRun: points the binding of (application, target environment) at a snapshot and follows its
 * deployments to a result (README: "PromotionRun"). A reconcile, for one run:
 * 1. Complete: nothing more, ever.
 * 2. An earlier run of the same application in the same namespace is not Complete: state `Waiting`, saying
 *    for which run; it starts by itself when that one completes (a fix: the original looked cluster-wide,
 *    never set Waiting and never came back).
 * 3. The environments: manual → the target; automated → the initial environment, then, one step at a
 *    time, each environment whose parentEnvironment completed and whose strategy is AppStudioAutomated.
 * 4. For the current step: the binding of (application, environment), generated from the application's
 *    Components when missing; the Snapshot must exist; the binding's spec.snapshot is set.
 * 5. Done when every deployment of the binding is Synced and Healthy (at the component's commitID when it
 *    has one); else In Progress until GITOPS_PROMOTION_TIMEOUT, measured from the step's start, ends it in
 *    Failure (every wait, including the wait for the binding's deployments).
 */
import {
  APPSTUDIO_FIELD_MANAGER,
  AppStudioKinds,
  AppStudioLabel,
  DeploymentStrategy,
  PromotionEnvironmentStatus,
  PromotionRunMessage,
  PromotionRunResult,
  PromotionRunState,
} from '@gitops/api';
import {
  collectionPath,
  getObject,
  HttpMethod,
  type Informer,
  type KubeCondition,
  type KubeObject,
  kubeRequest,
  kubeTime,
  type Logger,
  objectKey,
  patchStatus,
  type ReconcileResult,
  setCondition,
  splitObjectKey,
  withTypeMeta,
} from '@gitops/shared';
import { parseConditions } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import { type AppStudioController, createController } from '../controller.ts';
import { renderStateOf } from '../gitops-repository/render.feature.ts';
import { type Json, list, record, specOf, statusOf, strings, text } from '../objects.ts';
import {
  deploymentVerdicts,
  type EnvironmentStep,
  environmentStatusOf,
  generatedBindingName,
  timedOutMessage,
  withEnvironmentStatus,
} from './promotion-run.render.ts';

const PromotionRun = AppStudioKinds.PromotionRun;
const Binding = AppStudioKinds.SnapshotEnvironmentBinding;

/** While waiting, look again at least this often (the binding's status changes also wake the run). */
const POLL_MS = 15_000;

export const PromotionEventReason = {
  PromotionStarted: 'PromotionStarted',
  PromotionWaiting: 'PromotionWaiting',
  EnvironmentPromoted: 'EnvironmentPromoted',
  PromotionSucceeded: 'PromotionSucceeded',
  PromotionFailed: 'PromotionFailed',
  BindingGenerated: 'BindingGenerated',
  ErrorOccurred: 'ErrorOccurred',
} as const;

export interface PromotionRunFeatureDeps {
  promotionRuns: Informer<KubeObject>;
  bindings: Informer<KubeObject>;
  environments: Informer<KubeObject>;
}

const applicationOf = (o: KubeObject) => text(specOf(o).application);
const isComplete = (run: KubeObject) => text(statusOf(run).state) === PromotionRunState.Complete;

function createdBefore(a: KubeObject, b: KubeObject): boolean {
  const ta = text(a.metadata.creationTimestamp);
  const tb = text(b.metadata.creationTimestamp);
  return ta === tb ? a.metadata.name < b.metadata.name : ta < tb;
}

export function createPromotionRunFeature(
  ctx: AppStudioContext,
  deps: PromotionRunFeatureDeps,
): AppStudioController {
  const { kc, events } = ctx;

  /** Writes the changed status fields; returns the object as stored (the input when nothing changed). */
  async function writeStatus(run: KubeObject, patch: Json): Promise<KubeObject> {
    const status = statusOf(run);
    if (Object.entries(patch).every(([k, v]) => JSON.stringify(status[k] ?? null) === JSON.stringify(v)))
      return run;
    return await patchStatus(
      kc,
      { ...PromotionRun, namespace: run.metadata.namespace, name: run.metadata.name },
      { metadata: { resourceVersion: run.metadata.resourceVersion }, status: patch },
      { fieldManager: APPSTUDIO_FIELD_MANAGER },
    );
  }

  /** The single ErrorOccurred condition of a PromotionRun (the original's own condition shape). */
  const errorCondition = (
    run: KubeObject,
    status: 'True' | 'False',
    reason: string,
    message: string,
  ): KubeCondition[] =>
    setCondition(
      parseConditions(statusOf(run).conditions),
      { type: 'ErrorOccurred', status, reason, message },
      ctx.now(),
    );

  async function fail(
    run: KubeObject,
    message: string,
    requeueAfter?: number,
  ): Promise<ReconcileResult | undefined> {
    const conditions = errorCondition(run, 'True', 'ErrorOccurred', message);
    if (JSON.stringify(conditions) !== JSON.stringify(parseConditions(statusOf(run).conditions))) {
      await writeStatus(run, { conditions });
      await events.event(
        withTypeMeta(PromotionRun, run),
        'Warning',
        PromotionEventReason.ErrorOccurred,
        message,
      );
    }
    return requeueAfter === undefined ? undefined : { requeueAfter };
  }

  /** The next environment of an automated promotion after `done` (completed steps), if any. */
  function nextAutomatedEnvironment(
    namespace: string,
    done: ReadonlySet<string>,
    started: ReadonlySet<string>,
  ) {
    return deps.environments
      .list(namespace)
      .filter(
        (env) =>
          done.has(text(specOf(env).parentEnvironment)) &&
          text(specOf(env).deploymentStrategy) === DeploymentStrategy.AppStudioAutomated &&
          !started.has(env.metadata.name),
      )
      .map((env) => env.metadata.name)
      .sort()[0];
  }

  /** The binding of (application, environment), generated from the application's Components when missing. */
  async function bindingFor(
    run: KubeObject,
    environment: string,
    logger: Logger,
  ): Promise<KubeObject | string> {
    const namespace = run.metadata.namespace ?? '';
    const application = applicationOf(run);
    const existing = deps.bindings
      .list(namespace)
      .find((b) => applicationOf(b) === application && text(specOf(b).environment) === environment);
    if (existing) return existing;
    const components = (
      record(
        await kubeRequest(kc, {
          method: HttpMethod.GET,
          path: collectionPath({ ...AppStudioKinds.Component.resource, namespace }),
        }),
      ).items as KubeObject[] | undefined
    )?.filter((c) => applicationOf(c) === application);
    if (!components || components.length === 0) return PromotionRunMessage.noComponents(application);
    const name = generatedBindingName(application, environment);
    const created = (await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: collectionPath({ ...Binding.resource, namespace }),
      body: {
        apiVersion: Binding.apiVersion,
        kind: Binding.kind,
        metadata: {
          name,
          namespace,
          labels: {
            [AppStudioLabel.BindingApplication]: application,
            [AppStudioLabel.BindingEnvironment]: environment,
            ...ctx.shardLabels,
          },
        },
        spec: {
          application,
          environment,
          snapshot: text(specOf(run).snapshot),
          components: components.map((c) => ({ name: c.metadata.name })),
        },
      },
    }).catch((err: unknown) => {
      logger.warn({ err, binding: name }, 'generating the binding failed');
      throw err;
    })) as KubeObject;
    await events.event(
      withTypeMeta(PromotionRun, run),
      'Normal',
      PromotionEventReason.BindingGenerated,
      `SnapshotEnvironmentBinding ${name} generated for environment ${environment}`,
    );
    return created;
  }

  async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const cached = deps.promotionRuns.get(namespace, name);
    if (!cached || cached.metadata.deletionTimestamp || isComplete(cached)) return undefined;
    let run: KubeObject = cached;
    const now = ctx.now();
    const spec = specOf(run);
    const status = statusOf(run);
    const application = applicationOf(run);
    const typed = withTypeMeta(PromotionRun, run);

    // 2. One active promotion per application in a namespace: the earlier run goes first.
    const earlier = deps.promotionRuns
      .list(namespace)
      .filter((r) => r.metadata.name !== name && applicationOf(r) === application && !isComplete(r))
      .find((r) => createdBefore(r, run));
    if (earlier) {
      const message = PromotionRunMessage.waitingForRun(earlier.metadata.name, application);
      if (text(status.state) !== PromotionRunState.Waiting)
        await events.event(typed, 'Normal', PromotionEventReason.PromotionWaiting, message);
      await writeStatus(run, {
        state: PromotionRunState.Waiting,
        conditions: errorCondition(run, 'False', 'WaitingForActivePromotion', message),
      });
      return undefined;
    }

    // 3. Which environment this pass works on.
    const manual = text(record(spec.manualPromotion).targetEnvironment);
    const automated = text(record(spec.automatedPromotion).initialEnvironment);
    if (!automated && !manual) return fail(run, PromotionRunMessage.InvalidTarget);
    let steps: EnvironmentStep[] = environmentStatusOf(status);
    let current = steps.find((s) => s.status === PromotionEnvironmentStatus.InProgress)?.environmentName;
    const succeeded = new Set(
      steps.filter((s) => s.status === PromotionEnvironmentStatus.Success).map((s) => s.environmentName),
    );
    let stepStart = text(status.promotionStartTime);
    if (!current) {
      const first = automated || manual;
      const next =
        steps.length === 0
          ? first
          : automated
            ? nextAutomatedEnvironment(namespace, succeeded, new Set(steps.map((s) => s.environmentName)))
            : undefined;
      if (!next) {
        await writeStatus(run, {
          state: PromotionRunState.Complete,
          completionResult: PromotionRunResult.Success,
          conditions: errorCondition(run, 'False', '', ''),
        });
        await events.event(
          typed,
          'Normal',
          PromotionEventReason.PromotionSucceeded,
          `promoted to ${[...succeeded].join(', ')}`,
        );
        return undefined;
      }
      current = next;
      steps = withEnvironmentStatus(
        steps,
        current,
        PromotionEnvironmentStatus.InProgress,
        PromotionRunMessage.WaitingForDeployments,
      );
      stepStart = kubeTime(now);
      await events.event(
        typed,
        'Normal',
        PromotionEventReason.PromotionStarted,
        `promoting snapshot ${text(spec.snapshot)} to ${current}`,
      );
    }
    // The step and its start are recorded first, so every wait below is bounded by the timeout.
    run = await writeStatus(run, {
      state: PromotionRunState.Active,
      promotionStartTime: stepStart,
      environmentStatus: steps,
    });
    const remainingMs = ctx.promotionTimeoutMs - (now.getTime() - Date.parse(stepStart));

    // Every wait ends at the timeout.
    const timedOut = async () => {
      const message = timedOutMessage(ctx.promotionTimeoutMs);
      await writeStatus(run, {
        state: PromotionRunState.Complete,
        completionResult: PromotionRunResult.Failure,
        environmentStatus: withEnvironmentStatus(steps, current, PromotionEnvironmentStatus.Failed, message),
        conditions: errorCondition(run, 'True', 'ErrorOccurred', message),
      });
      await events.event(typed, 'Warning', PromotionEventReason.PromotionFailed, message);
      return undefined;
    };
    if (remainingMs <= 0) return timedOut();

    // 4. The binding of the step, the Snapshot, and the binding pointed at the snapshot.
    const binding = await bindingFor(run, current, logger);
    if (typeof binding === 'string') return fail(run, binding, Math.min(POLL_MS, remainingMs));
    const bindingName = binding.metadata.name;
    const active = strings(status.activeBindings);
    if (!automated && active.length > 0 && !active.includes(bindingName))
      return fail(run, PromotionRunMessage.bindingChanged(active.join(', '), bindingName));
    const snapshot = text(spec.snapshot);
    if (!(await getObject(kc, { ...AppStudioKinds.Snapshot, namespace, name: snapshot })))
      return fail(
        run,
        PromotionRunMessage.snapshotNotFound(snapshot, bindingName),
        Math.min(POLL_MS, remainingMs),
      );
    let pointed: KubeObject | undefined;
    if (text(specOf(binding).snapshot) !== snapshot) {
      pointed = (await kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path: `${collectionPath({ ...Binding.resource, namespace })}/${encodeURIComponent(bindingName)}`,
        body: { spec: { snapshot } },
        contentType: 'application/merge-patch+json',
      })) as KubeObject;
    }

    // 5. The verdict of the binding's deployments, once the GitOps repository holds the snapshot when this
    // service renders it (the freshest of the cache and the patch's answer: the cache may lag behind).
    const cachedBinding = deps.bindings.get(namespace, bindingName) ?? binding;
    const latest =
      pointed && (pointed.metadata.generation ?? 0) > (cachedBinding.metadata.generation ?? 0)
        ? pointed
        : cachedBinding;
    const render = renderStateOf(latest);
    if (render.state === 'failed')
      return fail(
        run,
        PromotionRunMessage.gitOpsRepositoryFailed(bindingName, render.message),
        Math.min(POLL_MS, remainingMs),
      );
    const bindingStatus = render.state === 'rendering' ? {} : statusOf(latest);
    const expected = list(specOf(binding).components).length;
    const verdicts = deploymentVerdicts(bindingStatus);
    const base = {
      state: PromotionRunState.Active,
      activeBindings: automated ? [...new Set([...active, bindingName])] : [bindingName],
      promotionStartTime: stepStart,
      conditions: errorCondition(run, 'False', '', ''),
    };
    if (verdicts.length === 0 || verdicts.length < expected) {
      await writeStatus(run, {
        ...base,
        environmentStatus: withEnvironmentStatus(
          steps,
          current,
          PromotionEnvironmentStatus.InProgress,
          PromotionRunMessage.WaitingForDeployments,
        ),
      });
      return { requeueAfter: Math.min(POLL_MS, remainingMs) };
    }
    const waiting = verdicts.filter((v) => !v.done).map((v) => v.name);
    if (waiting.length > 0) {
      await writeStatus(run, {
        ...base,
        environmentStatus: withEnvironmentStatus(
          steps,
          current,
          PromotionEnvironmentStatus.InProgress,
          PromotionRunMessage.waitingFor(waiting),
        ),
      });
      return { requeueAfter: Math.min(POLL_MS, remainingMs) };
    }
    steps = withEnvironmentStatus(
      steps,
      current,
      PromotionEnvironmentStatus.Success,
      PromotionRunMessage.AllSyncedHealthy,
    );
    await events.event(
      typed,
      'Normal',
      PromotionEventReason.EnvironmentPromoted,
      `snapshot ${snapshot} deployed to ${current}`,
    );
    const more = automated
      ? nextAutomatedEnvironment(
          namespace,
          new Set([...succeeded, current]),
          new Set(steps.map((s) => s.environmentName)),
        )
      : undefined;
    if (more) {
      // The next step starts at the next pass (its own start time and timeout).
      await writeStatus(run, { ...base, environmentStatus: steps });
      return { requeueAfter: 1 };
    }
    await writeStatus(run, {
      ...base,
      state: PromotionRunState.Complete,
      completionResult: PromotionRunResult.Success,
      environmentStatus: steps,
    });
    await events.event(
      typed,
      'Normal',
      PromotionEventReason.PromotionSucceeded,
      `snapshot ${snapshot} promoted`,
    );
    return undefined;
  }

  return createController(ctx, {
    name: 'appstudio-promotionrun',
    informer: deps.promotionRuns,
    alsoReads: [deps.bindings, deps.environments],
    reconcile,
    needsReconcile: (a, b) =>
      a.metadata.resourceVersion === b.metadata.resourceVersion ||
      a.metadata.generation !== b.metadata.generation,
    watch: (enqueue) => {
      // A run that completes lets the next run of its application start.
      const bySibling = (run: KubeObject) => {
        for (const r of deps.promotionRuns.list(run.metadata.namespace))
          if (
            r.metadata.name !== run.metadata.name &&
            applicationOf(r) === applicationOf(run) &&
            !isComplete(r)
          )
            enqueue(objectKey(r));
      };
      // A binding's status (its deployments' verdicts) wakes the runs of its application.
      const byBinding = (binding: KubeObject) => {
        for (const r of deps.promotionRuns.list(binding.metadata.namespace))
          if (applicationOf(r) === applicationOf(binding) && !isComplete(r)) enqueue(objectKey(r));
      };
      return [
        deps.promotionRuns.onUpdate((a, b) => {
          if (text(statusOf(a).state) !== text(statusOf(b).state)) bySibling(b);
        }),
        deps.promotionRuns.onDelete(bySibling),
        deps.bindings.onAdd(byBinding),
        deps.bindings.onUpdate((_a, b) => byBinding(b)),
      ];
    },
  });
}
