/**
 * The deletion guard (docs/deletion-guard.md): deleting an Application with Argo CD's resources finalizer prunes
 * everything it deployed, so an agent does it only
 * - on proof: the backend recorded, with the row's delete, that the GitOpsDeployment was found gone
 *   (`application_deletion`). A row that vanished otherwise (a database restored from a backup, a failover that
 *   lost commits, a row deleted by hand, one this instance's role cannot see) is no proof: `Unproven`;
 * - within budget: at most max(min, percent % of the Applications) of the instance, and of one tenant, within
 *   one window (`InstanceBudget`, `TenantBudget`). Once a budget is spent, every further delete of its scope is
 *   held too, until the holds are confirmed or no longer needed.
 * A held delete is recorded (`application_deletion_hold`: the GitOpsEngineInstance condition, the metric and
 * its alert read it) and looked at again every HOLD_RECHECK_MS; it goes ahead once an operator confirms
 * (`kubectl gitops instances confirm-deletions`), and is forgotten when its Application no longer needs to go.
 */
import {
  countPrunedSince,
  type Db,
  type DeletionHoldReason,
  deletePrunedApplicationDeletions,
  getApplicationDeletion,
  getDeletionHold,
  holdDeletion,
  listDeletionHolds,
  markApplicationPruned,
  releaseDeletionHold,
  spentDeletionBudgets,
} from '@gitops/db';
import { formatDuration, type Informer, type KubeObject, type Logger, type Turns } from '@gitops/shared';
import { AgentLabel, databaseIdOf } from '../argocd.ts';
import type { AgentConfig } from '../config.ts';

/** A held delete is looked at again this often (a confirmation or a row come back). */
export const HOLD_RECHECK_MS = 15_000;

/** The deletion budget (agent configuration: GITOPS_DELETION_BUDGET_*, GITOPS_TENANT_DELETION_BUDGET_*). */
export interface DeletionBudget {
  windowMs: number;
  percent: number;
  min: number;
  tenantPercent: number;
  tenantMin: number;
}

/** The budget of the agent's configuration. */
export function deletionBudgetOf(
  config: Pick<
    AgentConfig,
    | 'deletionBudgetWindowMs'
    | 'deletionBudgetPercent'
    | 'deletionBudgetMin'
    | 'tenantDeletionBudgetPercent'
    | 'tenantDeletionBudgetMin'
  >,
): DeletionBudget {
  return {
    windowMs: config.deletionBudgetWindowMs,
    percent: config.deletionBudgetPercent,
    min: config.deletionBudgetMin,
    tenantPercent: config.tenantDeletionBudgetPercent,
    tenantMin: config.tenantDeletionBudgetMin,
  };
}

export interface DeletionGuardDeps {
  /** Admissions run one at a time (their count and stamp must not interleave). */
  deletionTurns: Turns;
  db: Db;
  engineInstanceId: string;
  /** The Argo CD namespace (its Applications are counted for the shares). */
  namespace: string;
  applications: Pick<Informer<KubeObject>, 'list'>;
  deletionBudget: DeletionBudget;
}

/** How many deletes a budget allows within one window, for `total` Applications (present and deleted). */
export function budgetLimit(total: number, percent: number, min: number): number {
  return Math.max(min, Math.floor((total * percent) / 100));
}

/**
 * The budget that holds one more delete (pure), if any: one already spent (its holds wait for an operator:
 * `spent`), or one this delete would overspend. `deleted` counts the window's deletes so far, `live` the
 * Applications there now (the share is of those present when the window began: live + deleted).
 */
export function holdingBudget(
  budget: DeletionBudget,
  counts: {
    instance: { deleted: number; live: number; spent: boolean };
    tenant: { deleted: number; live: number; spent: boolean };
  },
): { reason: 'InstanceBudget' | 'TenantBudget'; limit: number; total: number } | undefined {
  const { instance, tenant } = counts;
  const instanceTotal = instance.deleted + instance.live;
  const instanceLimit = budgetLimit(instanceTotal, budget.percent, budget.min);
  if (instance.spent || instance.deleted + 1 > instanceLimit)
    return { reason: 'InstanceBudget', limit: instanceLimit, total: instanceTotal };
  const tenantTotal = tenant.deleted + tenant.live;
  const tenantLimit = budgetLimit(tenantTotal, budget.tenantPercent, budget.tenantMin);
  if (tenant.spent || tenant.deleted + 1 > tenantLimit)
    return { reason: 'TenantBudget', limit: tenantLimit, total: tenantTotal };
  return undefined;
}

/** What an operator runs to let held deletes go ahead. */
function confirmHint(): string {
  return 'kept until it is no longer to be deleted or an operator confirms with `kubectl gitops instances confirm-deletions <instance>`';
}

