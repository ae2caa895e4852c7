/**
 * What wakes the Environment controller, each source mapped to Environment keys through an informer index:
 * - the Environment itself: a relist, its spec, its deletion (our own status writes do not);
 * - its ManagedEnvironment (controller ownerReference or the legacy form): created, deleted, its spec, a relist;
 * - a Secret it may be built from (managed-environment or Opaque type; every event): named by its
 *   credentials, by a target bound to its claim, or labelled as the copy made for it;
 * - the claim it names (every event);
 * - a target of that claim (its claimRef, or the claim's targetName): created, deleted, its spec, a relist.
 */
import { AppStudioKinds, AppStudioLabel, LEGACY_ENVIRONMENT_OWNER_API_VERSION } from '@gitops/api';
import {
  anyOf,
  type ControllerBuilder,
  deletionStarted,
  generationChanged,
  type Informer,
  type KubeObject,
  objectKey,
  type Predicate,
  relist,
} from '@gitops/shared';
import { byClaimOfEnvironment, byCredentialsSecret, byTargetSecret, claimsOfTargetIn } from '../indexes.ts';
import { type EnvironmentCr, ownerReferences } from '../objects.ts';
import type { ClaimCr, TargetCr } from '../target-matching.ts';

const Environment = AppStudioKinds.Environment;

export interface EnvironmentWatchDeps {
  environments: Informer<EnvironmentCr>;
  managedEnvironments: Informer<KubeObject>;
  /** Secrets of type managed-gitops.redhat.com/managed-environment (all namespaces). */
  secrets: Informer<KubeObject>;
  /** Opaque Secrets (all namespaces): a target's Secret made by a SpaceRequest is one. */
  opaqueSecrets: Informer<KubeObject>;
  claims: Informer<ClaimCr>;
  targets: Informer<TargetCr>;
}

/** Which updates of an Environment need a reconcile: our own status writes change only status. */
export const environmentChanged: Predicate = anyOf(relist, generationChanged, deletionStarted);

/** The Environment a ManagedEnvironment belongs to: a controller ownerReference, or the original's legacy form. */
export function environmentOwnerOf(managedEnvironment: KubeObject): string | undefined {
  for (const ref of ownerReferences(managedEnvironment)) {
    if (ref.kind !== Environment.kind) continue;
    if (ref.apiVersion === Environment.apiVersion || ref.apiVersion === LEGACY_ENVIRONMENT_OWNER_API_VERSION)
      return ref.name;
  }
  return undefined;
}

/** Adds the Environment controller's sources besides the Environments themselves (`for`). */
export function watchEnvironmentSources(
  builder: ControllerBuilder<KubeObject>,
  deps: EnvironmentWatchDeps,
): ControllerBuilder<KubeObject> {
  const environmentsOfClaim = byClaimOfEnvironment(deps.environments);
  const environmentsWithSecret = byCredentialsSecret(deps.environments);
  const targetsWithSecret = byTargetSecret(deps.targets);
  const claimsOfTarget = claimsOfTargetIn(deps.claims);
  const environmentsOfTarget = (target: TargetCr) =>
    claimsOfTarget(target).flatMap((claim) =>
      environmentsOfClaim(claim.metadata.namespace, claim.metadata.name),
    );
  /**
   * The Environments a Secret may be built into: named by their credentials, by a target bound to their
   * claim, or by the Secret's environment label (a copy of a target's Secret).
   */
  const environmentsOfSecret = (secret: KubeObject) => {
    const { namespace, name, labels } = secret.metadata;
    const labelled = labels?.[AppStudioLabel.EnvironmentSecret];
    const copiedFor = labelled ? deps.environments.get(namespace, labelled) : undefined;
    return [
      ...environmentsWithSecret(namespace, name),
      ...targetsWithSecret(namespace, name).flatMap(environmentsOfTarget),
      ...(copiedFor ? [copiedFor] : []),
    ].map(objectKey);
  };
  const specOrRelist = { predicates: [anyOf(relist, generationChanged)] };
  return builder
    .watches(
      deps.managedEnvironments,
      (me) => {
        const owner = environmentOwnerOf(me);
        return owner ? [`${me.metadata.namespace}/${owner}`] : [];
      },
      specOrRelist,
    )
    .watches(deps.secrets, environmentsOfSecret)
    .watches(deps.opaqueSecrets, environmentsOfSecret)
    .watches(deps.claims, (claim) =>
      environmentsOfClaim(claim.metadata.namespace, claim.metadata.name).map(objectKey),
    )
    .watches<TargetCr>(deps.targets, (target) => environmentsOfTarget(target).map(objectKey), specOrRelist);
}
