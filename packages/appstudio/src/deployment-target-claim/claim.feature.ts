/**
 * DeploymentTargetClaim controller, the binder (README: "DeploymentTargetClaim"). The wiring: the claims
 * (`for`), what else wakes them (`claim.watches.ts`), the reconcile's steps (`claim.reconciler.ts`).
 */
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import type { Provisioner } from '../provisioners/provisioner.ts';
import { createClaimReconciler } from './claim.reconciler.ts';
import { type ClaimWatchDeps, claimChanged, watchClaimSources } from './claim.watches.ts';

export interface ClaimFeatureDeps extends ClaimWatchDeps {
  provisioners: readonly Provisioner[];
}

export function createClaimFeature(ctx: AppStudioContext, deps: ClaimFeatureDeps): AppStudioController {
  const builder = newAppStudioController(ctx, 'appstudio-deploymenttargetclaim').for(deps.claims, {
    predicates: [claimChanged],
  });
  const reconcile = createClaimReconciler(ctx, deps);
  return watchClaimSources(builder, deps).complete(quietInTerminatingNamespace(reconcile));
}
