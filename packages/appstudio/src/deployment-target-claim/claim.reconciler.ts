/**
 * The binder's reconcile as named steps (README: "DeploymentTargetClaim"), for one claim:
 * - finalizer `binder.appstudio.redhat.com/finalizer`;
 * - being deleted (`release`): kept while an Environment names it (in-use protection, appstudio README
 *   promise 6); bound under Delete: its target is deleted and the claim goes once the target is really gone;
 *   bound under Retain (or a class that does not exist): the target is released (claimRef cleared, phase
 *   Released) and the claim goes; unbound: it goes;
 * - bind-complete (`keepBound`): keep both Bound; the target gone → `Lost`;
 * - otherwise `chooseTarget` decides: no targetName: the matching target (one already naming the claim, else
 *   the oldest) is bound "by controller"; none → `provision`: Pending, and with a class, the dt-provisioner
 *   annotation and the class's provisioner; targetName: that target when it exists and matches (Pending while
 *   it does not exist, a condition when it is claimed by another claim or does not match).
 * `bind` writes the target's claimRef (as the PV binder does), the phases, then the annotations. The single
 * condition `ErrorOccurred` is written at the end of every pass (`writeOutcome`). Every step takes a `deps`
 * object (the context's client, recorder and clock, the caches it reads, the provisioners).
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
  collectionPath,
  deleteIfExists,
  getObject,
  HttpMethod,
  type Informer,
  kindParser,
  kubeRequest,
  type Logger,
  type ReconcileResult,
  type Reconciler,
  refOfKind,
  splitObjectKey,
  withTypeMeta,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import { againOnConflict, requeueIn, type StepContext, stepContext } from '../controller.ts';
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
} from '../target-matching.ts';
import { addFinalizer, mergePatch, removeFinalizer, setErrorOccurred, setPhase } from '../writes.ts';

const Claim = AppStudioKinds.DeploymentTargetClaim;
const Target = AppStudioKinds.DeploymentTarget;

/** What a pass decided: an error for the condition (undefined = clean), and when to look again. */
export interface Outcome {
  error?: string;
  requeueAfter?: number;
}

/** What the steps use: the context's client, recorder and clock, the caches they read, the provisioners. */
export interface ClaimReconcilerDeps extends Pick<StepContext, 'kc' | 'events' | 'now'> {
  claims: Pick<Informer<ClaimCr>, 'get'>;
  targets: Pick<Informer<TargetCr>, 'get' | 'list'>;
  classes: Pick<Informer<ClassCr>, 'get'>;
  environments: Pick<Informer<EnvironmentCr>, 'list'>;
  provisioners: readonly Provisioner[];
}

/** The names of the Environments (not being deleted) among `environments` that name the claim, sorted. */
export function namesUsing(claim: ClaimCr, environments: readonly EnvironmentCr[]): string[] {
  return environments
    .filter((env) => !env.metadata.deletionTimestamp && claimNameOfEnvironment(env) === claim.metadata.name)
    .map((env) => env.metadata.name)
    .sort();
}

/**
 * The Environments naming the claim. The cache answers "in use"; "not in use" is confirmed with a live list
 * before anything is released (as Kubernetes' PVC protection does with Pods): an Environment created a moment
 * ago may not be in the cache yet.
 */
export async function environmentsUsing(
  deps: Pick<ClaimReconcilerDeps, 'kc' | 'environments'>,
  claim: ClaimCr,
  signal: AbortSignal,
): Promise<string[]> {
  const cached = namesUsing(claim, deps.environments.list(claim.metadata.namespace));
  if (cached.length > 0) return cached;
  const live = (await kubeRequest(deps.kc, {
    method: HttpMethod.GET,
    path: collectionPath({ ...AppStudioKinds.Environment.resource, namespace: claim.metadata.namespace }),
    signal,
  })) as { items?: unknown[] };
  return namesUsing(claim, (live.items ?? []).map(kindParser<EnvironmentCr>(AppStudioKinds.Environment)));
}

/** What to do with a claim that is not bind-complete, from the cached targets of its namespace. */
export type TargetChoice =
  | { kind: 'bind'; target: TargetCr; byController: boolean }
  /** No target matches and none is named: a provisioner may make one. */
  | { kind: 'provision' }
  /** Pending (with the condition's message when the named target cannot be bound). */
  | { kind: 'pending'; error?: string };

