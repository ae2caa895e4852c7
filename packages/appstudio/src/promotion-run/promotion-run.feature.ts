/**
 * PromotionRun: points the binding of (application, target environment) at a snapshot and follows its
 * deployments to a result (README: "PromotionRun"). The wiring: the runs (`for`), what else wakes them
 * (`promotion-run.watches.ts`), the reconcile's steps (`promotion-run.reconciler.ts`).
 */

import type { Informer } from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import type { EnvironmentCr } from '../objects.ts';
import { createPromotionRunReconciler } from './promotion-run.reconciler.ts';
import {
  type PromotionRunWatchDeps,
  promotionRunChanged,
  watchPromotionRunSources,
} from './promotion-run.watches.ts';

export interface PromotionRunFeatureDeps extends PromotionRunWatchDeps {
  environments: Informer<EnvironmentCr>;
}

export function createPromotionRunFeature(
  ctx: AppStudioContext,
  deps: PromotionRunFeatureDeps,
): AppStudioController {
  const builder = newAppStudioController(ctx, 'appstudio-promotionrun')
    .for(deps.promotionRuns, { predicates: [promotionRunChanged] })
    .reads(deps.environments);
  const reconcile = createPromotionRunReconciler(ctx, deps);
  return watchPromotionRunSources(builder, deps).complete(quietInTerminatingNamespace(reconcile));
}
