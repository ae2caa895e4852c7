/**
 * DeploymentTarget controller, the reclaimer (README: "DeploymentTarget"). A reconcile, for one target:
 * - finalizer `dt.appstudio.redhat.com/finalizer`;
 * - its class does not exist: `Success` (as the original), and on delete the finalizer goes (the original
 *   left such a target stuck);
 * - not being deleted, its claimRef names a claim that is gone: under Retain the claimRef is cleared; under
 *   Delete a target a provisioner made for that claim is deleted (nobody can bind it any more);
 * - being deleted: under Retain, or without a provisioner of its class, the finalizer goes; under Delete the
 *   class's provisioner deprovisions it, and the finalizer goes once that is done (`Failed` while it takes
 *   more than 2 minutes, still waiting).
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
  anyOf,
  deleteIfExists,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  getObject,
  type Informer,
  ignoreCreates,
  ignoreUpdates,
  isConflict,
  type KubeObject,
  type Logger,
  objectKey,
  type ReconcileResult,
  refOfKind,
  relist,
  splitObjectKey,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { byClaimRef, byClassName } from '../indexes.ts';
import { targetKeysOfSpaceRequest } from '../provisioners/devsandbox.feature.ts';
import type { Provisioner } from '../provisioners/provisioner.ts';
import {
  annotationOf,
  type ClaimCr,
  type ClassCr,
  claimRefOf,
  classNameOf,
  phaseOf,
  type TargetCr,
  targetNameOf,
} from '../target-matching.ts';
import { addFinalizer, mergePatch, removeFinalizer, setErrorOccurred, setPhase } from '../writes.ts';

const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;

export interface TargetFeatureDeps {
  targets: Informer<TargetCr>;
  claims: Informer<ClaimCr>;
  classes: Informer<ClassCr>;
  provisioners: readonly Provisioner[];
  /** The devsandbox provisioner's SpaceRequests (when it runs): they wake the target they belong to. */
  spaceRequests?: Informer<KubeObject>;
}

interface Outcome {
  error?: string;
  requeueAfter?: number;
}

export function createTargetFeature(ctx: AppStudioContext, deps: TargetFeatureDeps): AppStudioController {
  const { kc } = ctx;

  async function pass(cached: TargetCr, logger: Logger): Promise<Outcome & { gone?: boolean }> {
    const deleting = Boolean(cached.metadata.deletionTimestamp);
    const target = deleting
      ? cached
      : await addFinalizer(kc, Target, cached, DeploymentTargetFinalizer.Target);
    const deploymentTargetClass = deps.classes.get(undefined, classNameOf(target));
    if (!deploymentTargetClass) {
      if (deleting) {
        await removeFinalizer(kc, Target, target, DeploymentTargetFinalizer.Target);
        return { gone: true };
      }
      return {};
    }
    const policy = deploymentTargetClass.spec.reclaimPolicy;
    if (policy !== ReclaimPolicy.Delete && policy !== ReclaimPolicy.Retain)
      return { error: DeploymentTargetMessage.UnexpectedReclaimPolicy };
    const provisioner = deps.provisioners.find((p) => p.name === deploymentTargetClass.spec.provisioner);
    if (!deleting) {
      const claimRef = claimRefOf(target);
      if (
        claimRef &&
        !(await getObject(kc, { ...Claim, namespace: target.metadata.namespace, name: claimRef }))
      ) {
        if (policy === ReclaimPolicy.Retain) {
          await mergePatch(kc, Target, target, { spec: { claimRef: '' } });
          logger.info({ claim: claimRef }, 'claim gone under Retain: claimRef cleared');
        } else if (annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) && provisioner) {
          await deleteIfExists(kc, refOfKind(Target, target), { uid: target.metadata.uid });
          logger.info({ claim: claimRef }, 'claim gone under Delete: its provisioned target is deleted');
        }
      }
      return {};
    }
    if (policy === ReclaimPolicy.Retain || !provisioner) {
      await removeFinalizer(kc, Target, target, DeploymentTargetFinalizer.Target);
      return { gone: true };
    }
    const result = await provisioner.deprovision(target, deploymentTargetClass, logger);
    switch (result.kind) {
      case 'gone':
        await removeFinalizer(kc, Target, target, DeploymentTargetFinalizer.Target);
        return { gone: true };
      case 'waiting':
        return { requeueAfter: result.requeueAfter };
      case 'failed':
        if (phaseOf(target) !== DeploymentTargetPhase.Failed) {
          await setPhase(kc, Target, target, DeploymentTargetPhase.Failed);
          logger.warn('deprovisioning did not finish in time: DeploymentTarget Failed');
        }
        return { requeueAfter: result.requeueAfter };
      case 'error':
        return { error: result.message, requeueAfter: 30_000 };
    }
  }

  async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const cached = deps.targets.get(namespace, name);
    if (!cached) return undefined;
    try {
      const outcome = await pass(cached, logger);
      if (outcome.gone) return undefined;
      const latest = await getObject(kc, { ...Target, namespace, name });
      if (latest) await setErrorOccurred(kc, Target, latest, outcome.error, ctx.now());
      return outcome.requeueAfter === undefined ? undefined : { requeueAfter: outcome.requeueAfter };
    } catch (err) {
      if (isConflict(err)) return { requeue: true };
      throw err;
    }
  }

  const targetsOfClass = byClassName(deps.targets);
  const targetsClaiming = byClaimRef(deps.targets);
  const builder = newAppStudioController(ctx, 'appstudio-deploymenttarget')
    .for(deps.targets, { predicates: [anyOf(relist, generationChanged, deletionStarted, finalizersChanged)] })
    .watches(deps.classes, (deploymentTargetClass) =>
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
  return (
    spaceRequests
      ? builder.watches(spaceRequests, (sr) => targetKeysOfSpaceRequest(sr, deps.targets))
      : builder
  ).complete(quietInTerminatingNamespace(reconcile));
}
