/**
 * The controller of one RHOAS kind, built with @gitops/shared's controller builder: the kind's informer wakes
 * it on creates, deletes and generation changes (the `generationChanged` predicate: the operator's own status
 * and label writes do not bump the generation, so they never re-trigger it, as the original's
 * generation-aware processing). A reconcile:
 *
 * 1. the gate: nothing to do when Finished is True for the current generation;
 * 2. the labels step (KafkaConnection, ServiceRegistryConnection): adds `app.kubernetes.io/component=
 *    external-service` and `managed-by=rhoas` when `component` is absent;
 * 3. the kind's processing (validation, token, calls, Secrets), recording conditions step by step;
 * 4. one status merge patch when the status changed, and an Event when Finished changed;
 * 5. a transient failure (network, no answer, 5xx, 429) is retried with capped exponential backoff
 *    (RHOAS_RETRY_INITIAL doubling to RHOAS_RETRY_MAX); other failures wait for a spec change.
 */

import {
  type RhoasCondition,
  RhoasConditionsOf,
  RhoasConditionType,
  RhoasEventReason,
  RhoasLabel,
  type RhoasObject,
  RhoasReason,
} from '@gitops/api';
import {
  backoffDelay,
  type Controller,
  createInformer,
  generationChanged,
  jsonEqual,
  kindParser,
  mergePatch,
  newController,
  patchStatus,
  type Reconciler,
  type Registry,
  refOfKind,
  scrubString,
  splitObjectKey,
} from '@gitops/shared';
import type { KindProcessor, RhoasContext, RhoasCr } from './processing.ts';
import { createProgress, StepFailure, shouldProcess } from './progress.ts';

export type RhoasKindFeature<T extends RhoasObject = RhoasObject> = Controller<RhoasCr<T>>;

export function createRhoasKindFeature<T extends RhoasObject>(
  ctx: RhoasContext,
  processor: KindProcessor<T>,
  options: { registry: Registry },
): RhoasKindFeature<T> {
  const { kind } = processor;
  const name = kind.kind.toLowerCase();
  const logger = ctx.logger.child({ controller: name });
  const informer = createInformer<RhoasCr<T>>({
    parse: kindParser<RhoasCr<T>>(kind),
    kubeConfig: ctx.kc,
    resource: kind.resource,
    namespace: ctx.config.watchNamespace,
    registry: options.registry,
    logger,
    resyncPeriodMs: ctx.config.resyncSeconds * 1000,
  });
  /** Consecutive transient failures of the current incarnation and generation of each key. */
  const attempts = new Map<string, { of: string; count: number }>();

  async function addLabels(object: RhoasCr<T>, signal: AbortSignal) {
    const labels = object.metadata.labels ?? {};
    if (RhoasLabel.component in labels) return;
    await mergePatch(
      ctx.kc,
      refOfKind(kind, object),
      {
        metadata: {
          labels: {
            [RhoasLabel.component]: RhoasLabel.componentValue,
            [RhoasLabel.managedBy]: RhoasLabel.managedByValue,
          },
        },
      },
      { fieldManager: ctx.config.fieldManager, signal },
    );
  }

  /**
   * Step 3: the kind's processing, conditions recorded step by step. A failed processing keeps the status
   * fields of the last success (e.g. the lists of a CloudServicesRequest): only the conditions change.
   */
  async function processObject(object: RhoasCr<T>, signal: AbortSignal) {
    const progress = createProgress(RhoasConditionsOf[processor.kind.kind]);
    const { conditions: previous, ...current } = object.status ?? {};
    const status: Record<string, unknown> = structuredClone(current);
    let failure: StepFailure | undefined;
    /** A Kubernetes error (e.g. a forbidden Secret read): shown on Finished, then retried by the queue. */
    let unexpected: unknown;
    try {
      await processor.process(ctx, { object, progress, status, signal });
      progress.finish();
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof StepFailure) failure = err;
      else {
        unexpected = err;
        // Scrubbed: an unexpected error's text may quote what it choked on (a header value, an argument).
        const message = scrubString(err instanceof Error ? err.message : String(err));
        failure = new StepFailure(
          RhoasConditionType.Finished,
          RhoasReason.KubernetesError,
          message.slice(0, 1024),
        );
      }
      progress.record(failure);
    }
    const generation = object.metadata.generation ?? 1;
    const next = {
      ...(failure ? current : status),
      conditions: progress.conditions(previous, generation, ctx.now()),
    };
    return { next, previous, failure, unexpected };
  }

  /** Step 4: one status merge patch when the status changed, and an Event when Finished changed. */
  async function writeStatus(
    object: RhoasCr<T>,
    next: { conditions: RhoasCondition[] },
    previous: readonly RhoasCondition[] | undefined,
    signal: AbortSignal,
  ) {
    if (jsonEqual(next, object.status ?? {})) return;
    await patchStatus(
      ctx.kc,
      refOfKind(kind, object),
      { status: next },
      { fieldManager: ctx.config.fieldManager, signal },
    );
    const before = previous?.find((c) => c.type === RhoasConditionType.Finished);
    const after = next.conditions.find((c) => c.type === RhoasConditionType.Finished);
    if (!after || (before?.status === after.status && before?.message === after.message)) return;
    if (after.status === 'True')
      await ctx.events.event(object, 'Normal', RhoasEventReason.Finished, `${kind.kind} processed`);
    else
      await ctx.events.event(object, 'Warning', RhoasEventReason.Failed, `${after.reason}: ${after.message}`);
  }

  /** Step 5: the delay before a transient failure of this incarnation and generation is retried. */
  function retryDelay(key: string, incarnation: string): number {
    const previousAttempts = attempts.get(key);
    const attempt = previousAttempts?.of === incarnation ? previousAttempts.count + 1 : 1;
    attempts.set(key, { of: incarnation, count: attempt });
    return backoffDelay(attempt, ctx.config.retryInitialMs, ctx.config.retryMaxMs);
  }

  const reconcile: Reconciler = async (key, { signal, logger: log }) => {
    const { namespace, name: objectName } = splitObjectKey(key);
    const cached = informer.get(namespace, objectName);
    if (!cached) {
      attempts.delete(key);
      return;
    }
    if (!shouldProcess(cached)) return;
    const object = cached;
    const generation = object.metadata.generation ?? 1;
    if (processor.addsLabels) await addLabels(object, signal);
    const { next, previous, failure, unexpected } = await processObject(object, signal);
    await writeStatus(object, next, previous, signal);
    if (unexpected) throw unexpected;
    if (failure) {
      log.info(
        { condition: failure.condition, reason: failure.reason, transient: failure.transient },
        failure.message,
      );
      if (failure.transient) return { requeueAfter: retryDelay(key, `${cached.metadata.uid}/${generation}`) };
    } else {
      log.info({ generation }, `${kind.kind} processed`);
    }
    attempts.delete(key);
    return undefined;
  };

  return newController(name, { registry: options.registry, logger })
    .for<RhoasCr<T>>(informer, { predicates: [generationChanged] })
    .withOptions({ concurrency: ctx.config.maxConcurrentReconciles })
    .complete(reconcile);
}
