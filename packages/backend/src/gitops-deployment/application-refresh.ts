/**
 * Which applications Argo CD must look at again although their spec did not change (issue 34 item 4), and
 * the transaction that asks for it: `refresh_requested_at` stamped and an `Application` operation per row
 * (packages/db application-refresh.repository.ts); the agent sets Argo CD's refresh annotation once per stamp.
 * Without it Argo CD notices a commit on the branch an unchanged Application follows, or new credentials for its
 * repository, only at its next poll (timeout.reconciliation, 180 s by default).
 *
 * A GitOpsDeployment's own change needs none of this: it changes the Application's spec, and Argo CD's
 * controller compares again at once when `spec.source(s)` differs from what it last compared
 * (`needRefreshAppStatus`, "spec.source differs", with the revision resolved afresh).
 */
import {
  type Database,
  type JsonValue,
  listRefreshCandidates,
  type RefreshCandidate,
  requestApplicationRefresh,
} from '@gitops/db';
import { normalizeRepositoryUrl } from '@gitops/shared';
import type { Kysely, Transaction } from 'kysely';

/** One source of an application row: its repository and the revision it follows ('' = HEAD). */
export interface RowSource {
  repoURL: string;
  targetRevision: string;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The sources of a stored spec (`source`, or each of `sources`); a malformed one has none. */
export function sourcesOf(spec: JsonValue): RowSource[] {
  if (!isObject(spec)) return [];
  const all: unknown[] = Array.isArray(spec.sources) ? spec.sources : [spec.source];
  const sources: RowSource[] = [];
  for (const s of all) {
    if (!isObject(s) || typeof s.repoURL !== 'string') continue;
    sources.push({
      repoURL: s.repoURL,
      targetRevision: typeof s.targetRevision === 'string' ? s.targetRevision : '',
    });
  }
  return sources;
}

/**
 * True when a source follows `branch` of the repository whose normalized URL is `normalizedUrl`: its
 * targetRevision is the branch (or `refs/heads/<branch>`), or HEAD / empty, which may be that branch (the
 * repository's default branch is not known here; a needless refresh costs Argo CD one comparison).
 */
export function followsBranch(source: RowSource, normalizedUrl: string, branch: string): boolean {
  if (normalizeRepositoryUrl(source.repoURL) !== normalizedUrl) return false;
  const revision = source.targetRevision.trim();
  return revision === '' || revision === 'HEAD' || revision === branch || revision === `refs/heads/${branch}`;
}

/** A commit pushed to `branch` of `repoURL`, for the GitOpsDeployments of `namespace`. */
export interface PushedBranch {
  namespace: string;
  repoURL: string;
  branch: string;
}

function matching(
  candidates: readonly RefreshCandidate[],
  matches: (source: RowSource) => boolean,
): RefreshCandidate[] {
  return candidates.filter((c) => sourcesOf(c.spec).some(matches));
}

/**
 * After a commit was pushed to a branch (the GitOps repository render of a promotion): the applications of
 * the namespace's GitOpsDeployments that follow it are refreshed, in one transaction. Returns how many.
 */
export async function refreshApplicationsOfBranch(db: Kysely<Database>, push: PushedBranch): Promise<number> {
  const url = normalizeRepositoryUrl(push.repoURL);
  const branch = push.branch.trim();
  if (url === '' || branch === '') return 0;
  return await db.transaction().execute(async (trx) => {
    const candidates = await listRefreshCandidates(trx, { namespace: push.namespace }, url);
    const rows = matching(candidates, (s) => followsBranch(s, url, branch));
    return (await requestApplicationRefresh(trx, rows)).length;
  });
}

/**
 * Inside the transaction that writes a tenant's repository credentials: the tenant's applications with a
 * source in that repository (any revision) are refreshed, so Argo CD uses the new credentials now.
 */
export async function refreshApplicationsOfRepository(
  trx: Transaction<Database>,
  clusterUserId: string,
  normalizedUrl: string,
): Promise<number> {
  const candidates = await listRefreshCandidates(trx, { clusterUserId }, normalizedUrl);
  const rows = matching(candidates, (s) => normalizeRepositoryUrl(s.repoURL) === normalizedUrl);
  return (await requestApplicationRefresh(trx, rows)).length;
}
