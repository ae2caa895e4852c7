/**
 * What wakes the devsandbox provisioner's SpaceRequest controller, and what its SpaceRequests wake elsewhere:
 * - a SpaceRequest itself (every event);
 * - a claim deleted: the SpaceRequests labelled with it (each may be an orphan now);
 * - for the reclaimer (`deployment-target/target.watches.ts`): a SpaceRequest wakes the target it belongs to
 *   (`targetKeysOfSpaceRequest`).
 */
import { SPACE_REQUEST_TIER, SpaceRequestLabel } from '@gitops/api';
import {
  type ControllerBuilder,
  type Informer,
  ignoreCreates,
  ignoreUpdates,
  type KubeObject,
  objectKey,
} from '@gitops/shared';
import { byClaimRef, bySpaceRequestLabel, type spaceRequestLabels } from '../indexes.ts';
import { specOf, text } from '../objects.ts';
import type { ClaimCr, ClassCr, TargetCr } from '../target-matching.ts';

export interface DevSandboxWatchDeps {
  spaceRequests: Informer<KubeObject>;
  claims: Informer<ClaimCr>;
  targets: Informer<TargetCr>;
  classes: Informer<ClassCr>;
}

/** The SpaceRequests of this provisioner's tier in `namespace` whose label `label` is `value`. */
export type SpaceRequestsOf = (
  namespace: string | undefined,
  label: (typeof spaceRequestLabels)[number],
  value: string,
) => KubeObject[];

/** The lookup of SpaceRequests of the provisioner's tier by their claim or target label (an informer index). */
export function spaceRequestsByLabel(spaceRequests: Informer<KubeObject>): SpaceRequestsOf {
  const byLabel = {
    [SpaceRequestLabel.Claim]: bySpaceRequestLabel(spaceRequests, SpaceRequestLabel.Claim),
    [SpaceRequestLabel.Target]: bySpaceRequestLabel(spaceRequests, SpaceRequestLabel.Target),
  };
  return (namespace, label, value) =>
    byLabel[label](namespace, value).filter((sr) => text(specOf(sr).tierName) === SPACE_REQUEST_TIER);
}

/** Adds the SpaceRequest controller's sources besides the SpaceRequests themselves (`for`). */
export function watchDevSandboxSources(
  builder: ControllerBuilder<KubeObject>,
  deps: DevSandboxWatchDeps,
): ControllerBuilder<KubeObject> {
  const ofClaim = bySpaceRequestLabel(deps.spaceRequests, SpaceRequestLabel.Claim);
  return (
    builder
      // A claim deleted: its SpaceRequest may be an orphan now.
      .watches<ClaimCr>(
        deps.claims,
        (claim) => ofClaim(claim.metadata.namespace, claim.metadata.name).map(objectKey),
        { predicates: [ignoreCreates, ignoreUpdates] },
      )
      .reads(deps.targets, deps.classes)
  );
}

/** SpaceRequest events → the target they belong to (label dt, else the target claiming the labelled claim). */
export function targetKeysOfSpaceRequest(sr: KubeObject, targets: Informer<TargetCr>): string[] {
  const namespace = sr.metadata.namespace;
  const labelled = sr.metadata.labels?.[SpaceRequestLabel.Target];
  const claim = sr.metadata.labels?.[SpaceRequestLabel.Claim];
  const found = new Set<KubeObject>(claim ? byClaimRef(targets)(namespace, claim) : []);
  const named = labelled ? targets.get(namespace, labelled) : undefined;
  if (named) found.add(named);
  return [...found].map(objectKey);
}
