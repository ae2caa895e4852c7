/**
 * The refresh a row asks for (`application.refresh_requested_at`, stamped by the backend after a commit was
 * pushed to the branch the Application follows or its repository's credentials changed; migration 0016):
 * Argo CD's refresh annotation, set once per request, after the Application matches its row. The request
 * served is recorded on the Application (AgentAnnotation.RefreshServed, in the same patch) and in memory (the
 * cache may not have the patch yet when the row is looked at again), so a reconcile never asks twice for one
 * request and nothing loops: neither our patch nor Argo CD's removal of its annotation changes what the
 * Application queue wakes for (the owned fields, application.feature.ts). A spec change needs none of this:
 * Argo CD compares again by itself when the spec's source differs from the one it compared.
 */
import { FieldManager } from '@gitops/api';
import { type ApplicationRow, type Db, hasUnfinishedOperation } from '@gitops/db';
import { type Informer, type KubeConfig, type KubeObject, type Logger, mergePatch } from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import { AgentAnnotation, applicationRef, REFRESH_ANNOTATION } from '../argocd.ts';
import type { BoundedWaits } from './application.removal.ts';
import type { Settled } from './settled.ts';

/** How long a refresh waits for the tenant's new repository credentials to reach Argo CD, at most. */
export const CREDENTIALS_WAIT_MAX_MS = 30_000;
const CREDENTIALS_RECHECK_MS = 500;

export interface RefreshDeps {
  kc: KubeConfig;
  db: Db;
  namespace: string;
  engineInstanceId: string;
  applications: Pick<Informer<KubeObject>, 'get'>;
  settledApplications: Settled;
  /** Application id → the request (ms since the epoch) last served by this process. */
  servedRefreshes: Map<string, number>;
  /** Refreshes waiting for the tenant's repository credentials (CREDENTIALS_WAIT_MAX_MS). */
  credentialWaits: BoundedWaits;
}

/** The request recorded as served on a live Application (ms since the epoch), if any. */
export function servedRefreshOf(live: KubeObject | undefined): number | undefined {
  const recorded = live?.metadata.annotations?.[AgentAnnotation.RefreshServed];
  const time = recorded === undefined ? Number.NaN : Date.parse(recorded);
  return Number.isNaN(time) ? undefined : time;
}

/** The patch that asks Argo CD to refresh and records which request it serves. */
export function refreshPatch(requested: Date): Record<string, unknown> {
  return {
    metadata: {
      annotations: {
        [REFRESH_ANNOTATION]: 'normal',
        [AgentAnnotation.RefreshServed]: requested.toISOString(),
      },
    },
  };
}

/**
 * After the row's Application was found or made matching (`applied`, its outcome): Argo CD is asked to refresh
 * when the row requests it and the request was not served yet. New repository credentials of the tenant still
 * on their way to Argo CD (an unfinished RepositoryCredentials operation) are waited for, at most
 * CREDENTIALS_WAIT_MAX_MS: a refresh with the old ones would be for nothing.
 */
export async function refreshIfRequested(
  deps: RefreshDeps,
  row: Pick<ApplicationRow, 'id' | 'name' | 'cluster_user_id' | 'refresh_requested_at'>,
  applied: ResourceOutcome,
  { signal, logger }: { signal: AbortSignal; logger: Logger },
): Promise<ResourceOutcome> {
  const requested = row.refresh_requested_at;
  if (!requested || applied.status !== 'done') return applied;
  const at = requested.getTime();
  const live = deps.applications.get(deps.namespace, row.name);
  const served = Math.max(deps.servedRefreshes.get(row.id) ?? -1, servedRefreshOf(live) ?? -1);
  if (served >= at) return applied;
  const credentialsPending = await hasUnfinishedOperation(deps.db, {
    engineInstanceId: deps.engineInstanceId,
    resourceType: 'RepositoryCredentials',
    ownerUserId: row.cluster_user_id,
  });
  if (credentialsPending && !deps.credentialWaits.overdue(row.id)) {
    return {
      status: 'pending',
      reason: `the refresh of Application ${row.name} waits for the tenant's new repository credentials`,
      requeueAfterMs: CREDENTIALS_RECHECK_MS,
      changed: applied.changed,
    };
  }
  deps.credentialWaits.done(row.id);
  try {
    await mergePatch(deps.kc, applicationRef(deps.namespace, row.name), refreshPatch(requested), {
      fieldManager: FieldManager.ClusterAgentSync,
      signal,
    });
  } catch (err) {
    // Not settled until the refresh was asked for: the retry or the drift resync looks again.
    deps.settledApplications.forget(row.id);
    throw err;
  }
  deps.servedRefreshes.set(row.id, at);
  logger.info({ application: row.name }, 'Argo CD asked to refresh the Application');
  return { status: 'done', changed: true };
}
