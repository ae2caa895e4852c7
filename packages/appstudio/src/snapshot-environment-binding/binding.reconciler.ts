/**
 * SnapshotEnvironmentBinding's reconcile as named steps (README: "SnapshotEnvironmentBinding"), for one
 * binding, in the original's order:
 * 1. `applicationMissing`: its Application is missing: the binding is deleted once it is older than the grace
 *    period (3 min);
 * 2. `notReady`: an earlier binding of the same application and environment exists: DuplicateBinding,
 *    nothing generated (the original's create webhook rule, which CEL cannot express); its Environment is
 *    missing: EnvironmentNotFound (a fix: the original was silent); the last `gitopsRepoConditions` entry
 *    False: GitOpsRepoNotReady (True: Reconciled); no repo conditions and no `status.components`:
 *    WaitingForComponentStatus, and every deployment it owns is deleted; a component named twice:
 *    DuplicateComponents;
 * 3. `desiredDeployments`: the deployments are generated (destination from the Environment);
 * 4. `applyDeployments`: stale ones it owns deleted, the others server-side applied when they differ (so
 *    edits are reverted and deleted ones recreated);
 * 5. `writeResult`: status: `gitopsDeployments` (sorted by component), `componentDeploymentConditions`,
 *    and, after an error, the success pair in `bindingConditions` (a fix: the original never cleared an
 *    error).
 * Every step is a top-level function over a `deps` object (`BindingSteps`: the context's client, recorder,
 * clock and settings, and the caches and index lookups it reads), so a test can drive one alone.
 */
import {
  APPSTUDIO_FIELD_MANAGER,
  AppStudioKinds,
  BindingEventReason,
  BindingMessage,
  BindingReason,
  Kinds,
  managedEnvironmentName,
} from '@gitops/api';
import {
  deleteIfExists,
  getObject,
  type Informer,
  KubeApiError,
  type KubeCondition,
  type KubeObject,
  type Logger,
  type ReconcileResult,
  type Reconciler,
  serverSideApply,
  splitObjectKey,
} from '@gitops/shared';
import { parseConditions, sameConditions, withError, withSuccess } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import { requeueIn, type StepContext, stepContext } from '../controller.ts';
import { byApplication, controlledObjects, type NamespacedLookup } from '../indexes.ts';
import { ageMs, type BindingCr, createdBefore, type Json, ownerReferences } from '../objects.ts';
import {
  boundTargetOf,
  type ClaimCr,
  claimNameOfEnvironment,
  credentialsOf,
  type EnvironmentCr,
  type TargetCr,
} from '../target-matching.ts';
import { writeChangedStatus } from '../writes.ts';
import {
  type ComponentStatus,
  componentDeploymentConditions,
  componentsOf,
  type DeploymentStatusEntry,
  type Destination,
  deploymentStatusEntry,
  deploymentUpToDate,
  desiredDeployment,
  duplicateComponent,
  isLabelValue,
} from './binding.render.ts';
import type { BindingWatchDeps } from './binding.watches.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;
const GitOpsDeployment = Kinds.GitOpsDeployment;

/** After a generation error, look again this often (the original's 10 s). */
const GENERATION_RETRY_MS = 10_000;

export type BindingReconcilerDeps = BindingWatchDeps;

/** One pass over a binding (as the cache held it). */
export interface Pass {
  binding: BindingCr;
  namespace: string;
  application: string;
  environment: string;
  status: NonNullable<BindingCr['status']>;
  now: Date;
  /** Its `bindingConditions` before this pass. */
  conditions: KubeCondition[];
  logger: Logger;
}

export type Outcome = ReconcileResult | undefined;

/** Whether `binding` (this incarnation) is the controller of `deployment`. */
function controlledBy(deployment: KubeObject, binding: KubeObject): boolean {
  return ownerReferences(deployment).some(
    (r) => r.controller && r.kind === Binding.kind && r.uid === binding.metadata.uid,
  );
}

/** What the steps use: the context's client, recorder, clock and settings, the caches and lookups they read. */
export interface BindingSteps extends StepContext {
  applicationGracePeriodMs: number;
  bindings: Pick<Informer<BindingCr>, 'get'>;
  environments: Pick<Informer<EnvironmentCr>, 'get'>;
  deployments: Pick<Informer<KubeObject>, 'get'>;
  applications: Pick<Informer<KubeObject>, 'get'>;
  claims: Pick<Informer<ClaimCr>, 'get'>;
  targets: Pick<Informer<TargetCr>, 'list'>;
  bindingsOfApplication: NamespacedLookup<BindingCr>;
  /** The GitOpsDeployments a binding controls. */
  ownedDeployments: (binding: KubeObject) => KubeObject[];
}

