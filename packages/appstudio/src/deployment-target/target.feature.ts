/**
 * DeploymentTarget controller, the reclaimer (README: "DeploymentTarget"). The wiring: the targets (`for`),
 * what else wakes them (`target.watches.ts`), the reconcile's steps (`target.reconciler.ts`).
 */
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import type { Provisioner } from '../provisioners/provisioner.ts';
import { createTargetReconciler } from './target.reconciler.ts';
import { type TargetWatchDeps, targetChanged, watchTargetSources } from './target.watches.ts';

export interface TargetFeatureDeps extends TargetWatchDeps {
  provisioners: readonly Provisioner[];
}

export function createTargetFeature(ctx: AppStudioContext, deps: TargetFeatureDeps): AppStudioController {
  const builder = newAppStudioController(ctx, 'appstudio-deploymenttarget').for(deps.targets, {
    predicates: [targetChanged],
  });
  const reconcile = createTargetReconciler(ctx, deps);
  return watchTargetSources(builder, deps).complete(quietInTerminatingNamespace(reconcile));
}
