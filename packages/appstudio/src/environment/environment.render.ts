/**
 * The pure parts of the Environment controller (README: "Environment"): what an Environment asks for
 * (`desiredOf`, from its spec and the cached claim and targets), and whether what exists already is it
 * (`managedEnvironmentAction`, `isSecretCopyOf`). No API call.
 */
import {
  AppStudioKinds,
  AppStudioLabel,
  EnvironmentMessage,
  EnvironmentReason,
  EnvironmentTargetMessage,
} from '@gitops/api';
import { type Informer, jsonEqual, type KubeObject } from '@gitops/shared';
import { type EnvironmentCr, type Json, ownerReferences, record, specOf, strings, text } from '../objects.ts';
import {
  boundTargetOf,
  type ClaimCr,
  claimNameOfEnvironment,
  credentialsOf,
  isBound,
  type TargetCr,
} from '../target-matching.ts';
import { environmentOwnerOf } from './environment.watches.ts';

const Environment = AppStudioKinds.Environment;

/** While a claim or a Secret is missing, look again this often (their kinds are not all watched). */
export const ENVIRONMENT_RECHECK_MS = 30_000;

export interface ManagedEnvironmentSpec {
  apiURL: string;
  credentialsSecret: string;
  allowInsecureSkipTLSVerify: boolean;
  namespaces?: string[];
  clusterResources: boolean;
}

/** What the Environment asks for. */
export type Desired =
  | { kind: 'error'; reason: string; message: string; requeueAfter?: number }
  | { kind: 'wait' }
  | { kind: 'none' }
  /** `viaClaim`: the Secret is the target's, copied when it is not of the managed-environment type. */
  | { kind: 'cluster'; spec: ManagedEnvironmentSpec; viaClaim?: boolean };

/** A condition to report: the reason, the message, and when to look again (undefined: at the next event). */
export interface EnvironmentError {
  reason: string;
  message: string;
  requeueAfter?: number;
}

/** The caches `desiredOf` reads. */
export interface DesiredDeps {
  claims: Pick<Informer<ClaimCr>, 'get'>;
  targets: Pick<Informer<TargetCr>, 'list'>;
}

/** What the Environment asks for, from its spec and the cached claim and targets (no API call). */
export function desiredOf(deps: DesiredDeps, env: EnvironmentCr): Desired {
  const namespace = env.metadata.namespace ?? '';
  const claimName = claimNameOfEnvironment(env);
  const unstable = env.spec?.unstableConfigurationFields;
  if (claimName && unstable !== undefined)
    return {
      kind: 'error',
      reason: EnvironmentReason.InvalidEnvironment,
      message: EnvironmentMessage.BothTargets,
    };
  if (claimName) return desiredOfClaim(deps, namespace, claimName);
  if (unstable !== undefined) {
    const credentials = unstable.kubernetesCredentials;
    const namespaces = credentials?.namespaces ?? [];
    return {
      kind: 'cluster',
      spec: {
        apiURL: credentials?.apiURL ?? '',
        credentialsSecret: credentials?.clusterCredentialsSecret ?? '',
        allowInsecureSkipTLSVerify: credentials?.allowInsecureSkipTLSVerify === true,
        ...(namespaces.length > 0 ? { namespaces } : {}),
        clusterResources: credentials?.clusterResources === true,
      },
    };
  }
  return { kind: 'none' };
}

/** The cluster of the target bound to the claim `claimName`, or why there is none yet. */
function desiredOfClaim(deps: DesiredDeps, namespace: string, claimName: string): Desired {
  const claim = deps.claims.get(namespace, claimName);
  if (!claim)
    return {
      kind: 'error',
      reason: EnvironmentReason.DeploymentTargetClaimNotFound,
      message: EnvironmentMessage.ClaimNotFound,
      requeueAfter: ENVIRONMENT_RECHECK_MS,
    };
  if (!isBound(claim)) return { kind: 'wait' };
  const bound = boundTargetOf(claim, deps.targets.list(namespace));
  if (bound.kind !== 'found')
    return {
      kind: 'error',
      reason: EnvironmentReason.DeploymentTargetNotFound,
      message:
        bound.kind === 'missing'
          ? EnvironmentTargetMessage.Missing
          : bound.kind === 'error'
            ? EnvironmentTargetMessage.Unreadable
            : EnvironmentTargetMessage.NotFound,
    };
  const target = credentialsOf(bound.target);
  return {
    kind: 'cluster',
    viaClaim: true,
    spec: {
      apiURL: target.apiURL,
      credentialsSecret: target.clusterCredentialsSecret,
      allowInsecureSkipTLSVerify: target.allowInsecureSkipTLSVerify,
      ...(target.defaultNamespace ? { namespaces: [target.defaultNamespace] } : {}),
      clusterResources: false,
    },
  };
}

/** Whether `existing` is the copy of `data` made for the Environment `env` (nothing to write). */
export function isSecretCopyOf(existing: KubeObject | undefined, env: KubeObject, data: Json): boolean {
  return (
    existing !== undefined &&
    jsonEqual(record(existing.data), data) &&
    existing.metadata.labels?.[AppStudioLabel.EnvironmentSecret] === env.metadata.name
  );
}

/**
 * What to do with the cached ManagedEnvironment `existing` of `env`: leave it ('foreign': an object of that
 * name another object controls), nothing ('unchanged': our spec and controller ownerReference), or apply.
 */
export function managedEnvironmentAction(
  existing: KubeObject | undefined,
  env: EnvironmentCr,
  spec: ManagedEnvironmentSpec,
): 'foreign' | 'unchanged' | 'apply' {
  if (!existing) return 'apply';
  const controller = ownerReferences(existing).find((r) => r.controller);
  if (controller && environmentOwnerOf(existing) !== env.metadata.name) return 'foreign';
  if (
    jsonEqual(normalisedSpec(specOf(existing)), normalisedSpec(spec as unknown as Json)) &&
    hasOurOwnerReference(existing, env)
  )
    return 'unchanged';
  return 'apply';
}

function hasOurOwnerReference(existing: KubeObject, env: KubeObject): boolean {
  return ownerReferences(existing).some(
    (r) =>
      r.apiVersion === Environment.apiVersion &&
      r.kind === Environment.kind &&
      r.uid === env.metadata.uid &&
      r.controller,
  );
}

/** The ManagedEnvironment spec fields we set, with absent and empty treated alike. */
function normalisedSpec(spec: Json): Json {
  return {
    apiURL: text(spec.apiURL),
    credentialsSecret: text(spec.credentialsSecret),
    allowInsecureSkipTLSVerify: spec.allowInsecureSkipTLSVerify === true,
    namespaces: strings(spec.namespaces),
    clusterResources: spec.clusterResources === true,
  };
}
