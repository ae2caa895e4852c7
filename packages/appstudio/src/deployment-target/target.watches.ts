/**
 * What wakes the DeploymentTarget controller (the reclaimer), each source mapped to target keys through an
 * informer index:
 * - the target itself: a relist, its spec, its deletion, its finalizers (our own phase and condition writes
 *   do not);
 * - a class (every event): its targets;
 * - a claim deleted: the target it names and the targets claiming it (a claimRef may need clearing; the
 *   original waited for the next target event);
 * - with the devsandbox provisioner, a SpaceRequest (every event): the target it belongs to.
 */
import {
  anyOf,
  type ControllerBuilder,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  type Informer,
  ignoreCreates,
  ignoreUpdates,
  type KubeObject,
  objectKey,
  type Predicate,
  relist,
} from '@gitops/shared';
import { byClaimRef, byClassName } from '../indexes.ts';
import { targetKeysOfSpaceRequest } from '../provisioners/devsandbox.watches.ts';
import { type ClaimCr, type ClassCr, type TargetCr, targetNameOf } from '../target-matching.ts';

export interface TargetWatchDeps {
  targets: Informer<TargetCr>;
  claims: Informer<ClaimCr>;
  classes: Informer<ClassCr>;
  /** The devsandbox provisioner's SpaceRequests (when it runs): they wake the target they belong to. */
  spaceRequests?: Informer<KubeObject>;
}

/** Which updates of a target need a reconcile. */
export const targetChanged: Predicate = anyOf(relist, generationChanged, deletionStarted, finalizersChanged);

/** Adds the reclaimer's sources besides the targets themselves (`for`). */
export function watchTargetSources(
  builder: ControllerBuilder<KubeObject>,
  deps: TargetWatchDeps,
): ControllerBuilder<KubeObject> {
  const targetsOfClass = byClassName(deps.targets);
  const targetsClaiming = byClaimRef(deps.targets);
  const watching = builder
    .watches<ClassCr>(deps.classes, (deploymentTargetClass) =>
      targetsOfClass(deploymentTargetClass.metadata.name).map(objectKey),
    )
    // A claim deleted: its target's claimRef may need clearing (the original waited for the next target event).
    .watches<ClaimCr>(
      deps.claims,
      (claim) => {
        const { namespace, name } = claim.metadata;
        const named = deps.targets.get(namespace, targetNameOf(claim));
        const claiming = targetsClaiming(namespace, name);
        return [...(named && !claiming.includes(named) ? [named] : []), ...claiming].map(objectKey);
      },
      { predicates: [ignoreCreates, ignoreUpdates] },
    );
  const { spaceRequests } = deps;
  return spaceRequests
    ? watching.watches(spaceRequests, (sr) => targetKeysOfSpaceRequest(sr, deps.targets))
    : watching;
}
