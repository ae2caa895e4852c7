/**
 * The status path's pure part: the agent's `application_state` projection → the GitOpsDeployment
 * status fields the status path owns (sync, health, resources, reconciledState, operationState and the
 * Argo CD conditions passed through). `ErrorOccurred` belongs to the reconciler and is copied unchanged.
 *
 * Size: `resources` is capped at RESOURCES_LIMIT entries; when the agent reports more, the condition
 * `ResourcesTruncated`/True/`ResourcesTruncated` says how many were left out, and it becomes
 * `False`/`ResourcesTruncatedResolved`/"" once the list fits again.
 */
import {
  ConditionStatus,
  type GitOpsDeploymentCondition,
  GitOpsDeploymentConditionType,
  resolvedReason,
  SyncEventReason,
} from '@gitops/api';
import { jsonField, setCondition } from '@gitops/shared';
import { z } from 'zod';
import { createMergePatch, isJsonObject, type JsonObject, type JsonValue, normalizeJson } from '../json.ts';

/** At most this many `status.resources` entries (~200 bytes each: ~100 KiB, far below the 1.5 MiB limit). */
export const RESOURCES_LIMIT = 500;
/** Condition type set while `status.resources` is truncated. */
export const RESOURCES_TRUNCATED_CONDITION = 'ResourcesTruncated';
const MAX_MESSAGE_LENGTH = 8192;

/** The status fields the status path writes (everything else in `status` is left alone). */
export const STATUS_PATH_FIELDS = [
  'engineInstance',
  'sync',
  'health',
  'resources',
  'reconciledState',
  'operationState',
  'conditions',
] as const;

const text = z.string().catch('');
const optionalText = z.string().optional().catch(undefined);
const health = z.object({ status: text, message: optionalText });

const resourceSchema = z.object({
  group: optionalText,
  version: optionalText,
  kind: optionalText,
  namespace: optionalText,
  name: optionalText,
  status: optionalText,
  health: health.optional().catch(undefined),
});

const comparedSource = z.object({
  repoURL: optionalText,
  path: optionalText,
  targetRevision: optionalText,
  chart: z.string().optional().catch(undefined),
});
type ComparedSource = z.infer<typeof comparedSource>;
/** A compared source as users see it: Argo CD's targetRevision is `branch` (the original API's name). */
const comparedSourceStatus = (source: ComparedSource) => ({
  path: source.path,
  repoURL: source.repoURL,
  branch: source.targetRevision,
  ...(source.chart ? { chart: source.chart } : {}),
});

/** Each field is parsed on its own: one malformed field is dropped, the rest still shows. */
export const applicationStateSchema = z.object({
  sync: z
    .object({
      status: text,
      revision: optionalText,
      revisions: z.array(z.string()).optional().catch(undefined),
    })
    .optional()
    .catch(undefined),
  health: health.optional().catch(undefined),
  resources: z
    .array(z.unknown())
    .transform((items) =>
      items.flatMap((item) => {
        const parsed = resourceSchema.safeParse(item);
        return parsed.success ? [parsed.data] : [];
      }),
    )
    .optional()
    .catch(undefined),
  reconciledState: z
    .object({
      source: comparedSource.optional().catch(undefined),
      sources: z.array(comparedSource).optional().catch(undefined),
      destination: z.object({ name: optionalText, namespace: optionalText }).optional().catch(undefined),
    })
    .optional()
    .catch(undefined),
  operationState: z.record(z.string(), z.unknown()).optional().catch(undefined),
  conditions: z
    .array(z.unknown())
    .transform((items) =>
      items.flatMap((item) => {
        const parsed = z.object({ type: z.string().min(1), message: z.string().catch('') }).safeParse(item);
        return parsed.success ? [parsed.data] : [];
      }),
    )
    .optional()
    .catch(undefined),
});
export type ApplicationStateProjection = z.infer<typeof applicationStateSchema>;

/** Parses a stored projection; never throws (a non-object becomes an empty projection). */
export function parseApplicationState(raw: unknown): ApplicationStateProjection {
  const parsed = applicationStateSchema.safeParse(isJsonObject(raw) ? raw : {});
  return parsed.success ? parsed.data : {};
}

/** `managed-env-<id>` → `<id>`, for names of Argo CD clusters we created. */
export function managedEnvironmentIdOf(destinationName: string): string | undefined {
  const match = /^managed-env-([0-9a-f-]{36})$/.exec(destinationName);
  return match?.[1];
}

function bounded(message: string): string {
  return message.length > MAX_MESSAGE_LENGTH ? `${message.slice(0, MAX_MESSAGE_LENGTH - 3)}...` : message;
}

export interface DesiredStatusContext {
  /** The GitOpsDeployment's current conditions (ErrorOccurred is kept as is). */
  currentConditions: readonly GitOpsDeploymentCondition[];
  /**
   * `reconciledState.destination.name` as users see it: "" for in-cluster, the ManagedEnvironment CR name
   * for `managed-env-<id>` (resolved by the caller), "" when unknown.
   */
  destinationName: string;
  /** The name of the engine instance the application is on (the tenant's placement). */
  engineInstance?: string;
  now: Date;
  resourcesLimit?: number;
}

