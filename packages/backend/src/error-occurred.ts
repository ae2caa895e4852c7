/**
 * The ErrorOccurred condition of GitOpsDeployments and SyncRuns, as the original API has it: `True` with the
 * message while the last reconcile failed, then `False`/`ErrorOccurredResolved`. Writing it (only when the
 * conditions change, guarded by the cached resourceVersion) and telling its transitions as Events is the
 * same for both kinds; which conditions follow from a state is each kind's own.
 */
import { GitOpsDeploymentMessage } from '@gitops/api';
import type { EventRecorder, KubeCondition, KubeConfig, KubeObject, Logger } from '@gitops/shared';
import { isConflict, patchStatus } from '@gitops/shared';
import { jsonEqual } from './json.ts';
import { BACKEND_FIELD_MANAGER, type CrKindDescriptor } from './kinds.ts';

export type ErrorState = { status: 'error'; message: string } | { status: 'ok' };

/** Patches `next` over `conditions` when they differ; a new or changed error is a Warning, its end a Normal Event. */
export async function writeErrorConditions(
  deps: { kc: KubeConfig; events: EventRecorder },
  kind: CrKindDescriptor,
  object: KubeObject,
  change: {
    conditions: readonly KubeCondition[];
    next: readonly KubeCondition[];
    /** The ErrorOccurred condition before the change. */
    existing: KubeCondition | undefined;
    state: ErrorState;
    /** The kind's Event reasons (its `…EventReason` in @gitops/api). */
    reasons: { ErrorOccurred: string; ErrorOccurredResolved: string };
    /** Other status fields that changed, written in the same patch (null removes one). */
    alsoStatus?: Record<string, unknown>;
  },
  logger: Logger,
): Promise<void> {
  const { existing, state } = change;
  const alsoStatus = change.alsoStatus ?? {};
  if (jsonEqual(change.next, change.conditions) && Object.keys(alsoStatus).length === 0) return;
  await patchStatus(
    deps.kc,
    kind.ref(object),
    {
      metadata: { resourceVersion: object.metadata.resourceVersion },
      status: { ...alsoStatus, conditions: change.next },
    },
    { fieldManager: BACKEND_FIELD_MANAGER },
  );
  const wasError = existing?.status === 'True';
  if (state.status === 'error' && (!wasError || existing?.message !== state.message)) {
    logger.info({ message: state.message }, 'ErrorOccurred');
    await deps.events.event(
      kind.withTypeMeta(object),
      'Warning',
      change.reasons.ErrorOccurred,
      state.message,
    );
  } else if (state.status === 'ok' && wasError) {
    await deps.events.event(
      kind.withTypeMeta(object),
      'Normal',
      change.reasons.ErrorOccurredResolved,
      'The error was resolved',
    );
  }
}

/**
 * A reconcile of `object` failed with `err`: say so in its ErrorOccurred condition (the API's UnknownError
 * message) through the kind's `write`, unless the failure is routine (a stale resourceVersion: the cache
 * lags our own writes; retried quietly), the reconcile was cancelled, or the object is gone. The work queue
 * logs the failure itself (at error level only when it is not routine or persists); a failed report is a
 * warning only.
 */
export async function reportUnknownError<T extends KubeObject>(
  object: T | undefined,
  err: unknown,
  context: { signal: AbortSignal; logger: Logger },
  write: (object: T, state: ErrorState, logger: Logger) => Promise<unknown>,
): Promise<void> {
  if (!object || isConflict(err) || context.signal.aborted) return;
  await write(
    object,
    { status: 'error', message: GitOpsDeploymentMessage.UnknownError },
    context.logger,
  ).catch((statusErr: unknown) =>
    context.logger.warn({ err: statusErr }, 'could not report the error in ErrorOccurred'),
  );
}
