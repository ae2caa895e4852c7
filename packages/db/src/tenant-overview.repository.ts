import { type Kysely, sql } from 'kysely';
import type { Database, OperationRow } from './database.ts';

/**
 * A tenant as the admin CLI's `kubectl gitops status <namespace>` shows it: where it is placed and, for each of
 * its GitOpsDeployments the database knows, the application row's engine instance and its latest operation.
 */

export interface TenantDeploymentInView {
  /** The GitOpsDeployment (api_cr_mapping). */
  cr_uid: string;
  cr_name: string;
  application_id: string;
  /** The Argo CD Application's name, `gitopsdepl-<uid>`. */
  application_name: string;
  engine_instance_name: string;
  /** Set while a move waits for this instance to release the old Argo CD Application. */
  releasing_engine_instance_name: string | null;
  /** The newest operation announcing a change of the application row (any instance), if any is kept. */
  last_operation: Pick<
    OperationRow,
    'id' | 'state' | 'message' | 'attempts' | 'created_at' | 'updated_at' | 'finished_at'
  > | null;
}

export interface TenantInView {
  id: string;
  namespace_name: string;
  /** The engine instance it is placed on (null until it first needed one). */
  engine_instance_name: string | null;
  deployments: TenantDeploymentInView[];
}

/** The tenant of the namespace with this uid (undefined when it has none), with its GitOpsDeployments' rows. */
export async function getTenantInView(
  db: Kysely<Database>,
  namespaceUid: string,
): Promise<TenantInView | undefined> {
  const tenant = await db
    .selectFrom('cluster_user as u')
    .leftJoin('engine_instance as e', 'e.id', 'u.engine_instance_id')
    .select(['u.id', 'u.namespace_name', 'e.name as engine_instance_name'])
    .where('u.namespace_uid', '=', namespaceUid)
    .executeTakeFirst();
  if (!tenant) return undefined;
  const { rows } = await sql<
    Omit<TenantDeploymentInView, 'last_operation'> & {
      op_id: string | null;
      op_state: OperationRow['state'] | null;
      op_message: string | null;
      op_attempts: number | null;
      op_created_at: Date | null;
      op_updated_at: Date | null;
      op_finished_at: Date | null;
    }
  >`
    select m.cr_uid, m.cr_name, a.id as application_id, a.name as application_name,
      e.name as engine_instance_name, r.name as releasing_engine_instance_name,
      o.id as op_id, o.state as op_state, o.message as op_message, o.attempts as op_attempts,
      o.created_at as op_created_at, o.updated_at as op_updated_at, o.finished_at as op_finished_at
    from api_cr_mapping m
    join application a on a.id = m.application_id
    join engine_instance e on e.id = a.engine_instance_id
    left join engine_instance r on r.id = a.releasing_engine_instance_id
      and a.releasing_engine_instance_id <> a.engine_instance_id
    left join lateral (
      select * from operation
      where resource_type = 'Application' and resource_id = a.id
      order by created_at desc, id desc
      limit 1
    ) o on true
    where a.cluster_user_id = ${tenant.id} and m.cr_kind = 'GitOpsDeployment'
    order by m.cr_name, m.cr_uid`.execute(db);
  return {
    id: tenant.id,
    namespace_name: tenant.namespace_name,
    engine_instance_name: tenant.engine_instance_name,
    deployments: rows.map((row) => ({
      cr_uid: row.cr_uid,
      cr_name: row.cr_name,
      application_id: row.application_id,
      application_name: row.application_name,
      engine_instance_name: row.engine_instance_name,
      releasing_engine_instance_name: row.releasing_engine_instance_name,
      last_operation:
        row.op_id === null
          ? null
          : {
              id: row.op_id,
              state: row.op_state!,
              message: row.op_message ?? '',
              attempts: row.op_attempts ?? 0,
              created_at: row.op_created_at!,
              updated_at: row.op_updated_at!,
              finished_at: row.op_finished_at,
            },
    })),
  };
}
