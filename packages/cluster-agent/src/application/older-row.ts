/**
 * A row older than the one its live Application was last applied from (AgentAnnotation.RowVersion) is waited
 * for before it is applied (application.reconciler.ts, `applyApplication`).
 */
import type { ApplicationRow } from '@gitops/db';
import type { KubeObject, Logger } from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import { AgentAnnotation } from '../argocd.ts';
import type { BoundedWaits } from './application.removal.ts';

/** How long a row older than its live Application is waited for before it is applied anyway (see olderRow). */
export const OLDER_ROW_WAIT_MAX_MS = 30 * 60_000;
const OLDER_ROW_RECHECK_MS = 15_000;

/** The row version recorded on a live Application (AgentAnnotation.RowVersion), if any. */
export function appliedRowVersion(live: KubeObject | undefined): number | undefined {
  const recorded = live?.metadata.annotations?.[AgentAnnotation.RowVersion];
  const time = recorded === undefined ? Number.NaN : Date.parse(recorded);
  return Number.isNaN(time) ? undefined : time;
}

/**
 * A row older than the one its live Application was last applied from is not applied over it: the database
 * went back in time (restored from an older backup, a failover that lost commits), and applying it would
 * revert the deployment to an older spec (Argo CD then prunes what was added since). It waits for the backend
 * to rewrite the row from its GitOpsDeployment (a newer `updated_at`), at most OLDER_ROW_WAIT_MAX_MS (a
 * GitOpsDeployment changed and changed back since the backup leaves the row as it is), then it is applied.
 */
export function olderRow(
  deps: { olderRowWaits: BoundedWaits },
  row: ApplicationRow,
  live: KubeObject | undefined,
  logger: Logger,
): ResourceOutcome | undefined {
  const applied = appliedRowVersion(live);
  if (applied === undefined || applied <= row.updated_at.getTime()) {
    deps.olderRowWaits.done(row.id);
    return undefined;
  }
  if (deps.olderRowWaits.overdue(row.id)) {
    logger.warn(
      { application: row.name },
      'applying an application row older than its Application: nothing newer came',
    );
    return undefined;
  }
  return {
    status: 'pending',
    reason: `the application row of ${row.name} is older than the one its Application was applied from (a database restored from an older backup?): waiting for the backend to write it again from its GitOpsDeployment`,
    requeueAfterMs: OLDER_ROW_RECHECK_MS,
  };
}
