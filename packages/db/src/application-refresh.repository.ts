import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database, JsonValue } from './database.ts';
import { type InsertedOperation, insertOperations, type OperationOwnerCr } from './operation.repository.ts';

/**
 * Asking Argo CD to refresh Applications whose spec did not change (issue 34 item 4; migration 0016): a commit
 * pushed to the branch they follow, new credentials for their repository. The backend picks the rows
 * (`listRefreshCandidates`, matched by their sources) and, in one transaction, stamps `refresh_requested_at`
 * and announces each row with an `Application` operation (`requestApplicationRefresh`). The agent sets Argo CD's
 * refresh annotation once per stamp (docs/contracts/core-pipeline.md).
 */

/** An application row that may need a refresh: its spec (to match its sources) and its GitOpsDeployment. */
export interface RefreshCandidate {
  id: string;
  spec: JsonValue;
  /** The GitOpsDeployment its api_cr_mapping names (the owner of the operation), if any. */
  owner?: OperationOwnerCr;
}

/**
 * The application rows of the GitOpsDeployments of one namespace (`namespace`), or of one tenant
 * (`clusterUserId`), with their specs. `mentioning`: only specs whose text, in lower case, contains it (a
 * normalised repository URL: the caller matches the sources exactly; this only spares reading the others).
 */
export async function listRefreshCandidates(
  db: Kysely<Database>,
  scope: { namespace: string } | { clusterUserId: string },
  mentioning?: string,
): Promise<RefreshCandidate[]> {
  let query = db
    .selectFrom('application as a')
    .leftJoin('api_cr_mapping as m', (join) =>
      join.onRef('m.application_id', '=', 'a.id').on('m.cr_kind', '=', 'GitOpsDeployment'),
    )
    .select(['a.id', 'a.spec', 'm.cr_name', 'm.cr_namespace', 'm.cr_uid'])
    .orderBy('a.id');
  query =
    'namespace' in scope
      ? query.where('m.cr_namespace', '=', scope.namespace)
      : query.where('a.cluster_user_id', '=', scope.clusterUserId);
  if (mentioning !== undefined)
    query = query.where(sql<boolean>`strpos(lower(a.spec::text), ${mentioning.toLowerCase()}) > 0`);
  const rows = await query.execute();
  return rows.map((row) => ({
    id: row.id,
    spec: row.spec,
    ...(row.cr_name !== null && row.cr_namespace !== null && row.cr_uid !== null
      ? {
          owner: {
            kind: 'GitOpsDeployment' as const,
            namespace: row.cr_namespace,
            name: row.cr_name,
            uid: row.cr_uid,
          },
        }
      : {}),
  }));
}

/**
 * Stamps `refresh_requested_at = now()` on these application rows and announces each one that still exists to
 * its engine instance (an `Application` operation, a Waiting one reused), inside the caller's transaction.
 * The stamp does not move `updated_at` (migration 0016): the desired Application is the same.
 */
export async function requestApplicationRefresh(
  trx: Transaction<Database>,
  candidates: readonly Pick<RefreshCandidate, 'id' | 'owner'>[],
): Promise<InsertedOperation[]> {
  if (candidates.length === 0) return [];
  const stamped = await trx
    .updateTable('application')
    // Each request later than the last by at least 1 ms, as readers see it (JavaScript dates hold
    // milliseconds): two pushes within one millisecond are still two requests.
    .set({
      refresh_requested_at: sql<Date>`greatest(now(), refresh_requested_at + interval '1 millisecond')`,
    })
    .where(
      'id',
      'in',
      candidates.map((c) => c.id),
    )
    .returning(['id', 'engine_instance_id', 'cluster_user_id'])
    .execute();
  const owners = new Map(candidates.map((c) => [c.id, c.owner]));
  return await insertOperations(
    trx,
    stamped.map((row) => ({
      engineInstanceId: row.engine_instance_id,
      resourceType: 'Application' as const,
      resourceId: row.id,
      ownerUserId: row.cluster_user_id,
      ownerCr: owners.get(row.id) ?? null,
    })),
  );
}
