/**
 * The compact projection of an Argo CD Application's status stored in `application_state.state`
 * (docs/contracts/core-pipeline.md, "Status path"). Pure and total: a malformed status yields defaults,
 * never an exception.
 */
import type { JsonValue } from '@gitops/db';

type JsonObject = { [key: string]: JsonValue };

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function text(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : fallback;
}

/** A JSON-safe deep copy (drops undefined, functions, non-finite numbers). */
function json(value: unknown): JsonValue | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (Array.isArray(value)) return value.map((item) => json(item) ?? null);
  if (typeof value === 'object') {
    const out: JsonObject = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      const copied = json(item);
      if (copied !== undefined) out[key] = copied;
    }
    return out;
  }
  return undefined;
}

function health(value: unknown): JsonObject {
  const h = record(value);
  const out: JsonObject = { status: text(h.status, 'Unknown') };
  if (typeof h.message === 'string' && h.message !== '') out.message = h.message;
  return out;
}

/** The Argo CD `status.operationState` fields we copy. */
const operationStateFields = [
  'operation',
  'phase',
  'message',
  'syncResult',
  'startedAt',
  'finishedAt',
  'retryCount',
] as const;

/** One source Argo CD compared against: repoURL, path, targetRevision, and chart when it has one. */
function comparedSourceOf(source: Record<string, unknown>): JsonObject {
  const compared: JsonObject = {
    repoURL: text(source.repoURL),
    path: text(source.path),
    targetRevision: text(source.targetRevision),
  };
  if (typeof source.chart === 'string' && source.chart !== '') compared.chart = source.chart;
  return compared;
}

/**
 * Projects an Argo CD Application (as read from the API server) to the stored state:
 * `sync`, `health`, `resources` (health only where Argo CD has one), `reconciledState` (from
 * `status.sync.comparedTo`), `operationState` (absent when Argo CD has none) and `conditions` (type, message).
 */
export function projectApplicationState(
  application: unknown,
  options: {
    /** Conditions Argo CD reports that are not (yet) a verdict on the user's input (see projectCacheLag). */
    ignoreCondition?: (condition: { type: string; message: string }) => boolean;
  } = {},
): JsonObject {
  const status = record(record(application).status);
  const sync = record(status.sync);
  const comparedTo = record(sync.comparedTo);
  const comparedSource = record(comparedTo.source);
  const comparedDestination = record(comparedTo.destination);

  const resources: JsonValue[] = (Array.isArray(status.resources) ? status.resources : []).map((item) => {
    const r = record(item);
    const resource: JsonObject = {
      group: text(r.group),
      version: text(r.version),
      kind: text(r.kind),
      namespace: text(r.namespace),
      name: text(r.name),
      status: text(r.status),
    };
    if (r.health !== undefined && r.health !== null) resource.health = health(r.health);
    return resource;
  });

  // Several sources: Argo CD reports one revision per source, in the order of spec.sources.
  const revisions = Array.isArray(sync.revisions) ? sync.revisions.map((r) => text(r)) : [];
  const projection: JsonObject = {
    sync: {
      status: text(sync.status, 'Unknown'),
      revision: text(sync.revision),
      ...(revisions.length > 0 ? { revisions } : {}),
    },
    health: health(status.health),
    resources,
    reconciledState: {
      source: comparedSourceOf(comparedSource),
      ...(Array.isArray(comparedTo.sources) && comparedTo.sources.length > 0
        ? { sources: comparedTo.sources.map((item) => comparedSourceOf(record(item))) }
        : {}),
      destination: { name: text(comparedDestination.name), namespace: text(comparedDestination.namespace) },
    },
    conditions: (Array.isArray(status.conditions) ? status.conditions : [])
      .map((item) => {
        const c = record(item);
        return { type: text(c.type), message: text(c.message) };
      })
      .filter((c) => !options.ignoreCondition?.(c)),
  };

  if (status.operationState !== undefined && status.operationState !== null) {
    const source = record(status.operationState);
    const operationState: JsonObject = {};
    for (const field of operationStateFields) {
      const copied = json(source[field]);
      if (copied !== undefined) operationState[field] = copied;
    }
    projection.operationState = operationState;
  }
  return projection;
}

/** How long after its AppProject was created an Application's "project does not exist" is Argo CD's cache lag. */
export const PROJECT_CACHE_GRACE_MS = 60_000;

const MISSING_PROJECT = /^Application referencing project (\S+) which does not exist/;

/**
 * Whether `condition` is Argo CD judging an Application before its own cache has the AppProject the agent
 * created just before it (a new tenant's first Application, under load): `InvalidSpecError` naming the
 * Application's project, while that project exists and is younger than PROJECT_CACHE_GRACE_MS. Returns
 * the milliseconds the grace still lasts (0: not cache lag, report it).
 */
export function projectCacheLag(
  condition: { type: string; message: string },
  application: unknown,
  project: { createdAt: string | undefined } | undefined,
  now: number,
): number {
  if (condition.type !== 'InvalidSpecError' || !project?.createdAt) return 0;
  const named = MISSING_PROJECT.exec(condition.message)?.[1];
  if (named === undefined || named !== text(record(record(application).spec).project)) return 0;
  const created = Date.parse(project.createdAt);
  if (Number.isNaN(created)) return 0;
  return Math.max(0, created + PROJECT_CACHE_GRACE_MS - now);
}