/** The binder's choice for a claim that is not bind-complete (no API call). */
export function chooseTarget(
  claim: ClaimCr,
  targets: Pick<Informer<TargetCr>, 'get' | 'list'>,
): TargetChoice {
  const namespace = claim.metadata.namespace;
  const targetName = targetNameOf(claim);
  if (!targetName) {
    const match = autoMatch(claim, targets.list(namespace));
    return match ? { kind: 'bind', target: match, byController: true } : { kind: 'provision' };
  }
  const target = targets.get(namespace, targetName);
  if (!target || target.metadata.deletionTimestamp) return { kind: 'pending' };
  const claimRef = claimRefOf(target);
  if (claimRef === claim.metadata.name) return { kind: 'bind', target, byController: false };
  if (claimRef !== '') return { kind: 'pending', error: DeploymentTargetMessage.WantsClaimedTarget };
  const mismatch = targetMismatch(target, claim);
  if (mismatch) return { kind: 'pending', error: DeploymentTargetMessage.targetDoesNotMatch(mismatch) };
  return { kind: 'bind', target, byController: false };
}

/** Binds the claim and the target: the target's claimRef, the claim's targetName (by controller), phases, annotation. */
export async function bind(
  deps: Pick<ClaimReconcilerDeps, 'kc' | 'events'>,
  claim: ClaimCr,
  target: TargetCr,
  byController: boolean,
  logger: Logger,
): Promise<ClaimCr> {
  const { kc } = deps;
  let c = claim;
  let t = target;
  // The target's claimRef first: the CEL rule refuses moving it from one claim to another, so two claims can
  // never both take this target.
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
    await deps.events.event(
      c,
      'Normal',
      ClaimEventReason.Bound,
      `bound to DeploymentTarget ${t.metadata.name}`,
    );
  }
  return c;
}

