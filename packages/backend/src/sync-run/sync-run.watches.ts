/**
 * What wakes the SyncRun reconciler besides its own CRs: its parent GitOpsDeployment appearing, being
 * replaced or changing generation (through an index of SyncRuns by parent, never a scan), and changes of
 * the Application whose health and sync status a SyncRun shows (the reconciles say which they follow, so a
 * notification costs no database read). The wiring is in sync-run.feature.ts.
 */
import {
  allOf,
  anyOf,
  generationChanged,
  type Informer,
  ignoreDeletes,
  keysFromIndex,
  type MapToKeys,
  namespacedIndexValue,
  objectKey,
  uidChanged,
} from '@gitops/shared';
import type { GitOpsDeploymentObject, SyncRunObject } from '../kinds.ts';

/** Index of the SyncRun cache: `namespace/name` of the GitOpsDeployment a SyncRun references. */
export const SYNC_RUN_PARENT_INDEX = 'parent';

/** The SyncRuns referencing a GitOpsDeployment look again when it appears, is replaced or changes generation. */
export const parentChanged = allOf(anyOf(generationChanged, uidChanged), ignoreDeletes);

/** Indexes the SyncRuns by parent; returns the map from a GitOpsDeployment event to their keys. */
export function syncRunsOfParent(syncRuns: Informer<SyncRunObject>): MapToKeys<GitOpsDeploymentObject> {
  syncRuns.addIndexers({
    [SYNC_RUN_PARENT_INDEX]: (syncRun) => {
      const parent = syncRun.spec.gitopsDeploymentName;
      return parent ? [namespacedIndexValue(syncRun.metadata.namespace, parent)] : [];
    },
  });
  return keysFromIndex(syncRuns, SYNC_RUN_PARENT_INDEX, objectKey);
}

/** Which SyncRuns show which Application's health and sync status (kept by their reconciles). */
export interface ApplicationFollowers {
  /** SyncRun `key` now shows Application `applicationId` (undefined: none). */
  follow(key: string, applicationId: string | undefined): void;
  /** The SyncRun keys that show this Application. */
  keysOf(applicationId: string): Iterable<string>;
}

export function createApplicationFollowers(): ApplicationFollowers {
  /** Application id → the SyncRun keys that show it, and back. */
  const followers = new Map<string, Set<string>>();
  const followed = new Map<string, string>();
  return {
    follow(key, applicationId) {
      const previous = followed.get(key);
      if (previous === applicationId) return;
      if (previous !== undefined) {
        const keys = followers.get(previous);
        keys?.delete(key);
        if (keys?.size === 0) followers.delete(previous);
      }
      if (applicationId === undefined) {
        followed.delete(key);
        return;
      }
      followed.set(key, applicationId);
      const keys = followers.get(applicationId) ?? new Set<string>();
      keys.add(key);
      followers.set(applicationId, keys);
    },
    keysOf: (applicationId) => followers.get(applicationId) ?? [],
  };
}
