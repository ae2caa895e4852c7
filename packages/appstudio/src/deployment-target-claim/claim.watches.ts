/**
 * What wakes the DeploymentTargetClaim controller (the binder), each source mapped to claim keys through an
 * informer index:
 * - the claim itself: a relist, its spec, its deletion, its annotations, its finalizers (our own phase and
 *   condition writes do not);
 * - a target (every event): the claims linked to it (its claimRef, or a claim's targetName), and the claims of
 *   its namespace waiting without a targetName (a new target may match them);
 * - a class (every event): its claims that asked for provisioning;
 * - an Environment (every event): the claim it names (in-use protection).
 */
import {
  annotationsChanged,
  anyOf,
  type ControllerBuilder,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  type Informer,
  type KubeObject,
  objectKey,
  type Predicate,
  relist,
} from '@gitops/shared';
import { byClassName, claimsOfTargetIn, waitingForTarget } from '../indexes.ts';
import {
  type ClaimCr,
  type ClassCr,
  claimNameOfEnvironment,
  type EnvironmentCr,
  type TargetCr,
  wantsProvisioning,
} from '../target-matching.ts';

export interface ClaimWatchDeps {
  claims: Informer<ClaimCr>;
  targets: Informer<TargetCr>;
  classes: Informer<ClassCr>;
  environments: Informer<EnvironmentCr>;
}

/** Which updates of a claim need a reconcile. */
export const claimChanged: Predicate = anyOf(
  relist,
  generationChanged,
  deletionStarted,
  annotationsChanged,
  finalizersChanged,
);

/** Adds the binder's sources besides the claims themselves (`for`). */
export function watchClaimSources(
  builder: ControllerBuilder<KubeObject>,
  deps: ClaimWatchDeps,
): ControllerBuilder<KubeObject> {
  const claimsOfTarget = claimsOfTargetIn(deps.claims);
  const waiting = waitingForTarget(deps.claims);
  const claimsOfClass = byClassName(deps.claims);
  return (
    builder
      // The claims of a target, and those waiting without a targetName (a new target may match them).
      .watches<TargetCr>(deps.targets, (target) =>
        [...claimsOfTarget(target), ...waiting(target.metadata.namespace)].map(objectKey),
      )
      .watches<ClassCr>(deps.classes, (deploymentTargetClass) =>
        claimsOfClass(deploymentTargetClass.metadata.name).filter(wantsProvisioning).map(objectKey),
      )
      .watches<EnvironmentCr>(deps.environments, (env) => {
        const claimName = claimNameOfEnvironment(env);
        return claimName ? [`${env.metadata.namespace}/${claimName}`] : [];
      })
  );
}