/** The status fields computed from a projection (absent fields are removed from the status). */
export function desiredStatus(state: ApplicationStateProjection, context: DesiredStatusContext): JsonObject {
  const limit = context.resourcesLimit ?? RESOURCES_LIMIT;
  const status: Record<string, unknown> = {};
  if (context.engineInstance) status.engineInstance = context.engineInstance;
  if (state.sync) {
    // With spec.sources, one revision per source (Argo CD's status.sync.revisions).
    status.sync = {
      status: state.sync.status,
      revision: state.sync.revision,
      ...(state.sync.revisions ? { revisions: state.sync.revisions } : {}),
    };
  }
  if (state.health) status.health = { status: state.health.status, message: state.health.message };
  const resources = state.resources;
  if (resources) {
    status.resources = resources.slice(0, limit).map((r) => ({
      ...r,
      health: r.health
        ? { status: r.health.status, message: r.health.message && bounded(r.health.message) }
        : undefined,
    }));
  }
  if (state.reconciledState) {
    const { source, sources, destination } = state.reconciledState;
    status.reconciledState = {
      source: source && comparedSourceStatus(source),
      ...(sources ? { sources: sources.map(comparedSourceStatus) } : {}),
      destination: destination && { name: context.destinationName, namespace: destination.namespace },
    };
  }
  if (state.operationState) status.operationState = state.operationState;

  let conditions = [...context.currentConditions];
  const reported = new Map<string, string[]>();
  for (const c of state.conditions ?? []) {
    // The pass-through never touches the reconciler's condition or our own truncation condition.
    if (c.type === GitOpsDeploymentConditionType.ErrorOccurred || c.type === RESOURCES_TRUNCATED_CONDITION)
      continue;
    reported.set(c.type, [...(reported.get(c.type) ?? []), c.message]);
  }
  for (const [type, messages] of reported) {
    conditions = setCondition(
      conditions,
      { type, status: ConditionStatus.True, reason: type, message: bounded(messages.join('; ')) },
      context.now,
    );
  }
  for (const c of context.currentConditions) {
    if (c.type === GitOpsDeploymentConditionType.ErrorOccurred || c.type === RESOURCES_TRUNCATED_CONDITION)
      continue;
    if (reported.has(c.type)) continue;
    conditions = setCondition(
      conditions,
      { type: c.type, status: ConditionStatus.False, reason: resolvedReason(c.type), message: '' },
      context.now,
    );
  }
  const total = resources?.length ?? 0;
  if (total > limit) {
    conditions = setCondition(
      conditions,
      {
        type: RESOURCES_TRUNCATED_CONDITION,
        status: ConditionStatus.True,
        reason: RESOURCES_TRUNCATED_CONDITION,
        message: `status.resources lists the first ${limit} of ${total} resources`,
      },
      context.now,
    );
  } else if (conditions.some((c) => c.type === RESOURCES_TRUNCATED_CONDITION)) {
    conditions = setCondition(
      conditions,
      {
        type: RESOURCES_TRUNCATED_CONDITION,
        status: ConditionStatus.False,
        reason: resolvedReason(RESOURCES_TRUNCATED_CONDITION),
        message: '',
      },
      context.now,
    );
  }
  if (conditions.length > 0) status.conditions = conditions;
  return (normalizeJson(status) as JsonObject | undefined) ?? {};
}

/**
 * The merge patch of `status` that makes the status path's fields equal `desired`; `undefined` when
 * nothing differs (no write).
 */
export function statusPatch(
  currentStatus: { readonly [F in (typeof STATUS_PATH_FIELDS)[number]]?: unknown },
  desired: JsonObject,
): JsonValue | undefined {
  const current: Record<string, unknown> = {};
  for (const field of STATUS_PATH_FIELDS)
    if (currentStatus[field] !== undefined) current[field] = currentStatus[field];
  return createMergePatch(current, desired);
}

export interface SyncEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/**
 * The Event for an Argo CD sync that failed between two `operationState`s (a run is identified by
 * `startedAt`), or `undefined`. Only a failure is an Event: it is what a user acts on. A run's start and its
 * success are in the status (`operationState`, `sync`, `health`) as they happen; as Events they were two of
 * the API writes each change cost on top of Argo CD's own (docs/performance.md, "On top of Argo CD alone").
 */
export function syncTransitionEvent(previous: unknown, next: unknown): SyncEvent | undefined {
  const phase = jsonField(next, 'phase');
  if (phase !== 'Failed' && phase !== 'Error') return undefined;
  const sameRun = jsonField(previous, 'startedAt') === jsonField(next, 'startedAt');
  if (sameRun && jsonField(previous, 'phase') === phase) return undefined;
  const revision =
    jsonField(next, 'syncResult', 'revision') ?? jsonField(next, 'operation', 'sync', 'revision');
  const atRevision = typeof revision === 'string' && revision !== '' ? ` at revision ${revision}` : '';
  const message = jsonField(next, 'message');
  const detail = typeof message === 'string' && message !== '' ? `: ${bounded(message)}` : '';
  return {
    type: 'Warning',
    reason: SyncEventReason.SyncFailed,
    message: `Argo CD sync failed${atRevision}${detail}`,
  };
}
