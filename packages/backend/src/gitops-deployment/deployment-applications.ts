/**
 * Which application row each live GitOpsDeployment has, in memory: a GitOpsDeployment's mapping never
 * changes while the object lives (a delete-recreate is a new uid). The reconciler records it when it writes or
 * finds the row; the status path reads it, so a new deployment's first status (NOTIFY with the application
 * id) needs no look-up of its mapping. Entries go with the object (informer delete).
 */
import type { Informer, KubeObject } from '@gitops/shared';

export interface DeploymentApplications {
  /**
   * Records that GitOpsDeployment `uid` (cache key `key`) has application row `applicationId`; only for the
   * incarnation in the cache (an older one's mapping may still be on its way out, a deleted one would leak).
   */
  remember(uid: string, applicationId: string, key: string): void;
  /** The application id of a GitOpsDeployment incarnation, when known. */
  applicationOf(uid: string): string | undefined;
  /** The cache key of the GitOpsDeployment an application belongs to, when known. */
  keyOf(applicationId: string): string | undefined;
}

export function createDeploymentApplications<T extends KubeObject>(
  informer: Informer<T>,
): DeploymentApplications {
  const applicationOfUid = new Map<string, string>();
  const keyOfApplication = new Map<string, string>();
  informer.onDelete((object) => {
    const uid = object.metadata.uid;
    const applicationId = uid === undefined ? undefined : applicationOfUid.get(uid);
    if (uid) applicationOfUid.delete(uid);
    if (applicationId) keyOfApplication.delete(applicationId);
  });
  return {
    remember(uid, applicationId, key) {
      const slash = key.indexOf('/');
      if (informer.get(key.slice(0, slash), key.slice(slash + 1))?.metadata.uid !== uid) return;
      applicationOfUid.set(uid, applicationId);
      keyOfApplication.set(applicationId, key);
    },
    applicationOf: (uid) => applicationOfUid.get(uid),
    keyOf: (applicationId) => keyOfApplication.get(applicationId),
  };
}
