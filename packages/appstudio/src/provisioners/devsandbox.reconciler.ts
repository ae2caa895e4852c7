/**
 * The devsandbox provisioner's steps (README: "Provisioners"), each over a `deps` object:
 * - `provisionSpaceRequest` (the binder asks, for a Pending claim of a devsandbox class): a SpaceRequest
 *   (tier `appstudio-env`, label `appstudio.openshift.io/dtc=<claim>`) unless the claim has one;
 * - `reconcileSpaceRequest` (a SpaceRequest event): a SpaceRequest whose claim is gone is deleted when the
 *   class says Delete (`cleanUpOrphan`); once it is Ready with one namespaceAccess entry, the DeploymentTarget
 *   `<claim>-dt` is created from its status (Available, claimRef = the claim: `createTarget`) and the
 *   SpaceRequest labelled `appstudio.openshift.io/dt=<target>`;
 * - `deprovisionSpaceRequest` (the reclaimer asks, for a target being deleted under Delete): the SpaceRequest
 *   is deleted (with the host operator's finalizer, so it lingers while the host operator cleans up); done
 *   when it is gone; `Failed` once the host operator reports UnableToTerminate more than 2 minutes after the
 *   delete (`deprovisionWait`).
 */
import {
  AppStudioKinds,
  DeploymentTargetAnnotation,
  DeploymentTargetFinalizer,
  DeploymentTargetMessage,
  DeploymentTargetPhase,
  Provisioner as ProvisionerName,
  ReclaimPolicy,
  SPACE_REQUEST_TIER,
  SpaceRequestLabel,
} from '@gitops/api';
import {
  deleteIfExists,
  getObject,
  type Informer,
  type KubeObject,
  kindParser,
  type Logger,
  type ReconcileResult,
  type Reconciler,
  refOfKind,
  splitObjectKey,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import { againOnConflict, type StepContext, stepContext } from '../controller.ts';
import type { NamespacedLookup } from '../indexes.ts';
import { type Json, list, record, specOf, statusOf, text } from '../objects.ts';
import {
  annotationOf,
  type ClaimCr,
  type ClassCr,
  claimRefOf,
  classNameOf,
  phaseOf,
  type TargetCr,
} from '../target-matching.ts';
import { addFinalizer, createObject, mergePatch, setPhase } from '../writes.ts';
import type { SpaceRequestsOf } from './devsandbox.watches.ts';
import { DEPROVISION_TIMEOUT_MS, type Deprovisioned, provisionedTargetLabels } from './provisioner.ts';

const SpaceRequest = AppStudioKinds.SpaceRequest;
const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;

/** On a SpaceRequest we create: the class it was made for (its reclaim policy decides orphan cleanup). */
const CLASS_ANNOTATION = 'appstudio.openshift.io/dtclass';
/** The host operator's reasons on the Ready condition. */
const UNABLE_TO_TERMINATE = 'UnableToTerminate';
const RECHECK_MS = 30_000;

export const provisionedTargetName = (claim: string): string => `${claim}-dt`;

/** What the steps use: the context's client, clock and shard labels, the caches and lookups they read. */
export interface DevSandboxDeps extends Pick<StepContext, 'kc' | 'now' | 'shardLabels'> {
  spaceRequests: Pick<Informer<KubeObject>, 'get'>;
  /** The SpaceRequests of the provisioner's tier by their claim or target label. */
  spaceRequestsOf: SpaceRequestsOf;
  targets: Pick<Informer<TargetCr>, 'get'>;
  targetsByClaimRef: NamespacedLookup<TargetCr>;
  classes: Pick<Informer<ClassCr>, 'list'>;
  /** DEV_ONLY_IGNORE_SELFSIGNED_CERT_IN_DEPLOYMENT_TARGET: provisioned targets skip TLS verification. */
  allowInsecureSkipTLSVerify?: boolean;
}

/** A SpaceRequest for the claim, unless it has one. */
export async function provisionSpaceRequest(
  deps: Pick<DevSandboxDeps, 'kc' | 'shardLabels' | 'spaceRequestsOf'>,
  claim: ClaimCr,
  deploymentTargetClass: ClassCr,
  logger: Logger,
): Promise<string | undefined> {
  const namespace = claim.metadata.namespace ?? '';
  if (deps.spaceRequestsOf(namespace, SpaceRequestLabel.Claim, claim.metadata.name).length > 0)
    return undefined;
  await createObject(deps.kc, SpaceRequest, namespace, {
    metadata: {
      generateName: `${claim.metadata.name}-`,
      labels: { ...deps.shardLabels, [SpaceRequestLabel.Claim]: claim.metadata.name },
      annotations: { [CLASS_ANNOTATION]: deploymentTargetClass.metadata.name },
    },
    spec: { tierName: SPACE_REQUEST_TIER, targetClusterRoles: [] },
  });
  logger.info('SpaceRequest created for the claim');
  return undefined;
}

/** The SpaceRequest's Ready condition, if it has one. */
export function readyCondition(sr: KubeObject): Json | undefined {
  return list(statusOf(sr).conditions)
    .map(record)
    .find((c) => c.type === 'Ready');
}

/** The SpaceRequest of a target: labelled with the target, else with its claim. */
export function spaceRequestOf(
  deps: Pick<DevSandboxDeps, 'spaceRequestsOf'>,
  target: TargetCr,
): KubeObject | undefined {
  const namespace = target.metadata.namespace;
  return (
    deps.spaceRequestsOf(namespace, SpaceRequestLabel.Target, target.metadata.name)[0] ??
    (claimRefOf(target)
      ? deps.spaceRequestsOf(namespace, SpaceRequestLabel.Claim, claimRefOf(target))[0]
      : undefined)
  );
}

/**
 * A deleted SpaceRequest still there: `failed` once the target is Failed, or when the host operator reports
 * UnableToTerminate more than 2 minutes after the delete; else `waiting`.
 */
export function deprovisionWait(sr: KubeObject, target: TargetCr, now: Date): Deprovisioned {
  if (phaseOf(target) === DeploymentTargetPhase.Failed) return { kind: 'failed', requeueAfter: RECHECK_MS };
  const since = now.getTime() - Date.parse(sr.metadata.deletionTimestamp ?? '');
  if (since > DEPROVISION_TIMEOUT_MS && readyCondition(sr)?.reason === UNABLE_TO_TERMINATE)
    return { kind: 'failed', requeueAfter: RECHECK_MS };
  return { kind: 'waiting', requeueAfter: RECHECK_MS };
}

/** Deletes the target's SpaceRequest (with our finalizer on it); `gone` once it is. */
export async function deprovisionSpaceRequest(
  deps: Pick<DevSandboxDeps, 'kc' | 'now' | 'spaceRequestsOf'>,
  target: TargetCr,
): Promise<Deprovisioned> {
  let sr = spaceRequestOf(deps, target);
  if (!sr) return { kind: 'gone' };
  sr = await addFinalizer(deps.kc, SpaceRequest, sr, DeploymentTargetFinalizer.SpaceRequest);
  if (!readyCondition(sr))
    return { kind: 'error', message: DeploymentTargetMessage.spaceRequestNotReady(sr.metadata.name) };
  if (!sr.metadata.deletionTimestamp) {
    await deleteIfExists(deps.kc, refOfKind(SpaceRequest, sr), { uid: sr.metadata.uid });
    return { kind: 'waiting', requeueAfter: RECHECK_MS };
  }
  return deprovisionWait(sr, target, deps.now());
}

/** Whether an orphan SpaceRequest goes: every devsandbox class it may come from says Delete (and there is one). */
export function orphanIsDeleted(sr: KubeObject, classes: readonly ClassCr[]): boolean {
  const className = annotationOf(sr, CLASS_ANNOTATION);
  const candidates = classes.filter(
    (c) =>
      text(specOf(c).provisioner) === ProvisionerName.DevSandbox &&
      (className === undefined || c.metadata.name === className),
  );
  return (
    candidates.length > 0 && candidates.every((c) => text(specOf(c).reclaimPolicy) === ReclaimPolicy.Delete)
  );
}

/** A SpaceRequest whose claim is gone: deleted when every devsandbox class it may come from says Delete. */
export async function cleanUpOrphan(
  deps: Pick<DevSandboxDeps, 'kc' | 'classes'>,
  sr: KubeObject,
  claimName: string,
  logger: Logger,
): Promise<void> {
  if (orphanIsDeleted(sr, deps.classes.list())) {
    await deleteIfExists(deps.kc, refOfKind(SpaceRequest, sr), { uid: sr.metadata.uid });
    logger.info({ claim: claimName }, 'SpaceRequest of a claim that is gone deleted (reclaim policy Delete)');
  } else {
    logger.warn(
      { claim: claimName },
      'SpaceRequest of a claim that is gone kept: no devsandbox class says Delete',
    );
  }
}

/** The DeploymentTarget of a claim, from its Ready SpaceRequest's namespace access; Available at once. */
export async function createTarget(
  deps: Pick<DevSandboxDeps, 'kc' | 'shardLabels' | 'allowInsecureSkipTLSVerify'>,
  claim: ClaimCr,
  sr: KubeObject,
  access: Json,
): Promise<TargetCr> {
  const namespace = sr.metadata.namespace ?? '';
  const claimName = claim.metadata.name;
  const target = await createObject<TargetCr>(deps.kc, Target, namespace, {
    metadata: {
      name: provisionedTargetName(claimName),
      labels: provisionedTargetLabels(deps.shardLabels, claim),
      annotations: { [DeploymentTargetAnnotation.ProvisionedBy]: ProvisionerName.DevSandbox },
    },
    spec: {
      deploymentTargetClassName: classNameOf(claim),
      kubernetesCredentials: {
        defaultNamespace: text(access.name),
        apiURL: text(statusOf(sr).targetClusterURL),
        clusterCredentialsSecret: text(access.secretRef),
        allowInsecureSkipTLSVerify: deps.allowInsecureSkipTLSVerify === true,
      },
      claimRef: claimName,
    },
  });
  await setPhase(deps.kc, Target, target, DeploymentTargetPhase.Available);
  return target;
}

/**
 * The namespace access of a SpaceRequest ready for a target: Ready and exactly one entry; 'unsupported' for
 * more than one entry; undefined while not ready.
 */
export function readyAccessOf(sr: KubeObject): Json | 'unsupported' | undefined {
  const access = list(statusOf(sr).namespaceAccess).map(record);
  if (access.length > 1) return 'unsupported';
  if (readyCondition(sr)?.status !== 'True' || access.length === 0) return undefined;
  return access[0];
}

/** A SpaceRequest event: orphan cleanup, then the target from a Ready SpaceRequest. */
export async function reconcileSpaceRequest(
  deps: DevSandboxDeps,
  key: string,
  logger: Logger,
): Promise<ReconcileResult | undefined> {
  const { namespace = '', name } = splitObjectKey(key);
  const sr = deps.spaceRequests.get(namespace, name);
  if (!sr || sr.metadata.deletionTimestamp) return undefined;
  const claimName = sr.metadata.labels?.[SpaceRequestLabel.Claim];
  if (!claimName) return undefined;
  const claim = await getObject(
    deps.kc,
    { ...Claim, namespace, name: claimName },
    { parse: kindParser<ClaimCr>(Claim) },
  );
  if (!claim) {
    await cleanUpOrphan(deps, sr, claimName, logger);
    return undefined;
  }
  const access = readyAccessOf(sr);
  if (access === 'unsupported') {
    logger.warn('SpaceRequest with more than one namespaceAccess entry: not supported');
    return undefined;
  }
  if (!access) return undefined;
  const labelled = sr.metadata.labels?.[SpaceRequestLabel.Target];
  let target =
    (labelled ? deps.targets.get(namespace, labelled) : undefined) ??
    deps.targetsByClaimRef(namespace, claimName)[0];
  if (!target) {
    target = await createTarget(deps, claim, sr, access);
    logger.info({ target: target.metadata.name }, 'DeploymentTarget created from the Ready SpaceRequest');
  }
  if (labelled !== target.metadata.name)
    await mergePatch(deps.kc, SpaceRequest, sr, {
      metadata: { labels: { [SpaceRequestLabel.Target]: target.metadata.name } },
    });
  return undefined;
}

/** The SpaceRequest reconciler over `deps`; a conflict is tried again at once. */
export function createSpaceRequestReconciler(deps: DevSandboxDeps): Reconciler {
  return (key, { logger }) => againOnConflict(() => reconcileSpaceRequest(deps, key, logger));
}

/** The steps' deps from the context and the provisioner's informers. */
export function devSandboxDeps(
  ctx: AppStudioContext,
  caches: Pick<
    DevSandboxDeps,
    'spaceRequests' | 'spaceRequestsOf' | 'targets' | 'targetsByClaimRef' | 'classes'
  >,
  allowInsecureSkipTLSVerify?: boolean,
): DevSandboxDeps {
  return { ...stepContext(ctx), ...caches, allowInsecureSkipTLSVerify };
}
