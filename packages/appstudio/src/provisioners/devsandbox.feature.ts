/**
 * The `appstudio.redhat.com/devsandbox` provisioner (README: "Provisioners"): a Pending claim of such a class
 * gets a SpaceRequest (tier `appstudio-env`, label `appstudio.openshift.io/dtc=<claim>`) for the Dev Sandbox
 * host operator; once that SpaceRequest is Ready with one namespaceAccess entry, this feature creates the
 * DeploymentTarget `<claim>-dt` from its status (Available, claimRef = the claim) and labels the
 * SpaceRequest `appstudio.openshift.io/dt=<target>`. A SpaceRequest whose claim is gone is deleted when the
 * class says Delete. Deprovisioning deletes the SpaceRequest (with the host operator's finalizer, so it
 * lingers while the host operator cleans up) and is done when it is gone; `Failed` once the host operator
 * reports UnableToTerminate more than 2 minutes after the delete.
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
  type Feature,
  getObject,
  type Informer,
  ignoreCreates,
  ignoreUpdates,
  isConflict,
  type KubeObject,
  kindParser,
  type Logger,
  objectKey,
  type ReconcileResult,
  refOfKind,
  splitObjectKey,
  type WorkQueue,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import { newAppStudioController, quietInTerminatingNamespace } from '../controller.ts';
import { byClaimRef, bySpaceRequestLabel, type spaceRequestLabels } from '../indexes.ts';
import { list, record, specOf, statusOf, text } from '../objects.ts';
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
import {
  DEPROVISION_TIMEOUT_MS,
  type Deprovisioned,
  type Provisioner,
  provisionedTargetLabels,
} from './provisioner.ts';

const SpaceRequest = AppStudioKinds.SpaceRequest;
const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;

/** On a SpaceRequest we create: the class it was made for (its reclaim policy decides orphan cleanup). */
const CLASS_ANNOTATION = 'appstudio.openshift.io/dtclass';
/** The host operator's reasons on the Ready condition. */
const UNABLE_TO_TERMINATE = 'UnableToTerminate';
const RECHECK_MS = 30_000;

export const provisionedTargetName = (claim: string): string => `${claim}-dt`;

export interface DevSandboxProvisioner extends Provisioner, Feature {
  /** The SpaceRequest queue (tests wait for it to be idle). */
  readonly queue: WorkQueue;
}

