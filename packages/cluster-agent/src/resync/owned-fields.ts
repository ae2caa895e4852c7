/**
 * Drift detection on the fields we own only, so the agent never fights Argo CD (status, operation) or
 * another tool over fields it does not declare. Pure.
 */
import { jsonEqual, type KubeObject } from '@gitops/shared';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * True when everything `desired` declares is in `live` with the same value: objects compare as a subset
 * (extra live keys are someone else's), arrays element by element with the same length, scalars exactly.
 */
export function containsDeclared(live: unknown, desired: unknown): boolean {
  if (Array.isArray(desired)) {
    return (
      Array.isArray(live) &&
      live.length === desired.length &&
      desired.every((item, index) => containsDeclared(live[index], item))
    );
  }
  if (isRecord(desired)) {
    if (!isRecord(live)) return false;
    return Object.entries(desired).every(([key, value]) =>
      value === undefined ? true : containsDeclared(live[key], value),
    );
  }
  return live === desired;
}

export interface OwnedFieldsComparison {
  /** True when the live object must be re-applied (or patched). */
  drifted: boolean;
  /**
   * Spec fields (dotted paths: `syncPolicy`, `source.helm`) we own but do not declare for this object that are
   * set on the live object (e.g. a `syncPolicy` added to a manual Application by hand): apply cannot remove
   * fields another manager owns, so the caller removes them with a merge patch.
   */
  unexpectedSpecFields: string[];
}

/** The value at a dotted path of `object` (undefined when a step is missing). */
export function valueAtPath(object: unknown, path: string): unknown {
  let value: unknown = object;
  for (const step of path.split('.')) value = isRecord(value) ? value[step] : undefined;
  return value;
}

/** Members of `live` that `declared` does not have, at any depth, as a merge patch nulling them (objects only). */
function undeclaredMembers(live: unknown, declared: unknown): Record<string, unknown> | undefined {
  if (!isRecord(live) || !isRecord(declared)) return undefined;
  const patch: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(live)) {
    if (value === null || value === undefined) continue;
    const wanted = declared[key];
    const member = wanted === undefined || wanted === null ? null : undeclaredMembers(value, wanted);
    if (member !== undefined) patch[key] = member;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/**
 * The merge patch of `spec` that removes what `liveSpec` has in the sections we own (`ownedSpecFields`, dotted
 * paths) and `desiredSpec` does not declare, at any depth: a section we do not declare at all, or a member of
 * one we do (a Helm value, a `targetRevision` the row no longer has); undefined when there is none. Arrays are
 * compared whole (an apply replaces them). Meant for what a write returned: members only another field manager
 * owns, or the entry of the create that made the object (`createObject`), outlive an apply that leaves them out.
 */
export function undeclaredOwnedPatch(
  liveSpec: unknown,
  desiredSpec: unknown,
  ownedSpecFields: readonly string[],
): Record<string, unknown> | undefined {
  const patch: Record<string, unknown> = {};
  const covered = (path: string) => ownedSpecFields.some((other) => path.startsWith(`${other}.`));
  for (const path of ownedSpecFields.filter((p) => !covered(p))) {
    const live = valueAtPath(liveSpec, path);
    if (live === undefined || live === null) continue;
    const declared = valueAtPath(desiredSpec, path);
    const removal = declared === undefined || declared === null ? null : undeclaredMembers(live, declared);
    if (removal === undefined) continue;
    const steps = path.split('.');
    let at = patch;
    for (const step of steps.slice(0, -1)) {
      const next = isRecord(at[step]) ? (at[step] as Record<string, unknown>) : {};
      at[step] = next;
      at = next;
    }
    at[steps.at(-1)!] = removal;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}

/**
 * Compares the fields we own: our labels, our finalizers, and `spec` (declared values, plus `ownedSpecFields`,
 * dotted paths that are wholly ours: absent when we do not declare them, exactly as declared when we do, so a
 * member the row dropped from a section it keeps, e.g. one of `source.helm`'s `valueFiles`, is drift that
 * the apply removes).
 */
export function compareOwnedFields(
  live: KubeObject | undefined,
  desired: KubeObject,
  ownedSpecFields: readonly string[],
): OwnedFieldsComparison {
  if (!live) return { drifted: true, unexpectedSpecFields: [] };
  const liveSpec = isRecord(live.spec) ? live.spec : {};
  const desiredSpec = isRecord(desired.spec) ? desired.spec : {};
  const unexpectedSpecFields = ownedSpecFields.filter((field) => {
    const live = valueAtPath(liveSpec, field);
    return valueAtPath(desiredSpec, field) === undefined && live !== undefined && live !== null;
  });
  const labelsMatch = containsDeclared(live.metadata.labels ?? {}, desired.metadata.labels ?? {});
  const finalizersMatch = (desired.metadata.finalizers ?? []).every((finalizer) =>
    (live.metadata.finalizers ?? []).includes(finalizer),
  );
  const ownedSectionChanged = ownedSpecFields.some((field) => {
    const declared = valueAtPath(desiredSpec, field);
    return declared !== undefined && !jsonEqual(valueAtPath(liveSpec, field), declared);
  });
  const drifted =
    !labelsMatch ||
    !finalizersMatch ||
    !containsDeclared(liveSpec, desiredSpec) ||
    ownedSectionChanged ||
    unexpectedSpecFields.length > 0;
  return { drifted, unexpectedSpecFields };
}