/** Bound maintenance: provisioner annotation follows the class; both Bound; the target gone → Lost. */
export async function keepBound(
  deps: Pick<ClaimReconcilerDeps, 'kc' | 'events' | 'targets'>,
  claim: ClaimCr,
): Promise<Outcome> {
  const { kc } = deps;
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
      await deps.events.event(c, 'Warning', ClaimEventReason.Lost, 'its DeploymentTarget is gone');
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

/** No target for the claim: Pending, and with a class, its provisioner asked for one. */
export async function provision(
  deps: Pick<ClaimReconcilerDeps, 'kc' | 'classes' | 'provisioners'>,
  claim: ClaimCr,
  logger: Logger,
): Promise<Outcome> {
  const { kc } = deps;
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

/** A pass over a claim that is not being deleted. */
export async function bindPass(deps: ClaimReconcilerDeps, claim: ClaimCr, logger: Logger): Promise<Outcome> {
  if (isBindComplete(claim)) return keepBound(deps, claim);
  const choice = chooseTarget(claim, deps.targets);
  switch (choice.kind) {
    case 'bind':
      await bind(deps, claim, choice.target, choice.byController, logger);
      return {};
    case 'provision':
      return provision(deps, claim, logger);
    case 'pending':
      await setPhase(deps.kc, Claim, claim, DeploymentTargetClaimPhase.Pending);
      return choice.error === undefined ? {} : { error: choice.error };
  }
}

/**
 * The bound target of a deleted claim: under Delete it is deleted, and the claim waits until it is gone
 * (`done: false`); under Retain, or a class that does not exist (kept rather than stuck), it is released.
 */
export async function releaseTarget(
  deps: Pick<ClaimReconcilerDeps, 'kc' | 'events' | 'classes'>,
  claim: ClaimCr,
  bound: TargetCr,
  logger: Logger,
): Promise<Outcome & { done: boolean }> {
  const { kc } = deps;
  let target = bound;
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
  if (claimRefOf(target) !== '') target = await mergePatch(kc, Target, target, { spec: { claimRef: '' } });
  await setPhase(kc, Target, target, DeploymentTargetPhase.Released);
  await deps.events.event(
    target,
    'Normal',
    ClaimEventReason.Released,
    `released: DeploymentTargetClaim ${claim.metadata.name} was deleted`,
  );
  return { done: true };
}

/** A target of the claim's (by claimRef or targetName) being deleted, which a Delete claim waits for. */
export function deletingTargetOf(
  claim: ClaimCr,
  targets: Pick<Informer<TargetCr>, 'list'>,
): TargetCr | undefined {
  return targets
    .list(claim.metadata.namespace)
    .find(
      (t) =>
        t.metadata.deletionTimestamp &&
        (claimRefOf(t) === claim.metadata.name || t.metadata.name === targetNameOf(claim)),
    );
}

/** A pass over a claim being deleted: `done` once its finalizer is removed. */
export async function release(
  deps: ClaimReconcilerDeps,
  claim: ClaimCr,
  logger: Logger,
  signal: AbortSignal,
): Promise<Outcome & { done: boolean }> {
  const using = await environmentsUsing(deps, claim, signal);
  if (using.length > 0) {
    // Still in use: it stays bound (and Lost when its target goes) until the Environments let go.
    if (isBindComplete(claim)) await keepBound(deps, claim);
    return { done: false, error: DeploymentTargetMessage.inUse(using) };
  }
  // Bound: the annotation, or the phase (written just before the annotation, so a delete may come between).
  const bound =
    isBindComplete(claim) || phaseOf(claim) === DeploymentTargetClaimPhase.Bound
      ? boundTargetOf(claim, deps.targets.list(claim.metadata.namespace))
      : undefined;
  if (bound?.kind === 'found') {
    const released = await releaseTarget(deps, claim, bound.target, logger);
    if (!released.done) return released;
  } else if (bound === undefined || bound.kind !== 'error') {
    // Not bound, or its bound target is gone. A Delete claim still waits for a target being deleted.
    const deleting = deletingTargetOf(claim, deps.targets);
    if (deleting && isBindComplete(claim))
      return { done: false, error: DeploymentTargetMessage.waitingForTarget(deleting.metadata.name) };
  }
  await removeFinalizer(deps.kc, Claim, claim, DeploymentTargetFinalizer.Claim);
  return { done: true };
}

/** The pass's condition on the claim as it is now (every write of the pass changed its resourceVersion). */
async function writeOutcome(
  deps: Pick<ClaimReconcilerDeps, 'kc' | 'events' | 'now'>,
  namespace: string,
  name: string,
  outcome: Outcome,
): Promise<void> {
  const latest = await getObject(deps.kc, { ...Claim, namespace, name });
  if (!latest) return;
  const before = latest.status;
  const written = await setErrorOccurred(deps.kc, Claim, latest, outcome.error, deps.now());
  if (outcome.error && written.status !== before)
    await deps.events.event(
      withTypeMeta(Claim, latest),
      'Warning',
      ClaimEventReason.ErrorOccurred,
      outcome.error,
    );
}

/** One reconcile of the claim `key`; a conflict is tried again at once. */
export async function reconcileClaim(
  deps: ClaimReconcilerDeps,
  key: string,
  { logger, signal }: { logger: Logger; signal: AbortSignal },
): Promise<ReconcileResult | undefined> {
  const { namespace = '', name } = splitObjectKey(key);
  const cached = deps.claims.get(namespace, name);
  if (!cached) return undefined;
  return await againOnConflict(async () => {
    let outcome: Outcome;
    if (cached.metadata.deletionTimestamp) {
      const released = await release(deps, cached, logger, signal);
      if (released.done) return undefined;
      outcome = released;
    } else {
      const claim = await addFinalizer(deps.kc, Claim, cached, DeploymentTargetFinalizer.Claim);
      outcome = await bindPass(deps, claim, logger);
    }
    await writeOutcome(deps, namespace, name, outcome);
    return requeueIn(outcome.requeueAfter);
  });
}

/** The binder's reconciler over the context, the feature's informers and the provisioners. */
export function createClaimReconciler(
  ctx: AppStudioContext,
  caches: Omit<ClaimReconcilerDeps, 'kc' | 'events' | 'now'>,
): Reconciler {
  const deps: ClaimReconcilerDeps = { ...stepContext(ctx), ...caches };
  return (key, context) => reconcileClaim(deps, key, context);
}
