/**
 * The reclaimer's reconcile as named steps (README: "DeploymentTarget"), for one target:
 * - finalizer `dt.appstudio.redhat.com/finalizer`;
 * - `reclaimOf`: its class does not exist: `Success` (as the original), and on delete the finalizer goes (the
 *   original left such a target stuck); a reclaim policy other than Delete or Retain: a condition;
 * - not being deleted (`clearGoneClaim`), its claimRef names a claim that is gone: under Retain the claimRef is
 *   cleared; under Delete a target a provisioner made for that claim is deleted (nobody can bind it any more);
 * - being deleted (`reclaim`): under Retain, or without a provisioner of its class, the finalizer goes; under
 *   Delete the class's provisioner deprovisions it, and the finalizer goes once that is done (`Failed` while
 *   it takes more than 2 minutes, still waiting).
 * Every step takes a `deps` object (the context's client and clock, the caches it reads, the provisioners).
 */
import {
  AppStudioKinds,
  DeploymentTargetAnnotation,
  DeploymentTargetFinalizer,
  DeploymentTargetMessage,
  DeploymentTargetPhase,
  ReclaimPolicy,
} from '@gitops/api';
import {
  deleteIfExists,
  getObject,
  type Informer,
  type Logger,
  type ReconcileResult,
  type Reconciler,
  refOfKind,
  splitObjectKey,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import { againOnConflict, requeueIn, type StepContext, stepContext } from '../controller.ts';
import type { Provisioner } from '../provisioners/provisioner.ts';
import {
  annotationOf,
  type ClassCr,
  claimRefOf,
  classNameOf,
  phaseOf,
  type TargetCr,
} from '../target-matching.ts';
import { addFinalizer, mergePatch, removeFinalizer, setErrorOccurred, setPhase } from '../writes.ts';

const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;

/** A deprovisioning that answered with an error is looked at again this often. */
const ERROR_RECHECK_MS = 30_000;

/** What a pass decided: an error for the condition (undefined = clean), when to look again, whether it is gone. */
export interface Outcome {
  error?: string;
  requeueAfter?: number;
  gone?: boolean;
}

/** What the steps use: the context's client and clock, the caches they read, the provisioners. */
export interface TargetReconcilerDeps extends Pick<StepContext, 'kc' | 'now'> {
  targets: Pick<Informer<TargetCr>, 'get'>;
  classes: Pick<Informer<ClassCr>, 'get'>;
  provisioners: readonly Provisioner[];
}

/** How a target is reclaimed: its class and policy, and the class's provisioner when this process runs it. */
export type Reclaim =
  | { kind: 'no-class' }
  | { kind: 'invalid-policy' }
  | {
      kind: 'policy';
      policy: typeof ReclaimPolicy.Delete | typeof ReclaimPolicy.Retain;
      deploymentTargetClass: ClassCr;
      provisioner: Provisioner | undefined;
    };

/** How `target` is reclaimed, from the cached classes (no API call). */
export function reclaimOf(
  deps: Pick<TargetReconcilerDeps, 'classes' | 'provisioners'>,
  target: TargetCr,
): Reclaim {
  const deploymentTargetClass = deps.classes.get(undefined, classNameOf(target));
  if (!deploymentTargetClass) return { kind: 'no-class' };
  const policy = deploymentTargetClass.spec.reclaimPolicy;
  if (policy !== ReclaimPolicy.Delete && policy !== ReclaimPolicy.Retain) return { kind: 'invalid-policy' };
  const provisioner = deps.provisioners.find((p) => p.name === deploymentTargetClass.spec.provisioner);
  return { kind: 'policy', policy, deploymentTargetClass, provisioner };
}

/** The target's finalizer removed: it goes. */
async function released(deps: Pick<TargetReconcilerDeps, 'kc'>, target: TargetCr): Promise<Outcome> {
  await removeFinalizer(deps.kc, Target, target, DeploymentTargetFinalizer.Target);
  return { gone: true };
}

/**
 * A target whose claimRef names a claim that is gone (read live): under Retain its claimRef is cleared; under
 * Delete, when a provisioner of this process made it, it is deleted.
 */
export async function clearGoneClaim(
  deps: Pick<TargetReconcilerDeps, 'kc'>,
  target: TargetCr,
  reclaim: Extract<Reclaim, { kind: 'policy' }>,
  logger: Logger,
): Promise<void> {
  const claimRef = claimRefOf(target);
  if (
    !claimRef ||
    (await getObject(deps.kc, { ...Claim, namespace: target.metadata.namespace, name: claimRef }))
  )
    return;
  if (reclaim.policy === ReclaimPolicy.Retain) {
    await mergePatch(deps.kc, Target, target, { spec: { claimRef: '' } });
    logger.info({ claim: claimRef }, 'claim gone under Retain: claimRef cleared');
  } else if (annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) && reclaim.provisioner) {
    await deleteIfExists(deps.kc, refOfKind(Target, target), { uid: target.metadata.uid });
    logger.info({ claim: claimRef }, 'claim gone under Delete: its provisioned target is deleted');
  }
}

