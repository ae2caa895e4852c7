/**
 * Which of an Application's projected states (application-state.projection.ts) Argo CD is on its way from, so
 * the status path writes it only when it lasts: the states a create and its sync pass through cost no
 * application_state write each (nor the NOTIFY, the backend's read and its status write that follow one), while
 * a settled state is written at once (issue 34; docs/architecture.md, "Status path").
 */
import type { JsonValue } from '@gitops/db';
import { jsonField, type KubeObject } from '@gitops/shared';

/**
 * - `queued`: Argo CD has not acted on the Application yet. Nothing compared (the Unknown/Unknown of an
 *   Application Argo CD has not looked at, or Argo CD's first health Unknown with an empty sync status; no
 *   operation, no condition), or an automated Application OutOfSync that Argo CD never synced (a create waiting
 *   in Argo CD's queue for its first sync). Written at most every GITOPS_STATUS_QUEUED_INTERVAL.
 * - `progressing`: a sync running (or terminating), health Progressing, or an automated Application OutOfSync
 *   after an earlier sync that no failed sync explains (Argo CD is about to sync it again). Written at most
 *   every GITOPS_STATUS_PROGRESS_INTERVAL.
 * `undefined` for a settled state (Synced, a manual Application OutOfSync, a failed sync, a comparison error,
 * health Degraded whatever the sync status), written at once: what a user waits for or acts on.
 */
export type OnTheWay = 'queued' | 'progressing';

const unknown = (value: unknown) => value === undefined || value === '' || value === 'Unknown';

/** The stage `state` (a projection) is on its way in, or undefined when it is settled. */
export function onTheWay(state: { [key: string]: JsonValue }, automated: boolean): OnTheWay | undefined {
  const phase = jsonField(state, 'operationState', 'phase');
  if (phase === 'Running' || phase === 'Terminating') return 'progressing';
  const sync = jsonField(state, 'sync', 'status');
  const health = jsonField(state, 'health', 'status');
  // Degraded is what a user acts on, whatever the sync status says.
  if (health === 'Degraded') return undefined;
  if (health === 'Progressing') return 'progressing';
  // The projection keeps only the conditions Argo CD reports now: any is a verdict (a comparison error).
  const conditions = Array.isArray(state.conditions) ? state.conditions : [];
  if (unknown(sync) && unknown(health) && phase === undefined && conditions.length === 0) return 'queued';
  if (!automated || sync !== 'OutOfSync' || phase === 'Failed' || phase === 'Error') return undefined;
  return phase === undefined ? 'queued' : 'progressing';
}

/** Whether Argo CD syncs the Application by itself (`spec.syncPolicy.automated`, not switched off). */
export function isAutomated(application: KubeObject): boolean {
  const automated = jsonField(application.spec, 'syncPolicy', 'automated');
  return typeof automated === 'object' && automated !== null && jsonField(automated, 'enabled') !== false;
}
