/**
 * The informer indexes App Studio's watches map events through ("the bindings of this Environment"), so an
 * event costs a lookup instead of a scan of its namespace. Several features share one informer (the
 * bindings' is read by the binding, render and PromotionRun controllers), so each index is added to an
 * informer once, by whichever feature asks first; every lookup is a pure function of the indexed object.
 */
import { SpaceRequestLabel } from '@gitops/api';
import { type Informer, type KubeObject, namespacedIndexValue } from '@gitops/shared';
import { type BindingCr, ownerReferences, type PromotionRunCr } from './objects.ts';
import {
  type ClaimCr,
  claimNameOfEnvironment,
  claimRefOf,
  classNameOf,
  credentialsOf,
  type EnvironmentCr,
  isBindComplete,
  type TargetCr,
  targetNameOf,
} from './target-matching.ts';

/** The objects of one namespace an index holds under `value`. */
export type NamespacedLookup<T extends KubeObject = KubeObject> = (
  namespace: string | undefined,
  value: string,
) => T[];

const added = new WeakMap<object, Set<string>>();

function ensureIndex<T extends KubeObject>(
  informer: Informer<T>,
  name: string,
  values: (object: T) => readonly string[],
): void {
  const names = added.get(informer) ?? new Set<string>();
  added.set(informer, names);
  if (names.has(name)) return;
  informer.addIndexers({ [name]: values });
  names.add(name);
}

/** Indexes `informer` by `indexValue` (a name in the object's own namespace; "" = none). */
function namespacedIndex<T extends KubeObject>(
  informer: Informer<T>,
  name: string,
  indexValue: (object: T) => string,
): NamespacedLookup<T> {
  ensureIndex(informer, name, (object) => {
    const value = indexValue(object);
    return value ? [namespacedIndexValue(object.metadata.namespace, value)] : [];
  });
  return (namespace, value) => informer.byIndex(name, namespacedIndexValue(namespace, value));
}

/** Bindings or PromotionRuns by `spec.application`. */
export const byApplication = <T extends BindingCr | PromotionRunCr>(informer: Informer<T>) =>
  namespacedIndex(informer, 'appstudio.application', (o) => o.spec?.application ?? '');

/** Bindings by `spec.environment`. */
export const byEnvironment = (bindings: Informer<BindingCr>) =>
  namespacedIndex(bindings, 'appstudio.environment', (o) => o.spec.environment);

/** Environments by the DeploymentTargetClaim they name. */
export const byClaimOfEnvironment = (environments: Informer<EnvironmentCr>) =>
  namespacedIndex(environments, 'appstudio.claim', claimNameOfEnvironment);

/** Environments by the Secret of their `unstableConfigurationFields` credentials. */
export const byCredentialsSecret = (environments: Informer<EnvironmentCr>) =>
  namespacedIndex(
    environments,
    'appstudio.credentialsSecret',
    (env) => env.spec?.unstableConfigurationFields?.kubernetesCredentials?.clusterCredentialsSecret ?? '',
  );

/** Claims by `spec.targetName`. */
export const byTargetName = (claims: Informer<ClaimCr>) =>
  namespacedIndex(claims, 'appstudio.targetName', targetNameOf);

/** Claims without `spec.targetName` and not bound yet (a new target may match them), under "waiting". */
export const waitingForTarget = (claims: Informer<ClaimCr>) => {
  const lookup = namespacedIndex(claims, 'appstudio.waitingForTarget', (c) =>
    !targetNameOf(c) && !isBindComplete(c) ? 'waiting' : '',
  );
  return (namespace: string | undefined) => lookup(namespace, 'waiting');
};

/** Targets by `spec.claimRef`. */
export const byClaimRef = (targets: Informer<TargetCr>) =>
  namespacedIndex(targets, 'appstudio.claimRef', claimRefOf);

/** SpaceRequests by the claim, and by the target, their labels name (the devsandbox provisioner's). */
export const bySpaceRequestLabel = (spaceRequests: Informer<KubeObject>, label: string) =>
  namespacedIndex(
    spaceRequests,
    `appstudio.spaceRequest.${label}`,
    (sr) => sr.metadata.labels?.[label] ?? '',
  );

export const spaceRequestLabels = [SpaceRequestLabel.Claim, SpaceRequestLabel.Target] as const;

/** Targets by the Secret of their credentials. */
export const byTargetSecret = (targets: Informer<TargetCr>) =>
  namespacedIndex(targets, 'appstudio.targetSecret', (t) => credentialsOf(t).clusterCredentialsSecret);

/** Claims or targets (any namespace) by `spec.deploymentTargetClassName`. */
export function byClassName<T extends TargetCr | ClaimCr>(informer: Informer<T>): (className: string) => T[] {
  const name = 'appstudio.className';
  ensureIndex(informer, name, (o) => (classNameOf(o) ? [classNameOf(o)] : []));
  return (className) => informer.byIndex(name, className);
}

/**
 * The claims linked to `target` either way (its `spec.claimRef`, or a claim's `spec.targetName`): the
 * indexed form of `claimsOfTarget`.
 */
export function claimsOfTargetIn(claims: Informer<ClaimCr>): (target: TargetCr) => ClaimCr[] {
  const naming = byTargetName(claims);
  return (target) => {
    const { namespace } = target.metadata;
    const referenced = claimRefOf(target) ? claims.get(namespace, claimRefOf(target)) : undefined;
    const found = naming(namespace, target.metadata.name);
    return referenced && !found.includes(referenced) ? [referenced, ...found] : found;
  };
}

/** The objects of `informer` whose controller owner reference of kind `ownerKind` names the owner's uid. */
export function controlledObjects<T extends KubeObject>(
  informer: Informer<T>,
  ownerKind: string,
): (owner: KubeObject) => T[] {
  const name = `appstudio.controller.${ownerKind}`;
  ensureIndex(informer, name, (o) =>
    ownerReferences(o)
      .filter((r) => r.controller && r.kind === ownerKind && r.uid)
      .map((r) => r.uid),
  );
  return (owner) =>
    informer
      .byIndex(name, owner.metadata.uid ?? '')
      .filter((o) => o.metadata.namespace === owner.metadata.namespace);
}
