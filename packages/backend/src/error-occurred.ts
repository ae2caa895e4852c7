/**
 * The ErrorOccurred condition of GitOpsDeployments and SyncRuns, as the original API has it: `True` with the
 * message while the last reconcile failed, then `False`/`ErrorOccurredResolved`. Writing it (only when the
 * conditions change, guarded by the cached resourceVersion) and telling its transitions as Events is the
 * same for both kinds; which conditions follow from a state is each kind's own.
 */
import type { EventRecorder, KubeCondition, KubeConfig, KubeObject, Logger } from '@gitops/shared';
import { patchStatus } from '@gitops/shared';
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
    reasons: { error: string; resolved: string };
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
    await deps.events.event(kind.withTypeMeta(object), 'Warning', change.reasons.error, state.message);
  } else if (state.status === 'ok' && wasError) {
    await deps.events.event(
      kind.withTypeMeta(object),
      'Normal',
      change.reasons.resolved,
      'The error was resolved',
    );
  }
}
