/**
 * Renewal of workspace access (workspace-access.ts): a token lives a year (or what the API server caps it
 * to), so credentials older than GITOPS_WORKSPACE_TOKEN_RENEW_AFTER get a fresh token, and the tenant's
 * instance is told (its agent rewrites the cluster Secret). Paged, oldest first; safe from several backends
 * at once (two renewals of one tenant both store a valid token, the last one stays).
 */
import {
  insertOperation,
  listWorkspaceCredentialsWrittenBefore,
  lockTenantWorkspaceCredentials,
  setWorkspaceCredentials,
  type WorkspaceCredentialsDue,
} from '@gitops/db';
import { periodicFeature } from '@gitops/shared';
import type { BackendContext, BackendFeature } from '../backend-feature.ts';

const PAGE_SIZE = 100;

/** Renews every due workspace token. Returns how many were renewed. */
export async function renewWorkspaceTokens(ctx: BackendContext, signal: AbortSignal): Promise<number> {
  const { db, logger } = ctx;
  let renewed = 0;
  const renew = async (due: WorkspaceCredentialsDue) => {
    const credentials = await ctx.workspaceAccess.provision(due.namespaceName, signal);
    await db.transaction().execute(async (trx) => {
      // Only while the Workspace still has credentials: a move back to this cluster may have dropped them.
      if (!(await lockTenantWorkspaceCredentials(trx, due.clusterUserId))) return;
      await setWorkspaceCredentials(
        trx,
        { id: due.clusterUserId, namespaceName: due.namespaceName },
        credentials,
      );
      if (due.engineInstanceId !== null)
        await insertOperation(trx, {
          engineInstanceId: due.engineInstanceId,
          resourceType: 'ManagedEnvironment',
          resourceId: due.environmentId,
          ownerUserId: due.clusterUserId,
        });
      renewed++;
      logger.info({ namespace: due.namespaceName }, 'workspace token renewed');
    });
  };
  for (;;) {
    if (signal.aborted) return renewed;
    const before = new Date(Date.now() - ctx.config.workspaceTokenRenewAfterMs);
    const page = await listWorkspaceCredentialsWrittenBefore(db, before, PAGE_SIZE);
    for (const due of page) {
      if (signal.aborted) return renewed;
      await renew(due);
    }
    if (page.length < PAGE_SIZE) return renewed;
  }
}

/** Looks for due tokens at start and then every quarter of the renewal age (at most hourly). */
export function createWorkspaceTokenRenewalFeature(ctx: BackendContext): BackendFeature {
  return periodicFeature(
    'workspace-token-renewal',
    'workspace token renewal',
    Math.max(1_000, Math.min(ctx.config.workspaceTokenRenewAfterMs / 4, 3_600_000)),
    (signal) => renewWorkspaceTokens(ctx, signal),
    { logger: ctx.logger, jitter: 0.25 },
  );
}