/**
 * A target being deleted: its finalizer goes under Retain or without a provisioner; under Delete once the
 * class's provisioner says it is gone (`Failed` while that takes too long).
 */
export async function reclaim(
  deps: Pick<TargetReconcilerDeps, 'kc'>,
  target: TargetCr,
  how: Extract<Reclaim, { kind: 'policy' }>,
  logger: Logger,
): Promise<Outcome> {
  if (how.policy === ReclaimPolicy.Retain || !how.provisioner) {
    return released(deps, target);
  }
  const result = await how.provisioner.deprovision(target, how.deploymentTargetClass, logger);
  switch (result.kind) {
    case 'gone':
      return released(deps, target);
    case 'waiting':
      return { requeueAfter: result.requeueAfter };
    case 'failed':
      if (phaseOf(target) !== DeploymentTargetPhase.Failed) {
        await setPhase(deps.kc, Target, target, DeploymentTargetPhase.Failed);
        logger.warn('deprovisioning did not finish in time: DeploymentTarget Failed');
      }
      return { requeueAfter: result.requeueAfter };
    case 'error':
      return { error: result.message, requeueAfter: ERROR_RECHECK_MS };
  }
}

/** One pass over a cached target: its finalizer, then what its class says. */
export async function targetPass(
  deps: TargetReconcilerDeps,
  cached: TargetCr,
  logger: Logger,
): Promise<Outcome> {
  const deleting = Boolean(cached.metadata.deletionTimestamp);
  const target = deleting
    ? cached
    : await addFinalizer(deps.kc, Target, cached, DeploymentTargetFinalizer.Target);
  const how = reclaimOf(deps, target);
  if (how.kind === 'no-class') {
    if (!deleting) return {};
    return released(deps, target);
  }
  if (how.kind === 'invalid-policy') return { error: DeploymentTargetMessage.UnexpectedReclaimPolicy };
  if (deleting) return reclaim(deps, target, how, logger);
  await clearGoneClaim(deps, target, how, logger);
  return {};
}

/** One reconcile of the target `key`; the condition on the target as it is now; a conflict is tried again at once. */
export async function reconcileTarget(
  deps: TargetReconcilerDeps,
  key: string,
  logger: Logger,
): Promise<ReconcileResult | undefined> {
  const { namespace = '', name } = splitObjectKey(key);
  const cached = deps.targets.get(namespace, name);
  if (!cached) return undefined;
  return await againOnConflict(async () => {
    const outcome = await targetPass(deps, cached, logger);
    if (outcome.gone) return undefined;
    const latest = await getObject(deps.kc, { ...Target, namespace, name });
    if (latest) await setErrorOccurred(deps.kc, Target, latest, outcome.error, deps.now());
    return requeueIn(outcome.requeueAfter);
  });
}

/** The reclaimer's reconciler over the context, the feature's informers and the provisioners. */
export function createTargetReconciler(
  ctx: AppStudioContext,
  caches: Omit<TargetReconcilerDeps, 'kc' | 'now'>,
): Reconciler {
  const deps: TargetReconcilerDeps = { ...stepContext(ctx), ...caches };
  return (key, { logger }) => reconcileTarget(deps, key, logger);
}
