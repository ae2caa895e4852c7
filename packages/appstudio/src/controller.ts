/**
 * The App Studio controllers are built with @gitops/shared's controller builder (`newController`):
 * `newAppStudioController(ctx, name)` gives the builder with the context's registry, logger and concurrency;
 * `quietInTerminatingNamespace` wraps a reconcile so that a namespace being deleted ends it quietly (nothing
 * can be created there and everything goes anyway; the original checked the namespace's deletionTimestamp
 * first); `againOnConflict` and `requeueIn` are the results a reconcile gives back.
 *
 *   newAppStudioController(ctx, 'appstudio-promotionrun')
 *     .for(promotionRuns, { predicates: [anyOf(relist, generationChanged)] })
 *     .watches(bindings, promotionRunsOfBinding)
 *     .complete(quietInTerminatingNamespace(reconcile));
 */
import {
  type Controller,
  type EventRecorder,
  type ForOptions,
  type Informer,
  isConflict,
  isNamespaceTerminating,
  type KubeConfig,
  type KubeObject,
  newController,
  type ReconcileResult,
  type Reconciler,
} from '@gitops/shared';
import type { AppStudioContext } from './context.ts';

export type AppStudioController = Controller<KubeObject>;

/** `reconcile`, except that a refusal because the namespace is being deleted ends it without an error. */
export function quietInTerminatingNamespace(reconcile: Reconciler): Reconciler {
  return async (key, context) => {
    try {
      return await reconcile(key, context);
    } catch (err) {
      if (isNamespaceTerminating(err)) {
        context.logger.debug({ key }, 'namespace is being deleted; nothing to do');
        return undefined;
      }
      throw err;
    }
  };
}

/** What `step` returns, or a reconcile again at once when it met a conflict (an object changed meanwhile). */
export async function againOnConflict(
  step: () => Promise<ReconcileResult | undefined>,
): Promise<ReconcileResult | undefined> {
  try {
    return await step();
  } catch (err) {
    if (isConflict(err)) return { requeue: true };
    throw err;
  }
}

/** A reconcile again in `ms`, or none when undefined. */
export function requeueIn(ms: number | undefined): ReconcileResult | undefined {
  return ms === undefined ? undefined : { requeueAfter: ms };
}

/** The controller builder of an App Studio controller named `name`: `.for(kind)` next. */
export function newAppStudioController(ctx: AppStudioContext, name: string) {
  const builder = newController(name, { registry: ctx.registry, logger: ctx.logger });
  return {
    for: (informer: Informer<KubeObject>, options?: ForOptions<KubeObject>) =>
      builder.for(informer, options).withOptions({ concurrency: ctx.concurrency }),
  };
}

/**
 * What a reconciler's steps take from the context (each step's `deps` picks what it uses, next to the caches
 * it reads): plain enough that a unit test passes its own (a recorder that keeps the Events, a fixed clock).
 */
export interface StepContext {
  kc: KubeConfig;
  events: Pick<EventRecorder, 'event'>;
  now: () => Date;
  shardLabels: Readonly<Record<string, string>>;
}

/** The step context of `ctx`. */
export function stepContext(ctx: AppStudioContext): StepContext {
  return { kc: ctx.kc, events: ctx.events, now: ctx.now, shardLabels: ctx.shardLabels };
}