const writeStatus = (deps: Pick<BindingSteps, 'kc'>, binding: BindingCr, patch: Json) =>
  writeChangedStatus(deps.kc, Binding, binding, patch);

async function fail(
  deps: BindingSteps,
  pass: Pass,
  reason: string,
  message: string,
  requeueAfter?: number,
): Promise<Outcome> {
  const next = withError(pass.conditions, reason, message, pass.now);
  if (!sameConditions(pass.conditions, next)) {
    await writeStatus(deps, pass.binding, { bindingConditions: next });
    await deps.events.event(pass.binding, 'Warning', BindingEventReason.ErrorOccurred, message);
  }
  return requeueIn(requeueAfter);
}

/**
 * Deletes the deployments this binding controls that are not among `keep` (names). Selected by owner, not
 * by labels (a fix: the original selected by labels, so a deployment whose labels were edited was deleted).
 */
async function deleteStale(deps: BindingSteps, pass: Pass, keep: ReadonlySet<string>): Promise<void> {
  const { binding } = pass;
  for (const d of deps.ownedDeployments(binding)) {
    if (keep.has(d.metadata.name)) continue;
    const ref = { ...GitOpsDeployment, namespace: d.metadata.namespace, name: d.metadata.name };
    if (!(await deleteIfExists(deps.kc, ref, { uid: d.metadata.uid }))) continue;
    pass.logger.info({ deployment: d.metadata.name }, 'GitOpsDeployment deleted');
    await deps.events.event(
      binding,
      'Normal',
      BindingEventReason.GitOpsDeploymentDeleted,
      `GitOpsDeployment ${d.metadata.name} deleted: its component is no longer in the binding's status`,
    );
  }
}

/** Step 1: a binding created just before its Application gets a grace period, then it is deleted. */
export async function applicationMissing(deps: BindingSteps, pass: Pass): Promise<Outcome> {
  const { binding, namespace, application } = pass;
  const age = ageMs(binding, pass.now);
  if (age < deps.applicationGracePeriodMs) return { requeueAfter: deps.applicationGracePeriodMs - age + 100 };
  const ref = { ...Binding, namespace, name: binding.metadata.name };
  if (await deleteIfExists(deps.kc, ref, { uid: binding.metadata.uid })) {
    pass.logger.info({ application }, 'binding deleted: its Application does not exist');
    const message = `binding deleted: Application '${application}' does not exist`;
    await deps.events.event(binding, 'Warning', BindingEventReason.ApplicationNotFound, message);
  }
  return undefined;
}

/**
 * Step 2: what stops a binding before anything is generated (its outcome), else its Environment, its
 * components and the conditions the repository's verdict leads to.
 */
export async function notReady(
  deps: BindingSteps,
  pass: Pass,
): Promise<
  { outcome: Outcome } | { env: EnvironmentCr; components: ComponentStatus[]; conditions: KubeCondition[] }
> {
  const { binding, namespace, application, environment, status } = pass;
  const name = binding.metadata.name;
  const earlier = deps
    .bindingsOfApplication(namespace, application)
    .filter((b) => b.metadata.name !== name && b.spec.environment === environment)
    .find((b) => createdBefore(b, binding));
  if (earlier) {
    const message = BindingMessage.duplicateBinding(application, environment, earlier.metadata.name);
    return { outcome: await fail(deps, pass, BindingReason.DuplicateBinding, message) };
  }
  // The Environment must exist (its informer brings the binding back when it appears). Its deployments go
  // with it: they deployed through the Environment's cluster, which is no longer there.
  const env = deps.environments.get(namespace, environment);
  if (!env) {
    await deleteStale(deps, pass, new Set());
    const message = BindingMessage.environmentNotFound(environment);
    return { outcome: await fail(deps, pass, BindingReason.EnvironmentNotFound, message) };
  }
  // The component service's verdict on the GitOps repository: only the last entry counts.
  const repoConditions = binding.status?.gitopsRepoConditions ?? [];
  const lastRepoStatus = repoConditions.at(-1)?.status;
  if (lastRepoStatus === 'False')
    return {
      outcome: await fail(
        deps,
        pass,
        BindingReason.GitOpsRepoNotReady,
        BindingMessage.gitOpsRepoNotReady(name),
      ),
    };
  const conditions =
    lastRepoStatus === 'True'
      ? withSuccess(pass.conditions, BindingReason.Reconciled, pass.now)
      : pass.conditions;
  // Nothing to generate before the component service wrote the components.
  const components = componentsOf(status);
  if (lastRepoStatus === undefined && components.length === 0) {
    await deleteStale(deps, pass, new Set());
    const message = BindingMessage.waitingForComponentStatus(name);
    return { outcome: await fail(deps, pass, BindingReason.WaitingForComponentStatus, message) };
  }
  const duplicate = duplicateComponent(components);
  if (duplicate !== undefined) {
    const message = BindingMessage.duplicateComponent(duplicate);
    return { outcome: await fail(deps, pass, BindingReason.DuplicateComponents, message) };
  }
  return { env, components, conditions };
}

