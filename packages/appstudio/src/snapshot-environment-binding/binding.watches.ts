/**
 * What wakes the SnapshotEnvironmentBinding controller, each source mapped to binding keys through an
 * informer index:
 * - the binding itself: a relist, its spec, its deletion, its labels, and the status fields other writers
 *   set (`components`, `gitopsRepoConditions`); our own status writes (`gitopsDeployments`, conditions) do not;
 * - the GitOpsDeployments it controls (every event);
 * - its Environment: created, deleted, its spec, a relist;
 * - its Application: created or deleted;
 * - another binding of the same application and environment created or deleted (which of two is the earlier);
 * - the claim of its Environment (every event) and that claim's target (created, deleted, its spec): the
 *   deployments' default namespace follows them.
 */
import {
  anyOf,
  type ControllerBuilder,
  deletionStarted,
  generationChanged,
  type Informer,
  ignoreUpdates,
  type KubeObject,
  labelsChanged,
  objectKey,
  type Predicate,
  relist,
  statusFieldsChanged,
} from '@gitops/shared';
import { byApplication, byClaimOfEnvironment, byEnvironment, claimsOfTargetIn } from '../indexes.ts';
import { applicationOf, type BindingCr, environmentOf } from '../objects.ts';
import type { ClaimCr, EnvironmentCr, TargetCr } from '../target-matching.ts';

export interface BindingWatchDeps {
  bindings: Informer<BindingCr>;
  environments: Informer<EnvironmentCr>;
  deployments: Informer<KubeObject>;
  applications: Informer<KubeObject>;
  claims: Informer<ClaimCr>;
  targets: Informer<TargetCr>;
}

/** Which updates of a binding need a reconcile. */
export const bindingChanged: Predicate = anyOf(
  relist,
  generationChanged,
  deletionStarted,
  labelsChanged,
  statusFieldsChanged('components', 'gitopsRepoConditions'),
);

/** Adds the binding controller's sources besides the bindings themselves (`for`). */
export function watchBindingSources(
  builder: ControllerBuilder<KubeObject>,
  deps: BindingWatchDeps,
): ControllerBuilder<KubeObject> {
  const bindingsOfApplication = byApplication(deps.bindings);
  const bindingsOfEnvironment = byEnvironment(deps.bindings);
  const environmentsOfClaim = byClaimOfEnvironment(deps.environments);
  const claimsOfTarget = claimsOfTargetIn(deps.claims);
  const keysOfEnvironment = (namespace: string | undefined, environment: string) =>
    bindingsOfEnvironment(namespace, environment).map(objectKey);
  const keysOfClaim = (claim: KubeObject) =>
    environmentsOfClaim(claim.metadata.namespace, claim.metadata.name).flatMap((env) =>
      keysOfEnvironment(env.metadata.namespace, env.metadata.name),
    );
  return builder
    .owns(deps.deployments)
    .watches(deps.environments, (env) => keysOfEnvironment(env.metadata.namespace, env.metadata.name), {
      predicates: [anyOf(relist, generationChanged)],
    })
    .watches(
      deps.applications,
      (app) => bindingsOfApplication(app.metadata.namespace, app.metadata.name).map(objectKey),
      { predicates: [ignoreUpdates] },
    )
    .watches(
      deps.bindings,
      (binding) =>
        bindingsOfApplication(binding.metadata.namespace, applicationOf(binding))
          .filter(
            (b) => b.metadata.name !== binding.metadata.name && environmentOf(b) === environmentOf(binding),
          )
          .map(objectKey),
      { predicates: [ignoreUpdates] },
    )
    .watches(deps.claims, keysOfClaim)
    .watches<TargetCr>(deps.targets, (target) => claimsOfTarget(target).flatMap(keysOfClaim), {
      predicates: [generationChanged],
    });
}
