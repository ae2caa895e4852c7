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
  deleteIfExists,
  getObject,
  type Informer,
  isConflict,
  type KubeObject,
  type Logger,
  objectKey,
  type ReconcileResult,
  refOfKind,
  splitObjectKey,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import { type AppStudioController, createController } from '../controller.ts';
import { annotationOf, claimRefOf, classNameOf, phaseOf, targetNameOf } from '../deployment-target.ts';
import { specOf, text } from '../objects.ts';
import type { Provisioner } from '../provisioners/provisioner.ts';
import { addFinalizer, mergePatch, removeFinalizer, setErrorOccurred, setPhase } from '../writes.ts';

const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;

export interface TargetFeatureDeps {
  targets: Informer<KubeObject>;
  claims: Informer<KubeObject>;
  classes: Informer<KubeObject>;
  provisioners: readonly Provisioner[];
  /** Extra event sources of target keys (a provisioner's objects). */
  watch?: (enqueue: (key: string) => void) => (() => void)[];
}

interface Outcome {
  error?: string;
  requeueAfter?: number;
}

export function createTargetFeature(ctx: AppStudioContext, deps: TargetFeatureDeps): AppStudioController {
  const { kc } = ctx;

  async function pass(cached: KubeObject, logger: Logger): Promise<Outcome & { gone?: boolean }> {
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
    const policy = text(specOf(deploymentTargetClass).reclaimPolicy);
    if (policy !== ReclaimPolicy.Delete && policy !== ReclaimPolicy.Retain)
      return { error: DeploymentTargetMessage.UnexpectedReclaimPolicy };
    const provisioner = deps.provisioners.find(
      (p) => p.name === text(specOf(deploymentTargetClass).provisioner),
    );
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

  return createController(ctx, {
    name: 'appstudio-deploymenttarget',
    informer: deps.targets,
    alsoReads: [deps.claims, deps.classes],
    reconcile,
    needsReconcile: (a, b) =>
      a.metadata.resourceVersion === b.metadata.resourceVersion ||
      a.metadata.generation !== b.metadata.generation ||
      a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp ||
      JSON.stringify(a.metadata.finalizers) !== JSON.stringify(b.metadata.finalizers),
    watch: (enqueue) => {
      const byClass = (deploymentTargetClass: KubeObject) => {
        for (const target of deps.targets.list())
          if (classNameOf(target) === deploymentTargetClass.metadata.name) enqueue(objectKey(target));
      };
      // A claim deleted: its target's claimRef may need clearing (the original waited for the next target event).
      const byClaim = (claim: KubeObject) => {
        for (const target of deps.targets.list(claim.metadata.namespace))
          if (claimRefOf(target) === claim.metadata.name || target.metadata.name === targetNameOf(claim))
            enqueue(objectKey(target));
      };
      return [
        deps.classes.onAdd(byClass),
        deps.classes.onUpdate((_a, b) => byClass(b)),
        deps.classes.onDelete(byClass),
        deps.claims.onDelete(byClaim),
        ...(deps.watch?.(enqueue) ?? []),
      ];
    },
  });
}