/** Where the deployments go, from the Environment; a string is the user-facing error. */
export function destinationOf(
  deps: Pick<BindingSteps, 'claims' | 'targets'>,
  env: EnvironmentCr,
): Destination | string {
  const claimName = claimNameOfEnvironment(env);
  if (claimName) {
    const claim = deps.claims.get(env.metadata.namespace, claimName);
    if (!claim) return BindingMessage.ClaimNotFound;
    const bound = boundTargetOf(claim, deps.targets.list(env.metadata.namespace));
    if (bound.kind !== 'found') return BindingMessage.DeploymentTargetNotFound;
    const target = credentialsOf(bound.target);
    return {
      environment: managedEnvironmentName(env.metadata.name),
      ...(target.defaultNamespace ? { namespace: target.defaultNamespace } : {}),
    };
  }
  const unstable = env.spec?.unstableConfigurationFields;
  if (unstable !== undefined) {
    const targetNamespace = unstable.kubernetesCredentials?.targetNamespace ?? '';
    if (!targetNamespace) return BindingMessage.MissingTargetNamespace;
    return { environment: managedEnvironmentName(env.metadata.name), namespace: targetNamespace };
  }
  return {};
}

/** Step 3: the deployments to generate, in component order; a string is the user-facing error. */
export function desiredDeployments(
  deps: Pick<BindingSteps, 'claims' | 'targets' | 'shardLabels'>,
  pass: Pass,
  env: EnvironmentCr,
  components: readonly ComponentStatus[],
): { component: ComponentStatus; desired: KubeObject }[] | string {
  const { binding, application, environment } = pass;
  const destination = destinationOf(deps, env);
  if (typeof destination === 'string') return destination;
  const labelled: [string, string][] = [
    ['spec.application', application],
    ['spec.environment', environment],
    ...components.map((c): [string, string] => ['the component name', c.name]),
  ];
  for (const [what, value] of labelled) {
    if (!isLabelValue(value)) {
      pass.logger.warn({ value }, 'a generated GitOpsDeployment label value would be invalid');
      return BindingMessage.invalidLabelValue(what, value);
    }
  }
  const sorted = [...components].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return sorted.map((component) => ({
    component,
    desired: desiredDeployment({
      binding,
      application,
      environment,
      component,
      destination,
      shardLabels: deps.shardLabels,
    }),
  }));
}

/** Applies one desired deployment when it differs; a string is why it cannot be. */
async function applyDeployment(
  deps: BindingSteps,
  pass: Pass,
  component: ComponentStatus,
  desired: KubeObject,
): Promise<KubeObject | string> {
  const { binding, namespace } = pass;
  const name = desired.metadata.name;
  // Not cached: it does not exist, or it is outside this shard (someone else's), so look.
  const before =
    deps.deployments.get(namespace, name) ??
    (await getObject(deps.kc, { ...GitOpsDeployment, namespace, name }));
  if (before && !controlledBy(before, binding))
    return `GitOpsDeployment ${name} already exists and is not controlled by this binding`;
  if (before && deploymentUpToDate(before, desired, deps.shardLabels)) return before;
  try {
    const live = await serverSideApply(deps.kc, desired, {
      fieldManager: APPSTUDIO_FIELD_MANAGER,
      force: true,
    });
    if (before?.metadata.resourceVersion !== live.metadata.resourceVersion)
      await deps.events.event(
        binding,
        'Normal',
        before ? BindingEventReason.GitOpsDeploymentUpdated : BindingEventReason.GitOpsDeploymentCreated,
        `GitOpsDeployment ${name} ${before ? 'updated' : 'created'} for component ${component.name}`,
      );
    return live;
  } catch (err) {
    // The API server refused what the component service wrote (e.g. an empty path): the user's to fix.
    if (err instanceof KubeApiError && err.statusCode === 422) return err.statusMessage;
    throw err;
  }
}

