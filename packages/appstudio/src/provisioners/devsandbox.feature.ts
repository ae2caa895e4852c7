/**
 * The `appstudio.redhat.com/devsandbox` provisioner (README: "Provisioners"): a Pending claim of such a class
 * gets a SpaceRequest for the Dev Sandbox host operator; a Ready SpaceRequest becomes the claim's
 * DeploymentTarget; deprovisioning deletes the SpaceRequest. The wiring: the SpaceRequests (`for`), what else
 * wakes them (`devsandbox.watches.ts`), the steps (`devsandbox.reconciler.ts`), and the provisioner the binder
 * and the reclaimer call.
 */
import { Provisioner as ProvisionerName } from '@gitops/api';
import type { Feature, Informer, KubeObject, WorkQueue } from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import { newAppStudioController, quietInTerminatingNamespace } from '../controller.ts';
import { byClaimRef } from '../indexes.ts';
import {
  createSpaceRequestReconciler,
  deprovisionSpaceRequest,
  devSandboxDeps,
  provisionSpaceRequest,
} from './devsandbox.reconciler.ts';
import {
  type DevSandboxWatchDeps,
  spaceRequestsByLabel,
  watchDevSandboxSources,
} from './devsandbox.watches.ts';
import type { Provisioner } from './provisioner.ts';

export interface DevSandboxProvisioner extends Provisioner, Feature {
  /** The SpaceRequest queue (tests wait for it to be idle). */
  readonly queue: WorkQueue;
}

export interface DevSandboxFeatureDeps extends DevSandboxWatchDeps {
  spaceRequests: Informer<KubeObject>;
  /** DEV_ONLY_IGNORE_SELFSIGNED_CERT_IN_DEPLOYMENT_TARGET: provisioned targets skip TLS verification. */
  allowInsecureSkipTLSVerify?: boolean;
}

export function createDevSandboxProvisioner(
  ctx: AppStudioContext,
  deps: DevSandboxFeatureDeps,
): DevSandboxProvisioner {
  const steps = devSandboxDeps(
    ctx,
    {
      spaceRequests: deps.spaceRequests,
      spaceRequestsOf: spaceRequestsByLabel(deps.spaceRequests),
      targets: deps.targets,
      targetsByClaimRef: byClaimRef(deps.targets),
      classes: deps.classes,
    },
    deps.allowInsecureSkipTLSVerify,
  );
  const builder = newAppStudioController(ctx, 'appstudio-spacerequest').for(deps.spaceRequests);
  const controller = watchDevSandboxSources(builder, deps).complete(
    quietInTerminatingNamespace(createSpaceRequestReconciler(steps)),
  );
  return {
    name: ProvisionerName.DevSandbox,
    informers: controller.informers,
    queue: controller.queue,
    provision: (claim, deploymentTargetClass, logger) =>
      provisionSpaceRequest(steps, claim, deploymentTargetClass, logger),
    deprovision: (target) => deprovisionSpaceRequest(steps, target),
    start: controller.start,
    resync: controller.resync,
    stop: controller.stop,
  };
}
