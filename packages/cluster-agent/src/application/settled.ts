/**
 * "Settled" objects: what an object was when a reconcile last found it matching its rows, kept as a
 * fingerprint (a canonical JSON string). The drift resync queues only objects whose fingerprint changed
 * since, so an idle resync costs no database round trip per object. One memo per kind:
 *
 *   settled Applications   key: the row id;       fingerprint: the row and the live owned fields
 *   settled AppProjects    key: the project name; fingerprint: the live owned fields, or ABSENT for a project
 *                          found rightly absent (a tenant's cluster-resource project usually is)
 */

import type { KubeObject } from '@gitops/shared';
import { jsonFingerprint } from '@gitops/shared';

export interface Settled {
  /** `key` was found matching as `fingerprint`. */
  settle(key: string, fingerprint: string): void;
  /** `key` is looked at again, or did not match: not settled until the next `settle`. */
  forget(key: string): void;
  /** True when `key` was last found matching as exactly `fingerprint`. */
  matches(key: string, fingerprint: string): boolean;
}

export function createSettled(): Settled {
  const fingerprints = new Map<string, string>();
  return {
    settle: (key, fingerprint) => void fingerprints.set(key, fingerprint),
    forget: (key) => void fingerprints.delete(key),
    matches: (key, fingerprint) => fingerprints.get(key) === fingerprint,
  };
}

/** The fingerprint of an object found rightly absent (no `ownedState` is this string: those are JSON objects). */
export const ABSENT = 'absent';

/** The fields we own on an Argo CD object (plus deletion), to tell our changes apart from status updates. */
export function ownedFields(object: KubeObject) {
  return {
    labels: object.metadata.labels ?? {},
    finalizers: object.metadata.finalizers ?? [],
    deletionTimestamp: object.metadata.deletionTimestamp ?? null,
    spec: object.spec ?? null,
  };
}

/**
 * `ownedFields` as a fingerprint to remember in a memo. Two objects at hand are compared with
 * `jsonEqual(ownedFields(a), ownedFields(b))`.
 */
export function ownedState(object: KubeObject): string {
  return jsonFingerprint(ownedFields(object));
}