/** Step 4: stale deployments deleted, the others applied; their status entries, or the failures. */
export async function applyDeployments(
  deps: BindingSteps,
  pass: Pass,
  desired: readonly { component: ComponentStatus; desired: KubeObject }[],
): Promise<{ entries: DeploymentStatusEntry[]; failures: string[] }> {
  await deleteStale(deps, pass, new Set(desired.map((d) => d.desired.metadata.name)));
  const entries: DeploymentStatusEntry[] = [];
  const failures: string[] = [];
  for (const { component, desired: deployment } of desired) {
    const live = await applyDeployment(deps, pass, component, deployment);
    if (typeof live === 'string') failures.push(live);
    else entries.push(deploymentStatusEntry(component.name, deployment.metadata.name, live));
  }
  return { entries, failures };
}

/** Step 5: the deployments' status; an earlier error is cleared by a successful pass. */
export async function writeResult(
  deps: BindingSteps,
  pass: Pass,
  entries: DeploymentStatusEntry[],
  conditions: KubeCondition[],
): Promise<Outcome> {
  const { binding, status, now } = pass;
  const next = conditions.some((c) => c.type === 'ErrorOccurred' && c.status === 'True')
    ? withSuccess(conditions, BindingReason.Reconciled, now)
    : conditions;
  const existingDeployed = parseConditions(status.componentDeploymentConditions);
  await writeStatus(deps, binding, {
    gitopsDeployments: entries,
    componentDeploymentConditions: componentDeploymentConditions(existingDeployed, entries, now),
    ...(sameConditions(pass.conditions, next) ? {} : { bindingConditions: next }),
  });
  if (pass.conditions.some((c) => c.type === 'ErrorOccurred' && c.status === 'True'))
    await deps.events.event(
      binding,
      'Normal',
      BindingEventReason.ErrorOccurredResolved,
      'the binding is reconciled',
    );
  return undefined;
}

/** One reconcile of the binding `key`. */
export async function reconcileBinding(deps: BindingSteps, key: string, logger: Logger): Promise<Outcome> {
  const { namespace = '', name } = splitObjectKey(key);
  const binding = deps.bindings.get(namespace, name);
  if (!binding || binding.metadata.deletionTimestamp) return undefined; // its deployments go by garbage collection
  const status = binding.status ?? {};
  const pass: Pass = {
    binding,
    namespace,
    application: binding.spec.application,
    environment: binding.spec.environment,
    status,
    now: deps.now(),
    conditions: parseConditions(status.bindingConditions),
    logger,
  };
  if (!deps.applications.get(namespace, pass.application)) return applicationMissing(deps, pass);
  const ready = await notReady(deps, pass);
  if ('outcome' in ready) return ready.outcome;
  const desired = desiredDeployments(deps, pass, ready.env, ready.components);
  if (typeof desired === 'string')
    return fail(deps, pass, BindingReason.ErrorGeneratingGitOpsDeployment, desired, GENERATION_RETRY_MS);
  const { entries, failures } = await applyDeployments(deps, pass, desired);
  if (failures.length > 0)
    return fail(
      deps,
      pass,
      BindingReason.ErrorGeneratingGitOpsDeployment,
      failures.join('; '),
      GENERATION_RETRY_MS,
    );
  return writeResult(deps, pass, entries, ready.conditions);
}

/** The binding reconciler over the context and the feature's informers. */
export function createBindingReconciler(ctx: AppStudioContext, deps: BindingReconcilerDeps): Reconciler {
  const steps: BindingSteps = {
    ...stepContext(ctx),
    applicationGracePeriodMs: ctx.applicationGracePeriodMs,
    ...deps,
    bindingsOfApplication: byApplication(deps.bindings),
    ownedDeployments: controlledObjects(deps.deployments, Binding.kind),
  };
  return (key, { logger }) => reconcileBinding(steps, key, logger);
}
