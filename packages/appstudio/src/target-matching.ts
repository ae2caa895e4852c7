/**
 * DeploymentTargets and DeploymentTargetClaims as plain data: accessors, the original's matching rules with
 * their exact messages (README: "DeploymentTarget, DeploymentTargetClaim, DeploymentTargetClass"), the bound
 * target of a claim, and deterministic auto-matching. Pure functions over objects from the informers; the
 * binder, the reclaimer, the provisioners, the Environment and the binding controllers all use them.
 */
import {
  DeploymentTargetAnnotation,
  DeploymentTargetClaimPhase,
  DeploymentTargetMessage,
  DeploymentTargetPhase,
} from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import type { ClaimCr, ClassCr, EnvironmentCr, TargetCr } from './objects.ts';

export type { ClaimCr, ClassCr, EnvironmentCr, TargetCr };

export interface TargetCredentials {
  apiURL: string;
  clusterCredentialsSecret: string;
  allowInsecureSkipTLSVerify: boolean;
  defaultNamespace: string;
}

export const claimRefOf = (target: TargetCr): string => target.spec.claimRef ?? '';
export const targetNameOf = (claim: ClaimCr): string => claim.spec.targetName ?? '';
export const classNameOf = (object: TargetCr | ClaimCr): string => object.spec.deploymentTargetClassName;
export const phaseOf = (object: TargetCr | ClaimCr): string => object.status?.phase ?? '';
export const annotationOf = (object: KubeObject, key: string): string | undefined =>
  object.metadata.annotations?.[key];
export const isBound = (claim: ClaimCr): boolean => phaseOf(claim) === DeploymentTargetClaimPhase.Bound;
export const isBindComplete = (claim: ClaimCr): boolean =>
  annotationOf(claim, DeploymentTargetAnnotation.BindComplete) === 'true';
/** A claim marked for dynamic provisioning (it carries the dt-provisioner annotation). */
export const wantsProvisioning = (claim: ClaimCr): boolean =>
  annotationOf(claim, DeploymentTargetAnnotation.DTProvisioner) !== undefined;

export function credentialsOf(target: TargetCr): TargetCredentials {
  const { apiURL, clusterCredentialsSecret, allowInsecureSkipTLSVerify, defaultNamespace } =
    target.spec.kubernetesCredentials;
  return { apiURL, clusterCredentialsSecret, allowInsecureSkipTLSVerify, defaultNamespace };
}

/** The claim an Environment names ("" = none). */
export function claimNameOfEnvironment(env: EnvironmentCr): string {
  return env.spec?.configuration?.target?.deploymentTargetClaim.claimName ?? '';
}

/** The original's binding-conflict check; the full message, or undefined when there is no conflict. */
export function bindingConflict(claim: ClaimCr, target: TargetCr): string | undefined {
  const claimName = claim.metadata.name;
  const targetName = targetNameOf(claim);
  const claimRef = claimRefOf(target);
  const fail = (reason: string) =>
    DeploymentTargetMessage.bindingConflict(claimName, targetName, target.metadata.name, claimRef, reason);
  if ((targetName === target.metadata.name || targetName === '') && claimRef !== '' && claimRef !== claimName)
    return fail(DeploymentTargetMessage.ConflictClaimRef);
  if ((claimRef === claimName || claimRef === '') && targetName !== '' && targetName !== target.metadata.name)
    return fail(DeploymentTargetMessage.ConflictTargetClaimed);
  return undefined;
}

/** The original's "does this target match this claim", in its order; the full message, or undefined. */
export function targetMismatch(target: TargetCr, claim: ClaimCr): string | undefined {
  const fail = (reason: string) =>
    DeploymentTargetMessage.doesNotMatch(
      target.metadata.name,
      claim.metadata.name,
      claim.metadata.namespace ?? '',
      reason,
    );
  const claimRef = claimRefOf(target);
  if (claimRef !== '' && claimRef !== claim.metadata.name)
    return fail(DeploymentTargetMessage.ClaimRefToAnother);
  if (classNameOf(target) !== classNameOf(claim)) return fail(DeploymentTargetMessage.ClassMismatch);
  const phase = phaseOf(target);
  if (phase !== '' && phase !== DeploymentTargetPhase.Available)
    return fail(DeploymentTargetMessage.NotAvailable);
  const c = credentialsOf(target);
  if (!c.apiURL && !c.clusterCredentialsSecret && !c.defaultNamespace && !c.allowInsecureSkipTLSVerify)
    return fail(DeploymentTargetMessage.NoCredentials);
  const conflict = bindingConflict(claim, target);
  return conflict ? fail(conflict) : undefined;
}

export type BoundTarget =
  | { kind: 'found'; target: TargetCr }
  | { kind: 'none' }
  /** `spec.targetName` names a target that does not exist. */
  | { kind: 'missing' }
  /** Several targets claim it, or the named one conflicts: the message says which. */
  | { kind: 'error'; message: string };

/**
 * The target bound to `claim` among `targets` (its namespace's): the one `spec.targetName` names (checked
 * for conflicts), else the single target whose `spec.claimRef` names the claim.
 */
export function boundTargetOf(claim: ClaimCr, targets: readonly TargetCr[]): BoundTarget {
  const targetName = targetNameOf(claim);
  if (targetName) {
    const target = targets.find((t) => t.metadata.name === targetName);
    if (!target) return { kind: 'missing' };
    const conflict = bindingConflict(claim, target);
    return conflict ? { kind: 'error', message: conflict } : { kind: 'found', target };
  }
  const claiming = targets.filter((t) => claimRefOf(t) === claim.metadata.name);
  if (claiming.length === 0) return { kind: 'none' };
  if (claiming.length > 1)
    return { kind: 'error', message: DeploymentTargetMessage.multipleTargets(claim.metadata.name) };
  return { kind: 'found', target: claiming[0] as TargetCr };
}

/** Oldest first, then by name: the order auto-matching tries targets in (appstudio README promise 6: deterministic). */
function byAge(a: KubeObject, b: KubeObject): number {
  const ta = Date.parse(String(a.metadata.creationTimestamp ?? '')) || 0;
  const tb = Date.parse(String(b.metadata.creationTimestamp ?? '')) || 0;
  return ta - tb || a.metadata.name.localeCompare(b.metadata.name);
}

/**
 * The target a claim without `spec.targetName` binds to: a matching target that already names the claim,
 * else the oldest matching target. A claim waiting for dynamic provisioning takes only targets naming it.
 * Targets being deleted are never chosen.
 */
export function autoMatch(claim: ClaimCr, targets: readonly TargetCr[]): TargetCr | undefined {
  const candidates = targets
    .filter((t) => !t.metadata.deletionTimestamp && targetMismatch(t, claim) === undefined)
    .sort(byAge);
  const naming = candidates.find((t) => claimRefOf(t) === claim.metadata.name);
  if (naming || wantsProvisioning(claim)) return naming;
  return candidates[0];
}

/** The claims linked to a target, either way (`dt.spec.claimRef`, or a claim's `spec.targetName`). */
export function claimsOfTarget(target: TargetCr, claims: readonly ClaimCr[]): ClaimCr[] {
  const claimRef = claimRefOf(target);
  return claims.filter((c) => c.metadata.name === claimRef || targetNameOf(c) === target.metadata.name);
}