export function createDevSandboxProvisioner(
  ctx: AppStudioContext,
  deps: {
    spaceRequests: Informer<KubeObject>;
    claims: Informer<ClaimCr>;
    targets: Informer<TargetCr>;
    classes: Informer<ClassCr>;
    /** DEV_ONLY_IGNORE_SELFSIGNED_CERT_IN_DEPLOYMENT_TARGET: provisioned targets skip TLS verification. */
    allowInsecureSkipTLSVerify?: boolean;
  },
): DevSandboxProvisioner {
  const { kc } = ctx;
  const tierOf = (sr: KubeObject) => text(specOf(sr).tierName);
  const byLabel = {
    [SpaceRequestLabel.Claim]: bySpaceRequestLabel(deps.spaceRequests, SpaceRequestLabel.Claim),
    [SpaceRequestLabel.Target]: bySpaceRequestLabel(deps.spaceRequests, SpaceRequestLabel.Target),
  };
  const targetsByClaimRef = byClaimRef(deps.targets);
  const spaceRequestsOf = (
    namespace: string | undefined,
    label: (typeof spaceRequestLabels)[number],
    value: string,
  ) => byLabel[label](namespace, value).filter((sr) => tierOf(sr) === SPACE_REQUEST_TIER);

  async function provision(claim: ClaimCr, deploymentTargetClass: ClassCr, logger: Logger) {
    const namespace = claim.metadata.namespace ?? '';
    if (spaceRequestsOf(namespace, SpaceRequestLabel.Claim, claim.metadata.name).length > 0) return undefined;
    await createObject(kc, SpaceRequest, namespace, {
      metadata: {
        generateName: `${claim.metadata.name}-`,
        labels: { ...ctx.shardLabels, [SpaceRequestLabel.Claim]: claim.metadata.name },
        annotations: { [CLASS_ANNOTATION]: deploymentTargetClass.metadata.name },
      },
      spec: { tierName: SPACE_REQUEST_TIER, targetClusterRoles: [] },
    });
    logger.info('SpaceRequest created for the claim');
    return undefined;
  }

  function readyCondition(sr: KubeObject) {
    return list(statusOf(sr).conditions)
      .map(record)
      .find((c) => c.type === 'Ready');
  }

  /** The SpaceRequest of a target: labelled with the target, else with its claim. */
  function spaceRequestOf(target: TargetCr): KubeObject | undefined {
    const namespace = target.metadata.namespace;
    return (
      spaceRequestsOf(namespace, SpaceRequestLabel.Target, target.metadata.name)[0] ??
      (claimRefOf(target)
        ? spaceRequestsOf(namespace, SpaceRequestLabel.Claim, claimRefOf(target))[0]
        : undefined)
    );
  }

  async function deprovision(target: TargetCr): Promise<Deprovisioned> {
    let sr = spaceRequestOf(target);
    if (!sr) return { kind: 'gone' };
    sr = await addFinalizer(kc, SpaceRequest, sr, DeploymentTargetFinalizer.SpaceRequest);
    const ready = readyCondition(sr);
    if (!ready)
      return { kind: 'error', message: DeploymentTargetMessage.spaceRequestNotReady(sr.metadata.name) };
    if (!sr.metadata.deletionTimestamp) {
      await deleteIfExists(kc, refOfKind(SpaceRequest, sr), { uid: sr.metadata.uid });
      return { kind: 'waiting', requeueAfter: RECHECK_MS };
    }
    if (phaseOf(target) === DeploymentTargetPhase.Failed) return { kind: 'failed', requeueAfter: RECHECK_MS };
    const since = ctx.now().getTime() - Date.parse(sr.metadata.deletionTimestamp);
    if (since > DEPROVISION_TIMEOUT_MS && ready.reason === UNABLE_TO_TERMINATE)
      return { kind: 'failed', requeueAfter: RECHECK_MS };
    return { kind: 'waiting', requeueAfter: RECHECK_MS };
  }

  /** A SpaceRequest whose claim is gone: deleted when every devsandbox class it may come from says Delete. */
  async function cleanUpOrphan(sr: KubeObject, claimName: string, logger: Logger) {
    const className = annotationOf(sr, CLASS_ANNOTATION);
    const classes = deps.classes
      .list()
      .filter(
        (c) =>
          text(specOf(c).provisioner) === ProvisionerName.DevSandbox &&
          (className === undefined || c.metadata.name === className),
      );
    if (classes.length > 0 && classes.every((c) => text(specOf(c).reclaimPolicy) === ReclaimPolicy.Delete)) {
      await deleteIfExists(kc, refOfKind(SpaceRequest, sr), { uid: sr.metadata.uid });
      logger.info(
        { claim: claimName },
        'SpaceRequest of a claim that is gone deleted (reclaim policy Delete)',
      );
    } else {
      logger.warn(
        { claim: claimName },
        'SpaceRequest of a claim that is gone kept: no devsandbox class says Delete',
      );
    }
  }

  /** The DeploymentTarget of a claim, from its Ready SpaceRequest's namespace access; Available at once. */
  async function createTarget(
    claim: ClaimCr,
    sr: KubeObject,
    access: Record<string, unknown>,
  ): Promise<TargetCr> {
    const namespace = sr.metadata.namespace ?? '';
    const claimName = claim.metadata.name;
    const target = await createObject<TargetCr>(kc, Target, namespace, {
      metadata: {
        name: provisionedTargetName(claimName),
        labels: provisionedTargetLabels(ctx.shardLabels, claim),
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
    await setPhase(kc, Target, target, DeploymentTargetPhase.Available);
    return target;
  }

  /** A SpaceRequest event: orphan cleanup, then the target from a Ready SpaceRequest. */
  async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const sr = deps.spaceRequests.get(namespace, name);
    if (!sr || sr.metadata.deletionTimestamp) return undefined;
    const claimName = sr.metadata.labels?.[SpaceRequestLabel.Claim];
    if (!claimName) return undefined;
    const claim = await getObject(
      kc,
      { ...Claim, namespace, name: claimName },
      { parse: kindParser<ClaimCr>(Claim) },
    );
    if (!claim) {
      await cleanUpOrphan(sr, claimName, logger);
      return undefined;
    }
    const access = list(statusOf(sr).namespaceAccess).map(record);
    if (access.length > 1) {
      logger.warn('SpaceRequest with more than one namespaceAccess entry: not supported');
      return undefined;
    }
    if (readyCondition(sr)?.status !== 'True' || access.length === 0) return undefined;
    const labelled = sr.metadata.labels?.[SpaceRequestLabel.Target];
    let target =
      (labelled ? deps.targets.get(namespace, labelled) : undefined) ??
      targetsByClaimRef(namespace, claimName)[0];
    if (!target) {
      target = await createTarget(claim, sr, access[0] ?? {});
      logger.info({ target: target.metadata.name }, 'DeploymentTarget created from the Ready SpaceRequest');
    }
    if (labelled !== target.metadata.name)
      await mergePatch(kc, SpaceRequest, sr, {
        metadata: { labels: { [SpaceRequestLabel.Target]: target.metadata.name } },
      });
    return undefined;
  }

  const controller = newAppStudioController(ctx, 'appstudio-spacerequest')
    .for(deps.spaceRequests)
    // A claim deleted: its SpaceRequest may be an orphan now.
    .watches(
      deps.claims,
      (claim) =>
        byLabel[SpaceRequestLabel.Claim](claim.metadata.namespace, claim.metadata.name).map(objectKey),
      { predicates: [ignoreCreates, ignoreUpdates] },
    )
    .reads(deps.targets, deps.classes)
    .complete(
      quietInTerminatingNamespace(async (key, context) => {
        try {
          return await reconcile(key, context);
        } catch (err) {
          if (isConflict(err)) return { requeue: true };
          throw err;
        }
      }),
    );
  return {
    name: ProvisionerName.DevSandbox,
    informers: controller.informers,
    queue: controller.queue,
    provision,
    deprovision,
    start: controller.start,
    resync: controller.resync,
    stop: controller.stop,
  };
}

/** SpaceRequest events → the target they belong to (label dt, else the target claiming the labelled claim). */
export function targetKeysOfSpaceRequest(sr: KubeObject, targets: Informer<TargetCr>): string[] {
  const namespace = sr.metadata.namespace;
  const labelled = sr.metadata.labels?.[SpaceRequestLabel.Target];
  const claim = sr.metadata.labels?.[SpaceRequestLabel.Claim];
  const found = new Set<KubeObject>(claim ? byClaimRef(targets)(namespace, claim) : []);
  const named = labelled ? targets.get(namespace, labelled) : undefined;
  if (named) found.add(named);
  return [...found].map(objectKey);
}
