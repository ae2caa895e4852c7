/**
 * What wakes the PromotionRun controller, each source mapped to run keys through the runs' application index:
 * - the run itself: created, deleted, its spec, a relist (our own status writes do not);
 * - another run of the same application whose state changed or that was deleted (the next run may start);
 * - a binding of its application created or changed (its deployments' verdicts, its render state).
 */
import { PromotionRunState } from '@gitops/api';
import {
  anyOf,
  type ControllerBuilder,
  generationChanged,
  type Informer,
  ignoreCreates,
  ignoreDeletes,
  type KubeObject,
  objectKey,
  type Predicate,
  relist,
  statusFieldsChanged,
} from '@gitops/shared';
import { byApplication } from '../indexes.ts';
import { applicationOf, type BindingCr, type PromotionRunCr, statusOf, text } from '../objects.ts';

export interface PromotionRunWatchDeps {
  promotionRuns: Informer<PromotionRunCr>;
  bindings: Informer<BindingCr>;
}

/** Which updates of a run need a reconcile. */
export const promotionRunChanged: Predicate = anyOf(relist, generationChanged);

export const isComplete = (run: KubeObject): boolean =>
  text(statusOf(run).state) === PromotionRunState.Complete;

/** Adds the PromotionRun controller's sources besides the runs themselves (`for`). */
export function watchPromotionRunSources(
  builder: ControllerBuilder<KubeObject>,
  deps: PromotionRunWatchDeps,
): ControllerBuilder<KubeObject> {
  const runsOfApplication = byApplication(deps.promotionRuns);
  const activeRuns = (object: KubeObject) =>
    runsOfApplication(object.metadata.namespace, applicationOf(object)).filter((r) => !isComplete(r));
  return builder
    .watches(
      deps.promotionRuns,
      (run) =>
        activeRuns(run)
          .filter((r) => r.metadata.name !== run.metadata.name)
          .map(objectKey),
      { predicates: [ignoreCreates, statusFieldsChanged('state')] },
    )
    .watches(deps.bindings, (binding) => activeRuns(binding).map(objectKey), { predicates: [ignoreDeletes] });
}