/** The message of a hold (no secret: names, counts and the budget only). */
export function holdMessage(
  reason: DeletionHoldReason,
  application: { id: string; name: string },
  detail?: { limit: number; total: number; windowMs: number; tenant?: string | undefined },
): string {
  const window = formatDuration(detail?.windowMs ?? 0);
  switch (reason) {
    case 'Unproven':
      return `Application ${application.name} is not deleted: its application row ${application.id} is gone but no deletion of its GitOpsDeployment was recorded (a database restored from a backup, a row deleted by hand, or one this instance cannot see); ${confirmHint()}`;
    case 'InstanceBudget':
      return `Application ${application.name} is not deleted: the instance has deleted ${detail?.limit ?? 0} of its ${detail?.total ?? 0} Applications within ${window}, its deletion budget; ${confirmHint()}`;
    case 'TenantBudget':
      return `Application ${application.name} is not deleted: the instance has deleted ${detail?.limit ?? 0} of the ${detail?.total ?? 0} Applications of tenant ${detail?.tenant ?? ''} within ${window}, its deletion budget; ${confirmHint()}`;
  }
}

export type DeletionVerdict = { admitted: true } | { admitted: false; message: string };

/**
 * Whether live Application `app` of application row `id` (gone) may be deleted with cascading now. Holds it
 * (recorded, with why) when not; when it may, the proof is stamped at once (`pruned_at`), so it counts against
 * the budget before the next admission is decided (admissions run one at a time) and a later look at the same
 * delete (a sync in the way, then the delete) is admitted again. A few indexed statements per delete.
 */
export function admitDeletion(
  deps: DeletionGuardDeps,
  id: string,
  app: KubeObject,
  logger: Logger,
): Promise<DeletionVerdict> {
  return deps.deletionTurns.run('admission', async () => {
    const verdict = await decideDeletion(deps, id, app, logger);
    if (verdict.admitted) await markApplicationPruned(deps.db, id);
    return verdict;
  });
}

async function decideDeletion(
  deps: DeletionGuardDeps,
  id: string,
  app: KubeObject,
  logger: Logger,
): Promise<DeletionVerdict> {
  const { db, engineInstanceId, deletionBudget: budget } = deps;
  const held = await getDeletionHold(db, id);
  if (held?.confirmed_at) return { admitted: true };
  if (held) return { admitted: false, message: held.message };
  const tenant = app.metadata.labels?.[AgentLabel.ClusterUserId];
  const application = { id, name: app.metadata.name };
  const hold = async (reason: DeletionHoldReason, message: string): Promise<DeletionVerdict> => {
    await holdDeletion(db, {
      applicationId: id,
      engineInstanceId,
      clusterUserId: tenant,
      applicationName: app.metadata.name,
      reason,
      message,
    });
    logger.warn({ application: app.metadata.name, reason }, 'deletion held by the deletion guard');
    return { admitted: false, message };
  };
  const proof = await getApplicationDeletion(db, id);
  if (!proof) return await hold('Unproven', holdMessage('Unproven', application));
  // Admitted before (then a sync was in the way): already counted.
  if (proof.pruned_at) return { admitted: true };
  const since = new Date(Date.now() - budget.windowMs);
  const [spent, pruned] = await Promise.all([
    spentDeletionBudgets(db, engineInstanceId, proof.cluster_user_id),
    countPrunedSince(db, engineInstanceId, proof.cluster_user_id, since),
  ]);
  const live = deps.applications.list(deps.namespace);
  const tenantLive = live.filter(
    (a) => a.metadata.labels?.[AgentLabel.ClusterUserId] === proof.cluster_user_id,
  );
  const holding = holdingBudget(budget, {
    instance: { deleted: pruned.instance, live: live.length, spent: spent.instance },
    tenant: { deleted: pruned.tenant, live: tenantLive.length, spent: spent.tenant },
  });
  // A spent budget stays spent while its holds wait: nothing of its scope goes before them.
  if (holding) {
    return await hold(
      holding.reason,
      holdMessage(holding.reason, application, {
        limit: holding.limit,
        total: holding.total,
        windowMs: budget.windowMs,
        tenant: proof.cluster_user_id,
      }),
    );
  }
  return { admitted: true };
}

/**
 * The periodic part (with the drift resync): holds whose Application no longer needs to go are forgotten (it
 * is gone, or carries another row's id now: adopted by the row that came back), and proofs used longer ago than
 * the window are deleted. Returns how many holds were forgotten.
 */
export async function sweepDeletionGuard(
  deps: Omit<DeletionGuardDeps, 'deletionTurns'> & {
    rowExists(ids: readonly string[]): Promise<Set<string>>;
  },
  logger: Logger,
): Promise<number> {
  const holds = await listDeletionHolds(deps.db, deps.engineInstanceId);
  let forgotten = 0;
  if (holds.length > 0) {
    const liveIds = new Set(deps.applications.list(deps.namespace).map(databaseIdOf));
    const rows = await deps.rowExists(holds.map((h) => h.application_id));
    for (const hold of holds) {
      if (liveIds.has(hold.application_id) && !rows.has(hold.application_id)) continue;
      await releaseDeletionHold(deps.db, hold.application_id);
      forgotten++;
      logger.info(
        { application: hold.application_name, reason: hold.reason },
        'held deletion no longer wanted: the hold is forgotten',
      );
    }
  }
  // Kept a window longer than needed: a window changed meanwhile still sees what was deleted.
  await deletePrunedApplicationDeletions(
    deps.db,
    deps.engineInstanceId,
    new Date(Date.now() - 2 * deps.deletionBudget.windowMs),
  );
  return forgotten;
}
