/**
 * DeploymentTargetClaim controller, the binder (README: "DeploymentTargetClaim"). A reconcile, for one claim:
 * - finalizer `binder.appstudio.redhat.com/finalizer`;
 * - being deleted: kept while an Environment names it (in-use protection, appstudio README promise 6); bound under Delete:
 *   its target is deleted and the claim goes once the target is really gone; bound under Retain (or a class
 *   that does not exist): the target is released (claimRef cleared, phase Released) and the claim goes;
 *   unbound: it goes;
 * - bind-complete: keep both Bound; the target gone → `Lost`;
 * - no targetName: the matching target (one already naming the claim, else the oldest) is bound "by
 *   controller"; none → Pending, and with a class, the dt-provisioner annotation and the class's provisioner;
 * - targetName: that target when it exists and matches (Pending while it does not exist, a condition when
 *   it is claimed by another claim or does not match).
 * Binding writes the target's claimRef (as the PV binder does), the phases, then the annotations. The single
 * condition `ErrorOccurred` is written at the end of every pass.
 */
import {
  AppStudioKinds,
  ClaimEventReason,
  DeploymentTargetAnnotation,
  DeploymentTargetClaimPhase,
  DeploymentTargetFinalizer,
  DeploymentTargetMessage,
  DeploymentTargetPhase,
  ReclaimPolicy,
} from '@gitops/api';
import {
  annotationsChanged,
  anyOf,
  collectionPath,
  deleteIfExists,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  getObject,
  HttpMethod,
  type Informer,
  isConflict,
  kindParser,
  kubeRequest,
  type Logger,
  objectKey,
  type ReconcileResult,
  refOfKind,
  relist,
  splitObjectKey,
  withTypeMeta,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { byClassName, claimsOfTargetIn, waitingForTarget } from '../indexes.ts';
import type { Provisioner } from '../provisioners/provisioner.ts';
import {
  annotationOf,
  autoMatch,
  boundTargetOf,
  type ClaimCr,
  type ClassCr,
  claimNameOfEnvironment,
  claimRefOf,
  classNameOf,
  type EnvironmentCr,
  isBindComplete,
  phaseOf,
  type TargetCr,
  targetMismatch,
  targetNameOf,
  wantsProvisioning,
} from '../target-matching.ts';
import { addFinalizer, mergePatch, removeFinalizer, setErrorOccurred, setPhase } from '../writes.ts';

const Claim = AppStudioKinds.DeploymentTargetClaim;
const Target = AppStudioKinds.DeploymentTarget;

export interface ClaimFeatureDeps {
  claims: Informer<ClaimCr>;
  targets: Informer<TargetCr>;
  classes: Informer<ClassCr>;
  environments: Informer<EnvironmentCr>;
  provisioners: readonly Provisioner[];
}

/** What a pass decided: an error for the condition (undefined = clean), and when to look again. */
interface Outcome {
  error?: string;
  requeueAfter?: number;
}

export function createClaimFeature(ctx: AppStudioContext, deps: ClaimFeatureDeps): AppStudioController {
  const { kc, events } = ctx;

  const namesUsing = (claim: ClaimCr, environments: readonly EnvironmentCr[]) =>
    environments
      .filter((env) => !env.metadata.deletionTimestamp && claimNameOfEnvironment(env) === claim.metadata.name)
      .map((env) => env.metadata.name)
      .sort();

  /**
   * The Environments naming the claim. The cache answers "in use"; "not in use" is confirmed with a live
   * list before anything is released (as Kubernetes' PVC protection does with Pods): an Environment created a
   * moment ago may not be in the cache yet.
   */
  async function environmentsUsing(claim: ClaimCr, signal: AbortSignal): Promise<string[]> {
    const cached = namesUsing(claim, deps.environments.list(claim.metadata.namespace));
    if (cached.length > 0) return cached;
    const live = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: collectionPath({ ...AppStudioKinds.Environment.resource, namespace: claim.metadata.namespace }),
      signal,
    })) as { items?: unknown[] };
    return namesUsing(claim, (live.items ?? []).map(kindParser<EnvironmentCr>(AppStudioKinds.Environment)));
  }

  async function bind(claim: ClaimCr, target: TargetCr, byController: boolean, logger: Logger) {
    let c = claim;
    let t = target;
    // The target's claimRef first: the CEL rule refuses moving it from one claim to another, so two claims
    // can never both take this target.
    if (claimRefOf(t) === '') t = await mergePatch(kc, Target, t, { spec: { claimRef: c.metadata.name } });
    if (byController && targetNameOf(c) !== t.metadata.name)
      c = await mergePatch(kc, Claim, c, {
        metadata: { annotations: { [DeploymentTargetAnnotation.BoundByController]: 'true' } },
        spec: { targetName: t.metadata.name },
      });
    c = await setPhase(kc, Claim, c, DeploymentTargetClaimPhase.Bound);
    await setPhase(kc, Target, t, DeploymentTargetPhase.Bound);
    if (!isBindComplete(c)) {
      c = await mergePatch(kc, Claim, c, {
        metadata: { annotations: { [DeploymentTargetAnnotation.BindComplete]: 'true' } },
      });
      logger.info({ target: t.metadata.name }, 'DeploymentTargetClaim bound');
      await events.event(c, 'Normal', ClaimEventReason.Bound, `bound to DeploymentTarget ${t.metadata.name}`);
    }
    return c;
  }

  /** Bound maintenance: provisioner annotation follows the class; both Bound; the target gone → Lost. */
  async function keepBound(claim: ClaimCr): Promise<Outcome> {
    let c = claim;
    const annotation = annotationOf(c, DeploymentTargetAnnotation.DTProvisioner);
    const className = classNameOf(c);
    if (annotation !== undefined && annotation !== className)
      c = await mergePatch(kc, Claim, c, {
        metadata: { annotations: { [DeploymentTargetAnnotation.DTProvisioner]: className || null } },
      });
    const bound = boundTargetOf(c, deps.targets.list(c.metadata.namespace));
    if (bound.kind === 'error') return { error: DeploymentTargetMessage.processBound(bound.message) };
    if (bound.kind !== 'found') {
      if (phaseOf(c) !== DeploymentTargetClaimPhase.Lost) {
        await setPhase(kc, Claim, c, DeploymentTargetClaimPhase.Lost);
        await events.event(c, 'Warning', ClaimEventReason.Lost, 'its DeploymentTarget is gone');
      }
      return {
        error: DeploymentTargetMessage.processBound(
          DeploymentTargetMessage.lost(c.metadata.name, c.metadata.namespace ?? ''),
        ),
      };
    }
    await setPhase(kc, Target, bound.target, DeploymentTargetPhase.Bound);
    await setPhase(kc, Claim, c, DeploymentTargetClaimPhase.Bound);
    return {};
  }

  async function provision(claim: ClaimCr, logger: Logger): Promise<Outcome> {
    let c = claim;
    const className = classNameOf(c);
    if (!className) {
      await setPhase(kc, Claim, c, DeploymentTargetClaimPhase.Pending);
      return {};
    }
    if (annotationOf(c, DeploymentTargetAnnotation.DTProvisioner) !== className)
      c = await mergePatch(kc, Claim, c, {
        metadata: { annotations: { [DeploymentTargetAnnotation.DTProvisioner]: className } },
      });
    c = await setPhase(kc, Claim, c, DeploymentTargetClaimPhase.Pending);
    const deploymentTargetClass = deps.classes.get(undefined, className);
    if (!deploymentTargetClass)
      return {
        error: DeploymentTargetMessage.provisioning(
          DeploymentTargetMessage.classNotFound(c.metadata.name, className),
        ),
      };
    const provisioner = deps.provisioners.find((p) => p.name === deploymentTargetClass.spec.provisioner);
    if (!provisioner) return {}; // another provisioner's class: wait for a target naming this claim
    const error = await provisioner.provision(c, deploymentTargetClass, logger);
    return error === undefined ? {} : { error };
  }

  async function release(
    claim: ClaimCr,
    logger: Logger,
    signal: AbortSignal,
  ): Promise<Outcome & { done: boolean }> {
    const using = await environmentsUsing(claim, signal);
    if (using.length > 0) {
      // Still in use: it stays bound (and Lost when its target goes) until the Environments let go.
      if (isBindComplete(claim)) await keepBound(claim);
      return { done: false, error: DeploymentTargetMessage.inUse(using) };
    }
    // Bound: the annotation, or the phase (written just before the annotation, so a delete may come between).
    const bound =
      isBindComplete(claim) || phaseOf(claim) === DeploymentTargetClaimPhase.Bound
        ? boundTargetOf(claim, deps.targets.list(claim.metadata.namespace))
        : undefined;
    if (bound?.kind === 'found') {
      let target = bound.target;
      const deploymentTargetClass = deps.classes.get(undefined, classNameOf(target));
      const policy = deploymentTargetClass?.spec.reclaimPolicy ?? '';
      if (policy === ReclaimPolicy.Delete) {
        if (!target.metadata.deletionTimestamp) {
          target = await addFinalizer(kc, Target, target, DeploymentTargetFinalizer.Target);
          // Released (as the original), once: from then on the reclaimer owns the phase (Failed).
          target = await setPhase(kc, Target, target, DeploymentTargetPhase.Released);
          await deleteIfExists(kc, refOfKind(Target, target), { uid: target.metadata.uid });
          logger.info(
            { target: target.metadata.name },
            'claim deleted under Delete: its DeploymentTarget is deleted',
          );
        }
        // Design §6: the claim goes only after its target is really gone (the target's delete event brings us back).
        return { done: false, error: DeploymentTargetMessage.waitingForTarget(target.metadata.name) };
      }
      // Retain, or a class that does not exist (kept rather than stuck): release the target.
      if (claimRefOf(target) !== '')
        target = await mergePatch(kc, Target, target, { spec: { claimRef: '' } });
      await setPhase(kc, Target, target, DeploymentTargetPhase.Released);
      await events.event(
        target,
        'Normal',
        ClaimEventReason.Released,
        `released: DeploymentTargetClaim ${claim.metadata.name} was deleted`,
      );
    } else if (bound === undefined || bound.kind !== 'error') {
      // Not bound, or its bound target is gone. A Delete claim still waits for a target being deleted.
      const deleting = deps.targets
        .list(claim.metadata.namespace)
        .find(
          (t) =>
            t.metadata.deletionTimestamp &&
            (claimRefOf(t) === claim.metadata.name || t.metadata.name === targetNameOf(claim)),
        );
      if (deleting && isBindComplete(claim))
        return { done: false, error: DeploymentTargetMessage.waitingForTarget(deleting.metadata.name) };
    }
    await removeFinalizer(kc, Claim, claim, DeploymentTargetFinalizer.Claim);
    return { done: true };
  }

  async function bindPass(claim: ClaimCr, logger: Logger): Promise<Outcome> {
    if (isBindComplete(claim)) return keepBound(claim);
    const namespace = claim.metadata.namespace;
    const targetName = targetNameOf(claim);
    if (!targetName) {
      const match = autoMatch(claim, deps.targets.list(namespace));
      if (match) {
        await bind(claim, match, true, logger);
        return {};
      }
      return provision(claim, logger);
    }
    const target = deps.targets.get(namespace, targetName);
    if (!target || target.metadata.deletionTimestamp) {
      await setPhase(kc, Claim, claim, DeploymentTargetClaimPhase.Pending);
      return {};
    }
    const claimRef = claimRefOf(target);
    if (claimRef === claim.metadata.name) {
      await bind(claim, target, false, logger);
      return {};
    }
    if (claimRef !== '') {
      await setPhase(kc, Claim, claim, DeploymentTargetClaimPhase.Pending);
      return { error: DeploymentTargetMessage.WantsClaimedTarget };
    }
    const mismatch = targetMismatch(target, claim);
    if (mismatch) {
      await setPhase(kc, Claim, claim, DeploymentTargetClaimPhase.Pending);
      return { error: DeploymentTargetMessage.targetDoesNotMatch(mismatch) };
    }
    await bind(claim, target, false, logger);
    return {};
  }

  async function reconcile(
    key: string,
    { logger, signal }: { logger: Logger; signal: AbortSignal },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const cached = deps.claims.get(namespace, name);
    if (!cached) return undefined;
    try {
      let outcome: Outcome;
      if (cached.metadata.deletionTimestamp) {
        const released = await release(cached, logger, signal);
        if (released.done) return undefined;
        outcome = released;
      } else {
        const claim = await addFinalizer(kc, Claim, cached, DeploymentTargetFinalizer.Claim);
        outcome = await bindPass(claim, logger);
      }
      // The condition goes on the claim as it is now (every write above changed its resourceVersion).
      const latest = await readClaim(namespace, name);
      if (latest) {
        const before = latest.status;
        const written = await setErrorOccurred(kc, Claim, latest, outcome.error, ctx.now());
        if (outcome.error && written.status !== before)
          await events.event(
            withTypeMeta(Claim, latest),
            'Warning',
            ClaimEventReason.ErrorOccurred,
            outcome.error,
          );
      }
      return outcome.requeueAfter === undefined ? undefined : { requeueAfter: outcome.requeueAfter };
    } catch (err) {
      if (isConflict(err)) return { requeue: true };
      throw err;
    }
  }

  const readClaim = (namespace: string, name: string) => getObject(kc, { ...Claim, namespace, name });

  const claimsOfTarget = claimsOfTargetIn(deps.claims);
  const waiting = waitingForTarget(deps.claims);
  const claimsOfClass = byClassName(deps.claims);
  return (
    newAppStudioController(ctx, 'appstudio-deploymenttargetclaim')
      .for(deps.claims, {
        predicates: [
          anyOf(relist, generationChanged, deletionStarted, annotationsChanged, finalizersChanged),
        ],
      })
      // The claims of a target, and those waiting without a targetName (a new target may match them).
      .watches(deps.targets, (target) =>
        [...claimsOfTarget(target), ...waiting(target.metadata.namespace)].map(objectKey),
      )
      .watches(deps.classes, (deploymentTargetClass) =>
        claimsOfClass(deploymentTargetClass.metadata.name).filter(wantsProvisioning).map(objectKey),
      )
      .watches(deps.environments, (env) => {
        const claimName = claimNameOfEnvironment(env);
        return claimName ? [`${env.metadata.namespace}/${claimName}`] : [];
      })
      .complete(quietInTerminatingNamespace(reconcile))
  );
}
