/**
 * SnapshotEnvironmentBinding → one GitOpsDeployment per `status.components[]` entry (README:
 * "SnapshotEnvironmentBinding"). A reconcile, for one binding, in the original's order:
 * 1. its Application is missing: the binding is deleted once it is older than the grace period (3 min);
 * 2. an earlier binding of the same application and environment exists: DuplicateBinding, nothing generated
 *    (the original's create webhook rule, which CEL cannot express);
 * 3. its Environment is missing: EnvironmentNotFound (a fix: the original was silent);
 * 4. the last `gitopsRepoConditions` entry False: GitOpsRepoNotReady; True: Reconciled;
 * 5. no repo conditions and no `status.components`: WaitingForComponentStatus, and every deployment it owns
 *    is deleted; a component named twice: DuplicateComponents;
 * 6. the deployments are generated (destination from the Environment), stale ones it owns deleted, the others
 *    server-side applied when they differ (so edits are reverted and deleted ones recreated);
 * 7. status: `gitopsDeployments` (sorted by component), `componentDeploymentConditions`, and, after an
 *    error, the success pair in `bindingConditions` (a fix: the original never cleared an error).
 */
import {
  APPSTUDIO_FIELD_MANAGER,
  AppStudioKinds,
  BindingMessage,
  BindingReason,
  Kinds,
  managedEnvironmentName,
} from '@gitops/api';
import {
  deleteIfExists,
  getObject,
  KubeApiError,
  type KubeCondition,
  type KubeObject,
  type Logger,
  type ReconcileResult,
  serverSideApply,
  splitObjectKey,
  withTypeMeta,
} from '@gitops/shared';
import { parseConditions, sameConditions, withError, withSuccess } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { boundTargetOf, claimNameOfEnvironment, credentialsOf } from '../deployment-target.ts';
import {
  ageMs,
  applicationOf,
  createdBefore,
  environmentOf,
  type Json,
  list,
  ownerReferences,
  record,
  specOf,
  statusOf,
  text,
} from '../objects.ts';
import { writeChangedStatus } from '../writes.ts';
import {
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
import { type BindingWatchDeps, bindingChanged, watchBindingSources } from './binding.watches.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;
const GitOpsDeployment = Kinds.GitOpsDeployment;

/** After a generation error, look again this often (the original's 10 s). */
const GENERATION_RETRY_MS = 10_000;

export const BindingEventReason = {
  GitOpsDeploymentCreated: 'GitOpsDeploymentCreated',
  GitOpsDeploymentUpdated: 'GitOpsDeploymentUpdated',
  GitOpsDeploymentDeleted: 'GitOpsDeploymentDeleted',
  ApplicationNotFound: 'ApplicationNotFound',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

export type BindingFeatureDeps = BindingWatchDeps;

/** Whether `binding` (this incarnation) is the controller of `deployment`. */
function controlledBy(deployment: KubeObject, binding: KubeObject): boolean {
  return ownerReferences(deployment).some(
    (r) => r.controller && r.kind === Binding.kind && r.uid === binding.metadata.uid,
  );
}

export function createBindingFeature(ctx: AppStudioContext, deps: BindingFeatureDeps): AppStudioController {
  const { kc, events } = ctx;

  const writeStatus = (binding: KubeObject, patch: Json) => writeChangedStatus(kc, Binding, binding, patch);

  /** The deployments this binding controls (a controller ownerReference with its uid). */
  function ownedDeployments(binding: KubeObject): KubeObject[] {
    return deps.deployments
      .list(binding.metadata.namespace)
      .filter((d) =>
        ownerReferences(d).some(
          (r) => r.controller && r.uid === binding.metadata.uid && r.kind === Binding.kind,
        ),
      );
  }

  /**
   * Deletes the deployments this binding controls that are not among `keep` (names). Selected by owner, not
   * by labels (a fix: the original selected by labels, so a deployment whose labels were edited was deleted).
   */
  async function deleteStale(binding: KubeObject, keep: ReadonlySet<string>, logger: Logger): Promise<void> {
    for (const d of ownedDeployments(binding)) {
      if (keep.has(d.metadata.name)) continue;
      if (
        await deleteIfExists(
          kc,
          { ...GitOpsDeployment, namespace: d.metadata.namespace, name: d.metadata.name },
          { uid: d.metadata.uid },
        )
      ) {
        logger.info({ deployment: d.metadata.name }, 'GitOpsDeployment deleted');
        await events.event(
          withTypeMeta(Binding, binding),
          'Normal',
          BindingEventReason.GitOpsDeploymentDeleted,
          `GitOpsDeployment ${d.metadata.name} deleted: its component is no longer in the binding's status`,
        );
      }
    }
  }

  /** Where the deployments go, from the Environment; a string is the user-facing error. */
  async function destinationOf(env: KubeObject): Promise<Destination | string> {
    const spec = specOf(env);
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
    if (spec.unstableConfigurationFields !== undefined) {
      const targetNamespace = text(
        record(record(spec.unstableConfigurationFields).kubernetesCredentials).targetNamespace,
      );
      if (!targetNamespace) return BindingMessage.MissingTargetNamespace;
      return { environment: managedEnvironmentName(env.metadata.name), namespace: targetNamespace };
    }
    return {};
  }

  async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const binding = deps.bindings.get(namespace, name);
    if (!binding || binding.metadata.deletionTimestamp) return undefined; // its deployments go by garbage collection
    const application = applicationOf(binding);
    const environment = environmentOf(binding);
    const status = statusOf(binding);
    const now = ctx.now();
    const conditions = parseConditions(status.bindingConditions);
    const typed = withTypeMeta(Binding, binding);

    const fail = async (reason: string, message: string, requeueAfter?: number) => {
      const next = withError(conditions, reason, message, now);
      if (!sameConditions(conditions, next)) {
        await writeStatus(binding, { bindingConditions: next });
        await events.event(typed, 'Warning', BindingEventReason.ErrorOccurred, message);
      }
      return requeueAfter === undefined ? undefined : { requeueAfter };
    };

    // 1. The Application must exist; a binding created just before its Application gets a grace period.
    if (!deps.applications.get(namespace, application)) {
      const age = ageMs(binding, now);
      if (age < ctx.applicationGracePeriodMs)
        return { requeueAfter: ctx.applicationGracePeriodMs - age + 100 };
      if (await deleteIfExists(kc, { ...Binding, namespace, name }, { uid: binding.metadata.uid })) {
        logger.info({ application }, 'binding deleted: its Application does not exist');
        await events.event(
          typed,
          'Warning',
          BindingEventReason.ApplicationNotFound,
          `binding deleted: Application '${application}' does not exist`,
        );
      }
      return undefined;
    }

    // 2. One binding per (application, environment): the earlier one wins.
    const earlier = deps.bindings
      .list(namespace)
      .filter(
        (b) =>
          b.metadata.name !== name && applicationOf(b) === application && environmentOf(b) === environment,
      )
      .find((b) => createdBefore(b, binding));
    if (earlier)
      return fail(
        BindingReason.DuplicateBinding,
        BindingMessage.duplicateBinding(application, environment, earlier.metadata.name),
      );

    // 3. The Environment must exist (its informer brings the binding back when it appears).
    const env = deps.environments.get(namespace, environment);
    // Its deployments go with it: they deployed through the Environment's cluster, which is no longer there.
    if (!env) {
      await deleteStale(binding, new Set(), logger);
      return fail(BindingReason.EnvironmentNotFound, BindingMessage.environmentNotFound(environment));
    }

    // 4. The component service's verdict on the GitOps repository: only the last entry counts.
    const repoConditions = list(status.gitopsRepoConditions).map(record);
    const lastRepoStatus =
      repoConditions.length > 0 ? text(repoConditions[repoConditions.length - 1]?.status) : undefined;
    if (lastRepoStatus === 'False')
      return fail(BindingReason.GitOpsRepoNotReady, BindingMessage.gitOpsRepoNotReady(name));
    let nextConditions: KubeCondition[] = conditions;
    if (lastRepoStatus === 'True') nextConditions = withSuccess(conditions, BindingReason.Reconciled, now);

    // 5. Nothing to generate before the component service wrote the components.
    const components = componentsOf(status);
    if (lastRepoStatus === undefined && components.length === 0) {
      await deleteStale(binding, new Set(), logger);
      return fail(BindingReason.WaitingForComponentStatus, BindingMessage.waitingForComponentStatus(name));
    }
    const duplicate = duplicateComponent(components);
    if (duplicate !== undefined)
      return fail(BindingReason.DuplicateComponents, BindingMessage.duplicateComponent(duplicate));

    // 6. Generate, delete what is stale, apply what differs (in component order).
    const destination = await destinationOf(env);
    if (typeof destination === 'string')
      return fail(BindingReason.ErrorGeneratingGitOpsDeployment, destination, GENERATION_RETRY_MS);
    const labelled: [string, string][] = [
      ['spec.application', application],
      ['spec.environment', environment],
      ...components.map((c): [string, string] => ['the component name', c.name]),
    ];
    for (const [what, value] of labelled) {
      if (!isLabelValue(value)) {
        logger.warn({ value }, 'a generated GitOpsDeployment label value would be invalid');
        return fail(
          BindingReason.ErrorGeneratingGitOpsDeployment,
          BindingMessage.invalidLabelValue(what, value),
          GENERATION_RETRY_MS,
        );
      }
    }
    const sorted = [...components].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const desiredDeployments = sorted.map((component) => ({
      component,
      desired: desiredDeployment({
        binding,
        application,
        environment,
        component,
        destination,
        shardLabels: ctx.shardLabels,
      }),
    }));
    await deleteStale(binding, new Set(desiredDeployments.map((d) => d.desired.metadata.name)), logger);
    const entries: DeploymentStatusEntry[] = [];
    const failures: string[] = [];
    for (const { component, desired } of desiredDeployments) {
      const deploymentName = desired.metadata.name;
      // Not cached: it does not exist, or it is outside this shard (someone else's), so look.
      let live =
        deps.deployments.get(namespace, deploymentName) ??
        (await getObject(kc, { ...GitOpsDeployment, namespace, name: deploymentName }));
      if (live && !controlledBy(live, binding)) {
        failures.push(
          `GitOpsDeployment ${deploymentName} already exists and is not controlled by this binding`,
        );
        continue;
      }
      if (!live || !deploymentUpToDate(live, desired, ctx.shardLabels)) {
        try {
          const before = live;
          live = await serverSideApply(kc, desired, { fieldManager: APPSTUDIO_FIELD_MANAGER, force: true });
          if (before?.metadata.resourceVersion !== live.metadata.resourceVersion)
            await events.event(
              typed,
              'Normal',
              before
                ? BindingEventReason.GitOpsDeploymentUpdated
                : BindingEventReason.GitOpsDeploymentCreated,
              `GitOpsDeployment ${deploymentName} ${before ? 'updated' : 'created'} for component ${component.name}`,
            );
        } catch (err) {
          // The API server refused what the component service wrote (e.g. an empty path): the user's to fix.
          if (err instanceof KubeApiError && err.statusCode === 422) {
            failures.push(err.message.replace(/^.*?: 422 /, ''));
            continue;
          }
          throw err;
        }
      }
      entries.push(deploymentStatusEntry(component.name, deploymentName, live));
    }
    if (failures.length > 0)
      return fail(BindingReason.ErrorGeneratingGitOpsDeployment, failures.join('; '), GENERATION_RETRY_MS);

    // 7. Status. An earlier error is cleared by a successful pass.
    if (nextConditions.some((c) => c.type === 'ErrorOccurred' && c.status === 'True'))
      nextConditions = withSuccess(nextConditions, BindingReason.Reconciled, now);
    const existingDeployed = parseConditions(status.componentDeploymentConditions);
    await writeStatus(binding, {
      gitopsDeployments: entries,
      componentDeploymentConditions: componentDeploymentConditions(existingDeployed, entries, now),
      ...(sameConditions(conditions, nextConditions) ? {} : { bindingConditions: nextConditions }),
    });
    if (conditions.some((c) => c.type === 'ErrorOccurred' && c.status === 'True'))
      await events.event(
        typed,
        'Normal',
        BindingEventReason.ErrorOccurredResolved,
        'the binding is reconciled',
      );
    return undefined;
  }

  const builder = newAppStudioController(ctx, 'appstudio-binding')
    // Our own status writes change only gitopsDeployments and the conditions we set.
    .for(deps.bindings, { type: Binding, predicates: [bindingChanged] })
    .reads(deps.environments, deps.deployments, deps.applications, deps.claims, deps.targets);
  return watchBindingSources(builder, deps).complete(quietInTerminatingNamespace(reconcile));
}
