import { ErrorCode, TerminalError } from '@gitops/shared';
import { type Kysely, sql, type Transaction } from 'kysely';
import { AGENT_ACTIVE_LOCK_CLASS } from './active-lock.ts';
import type { ClusterUserRow, Database, EngineInstanceRow } from './database.ts';
import { dropRole } from './engine-instance-role.repository.ts';
import { rowBy } from './keyed-rows.ts';
import { agentListening } from './operation-relay.repository.ts';

export interface EngineInstanceInput {
  /** Stable identity from configuration. */
  name: string;
  namespaceName: string;
  namespaceUid: string;
  clusterIdentity: string;
}

/**
 * Registers the engine instance a cluster-agent serves (at agent start). Keyed by the configured name, so
 * a re-created Argo CD namespace (new uid) keeps the same row and everything that points at it.
 */
export async function upsertEngineInstance(
  db: Kysely<Database>,
  input: EngineInstanceInput,
): Promise<EngineInstanceRow> {
  return await db
    .insertInto('engine_instance')
    .values({
      name: input.name,
      namespace_name: input.namespaceName,
      namespace_uid: input.namespaceUid,
      cluster_identity: input.clusterIdentity,
    })
    .onConflict((conflict) =>
      conflict.column('name').doUpdateSet(({ ref }) => ({
        namespace_name: ref('excluded.namespace_name'),
        namespace_uid: ref('excluded.namespace_uid'),
        cluster_identity: ref('excluded.cluster_identity'),
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export const getEngineInstance = rowBy('engine_instance', 'id');

export const getEngineInstanceByName = rowBy('engine_instance', 'name');

/**
 * Registers the engine instance at process start; the backend and the cluster-agent both call this
 * (docs/contracts/core-pipeline.md). Idempotent: no write when the row already names this namespace and
 * uid (a re-created namespace, with a new uid, updates the row). A name is one Argo CD namespace on one
 * cluster: a process that serves another namespace, or the same namespace on another cluster, under a
 * registered name is refused (TerminalError), so two agents configured with one ENGINE_INSTANCE_NAME never
 * take each other's tenants.
 */
export async function ensureEngineInstance(
  db: Kysely<Database>,
  instance: Omit<EngineInstanceInput, 'clusterIdentity'>,
  clusterIdentity: () => Promise<string>,
): Promise<EngineInstanceRow> {
  const existing = await getEngineInstanceByName(db, instance.name);
  const identity = await clusterIdentity();
  // An admitted instance whose agent has not started yet has no cluster recorded ('').
  if (
    existing &&
    ((existing.cluster_identity !== '' && existing.cluster_identity !== identity) ||
      existing.namespace_name !== instance.namespaceName)
  ) {
    throw new TerminalError(
      ErrorCode.invalidObject,
      `the engine instance "${instance.name}" is registered for Argo CD namespace "${existing.namespace_name}" on cluster ${existing.cluster_identity}; this process serves namespace "${instance.namespaceName}" on cluster ${identity}. One ENGINE_INSTANCE_NAME is one Argo CD: give this one a name of its own`,
    );
  }
  if (existing && existing.namespace_uid === instance.namespaceUid && existing.cluster_identity !== '')
    return existing;
  return await upsertEngineInstance(db, { ...instance, clusterIdentity: identity });
}

/** Why a tenant could not be placed (reported on the tenant's objects; nothing is placed). */
export type PlacementRefusal =
  /** The namespace label names an instance that is not registered. */
  | { reason: 'UnknownEngineInstance'; instance: string }
  /** The namespace label names a cordoned instance (it takes no new tenants). */
  | { reason: 'EngineInstanceCordoned'; instance: string }
  /** No label, and every registered instance is cordoned (or none is registered). */
  | { reason: 'NoSchedulableEngineInstance' };

export type Placement = { placed: EngineInstanceRow } | { refused: PlacementRefusal };

/** A placed tenant, its instance and its Workspace environment, read in one statement (getPlacedTenant). */
export interface PlacedTenant {
  clusterUser: ClusterUserRow;
  instance: EngineInstanceRow;
  workspaceEnvironmentId: string;
}

/**
 * The tenant of namespace `namespaceUid` when it is placed and has its Workspace environment (every tenant
 * after its first deployment): one round trip where ensuring the tenant, placing it and reading its
 * Workspace take three. The tenant row is KEY SHARE locked as placeTenant locks it; a tenant changed by a
 * concurrent move drops out of the join while the lock is re-checked, so this answers undefined and the
 * caller takes placeTenant's path. Undefined also for a new or unplaced tenant.
 */
export async function getPlacedTenant(
  trx: Transaction<Database>,
  namespaceUid: string,
): Promise<PlacedTenant | undefined> {
  const row = await trx
    .selectFrom('cluster_user as u')
    .innerJoin('engine_instance as ei', 'ei.id', 'u.engine_instance_id')
    .innerJoin('managed_environment as me', (join) =>
      join.onRef('me.cluster_user_id', '=', 'u.id').on('me.kind', '=', 'Workspace'),
    )
    .select([
      'u.id as u_id',
      'u.namespace_uid as u_namespace_uid',
      'u.namespace_name as u_namespace_name',
      'u.engine_instance_id as u_engine_instance_id',
      'u.created_at as u_created_at',
      'u.updated_at as u_updated_at',
      'me.id as workspace_id',
    ])
    .selectAll('ei')
    .where('u.namespace_uid', '=', namespaceUid)
    .forKeyShare('u')
    .executeTakeFirst();
  if (!row) return undefined;
  const { u_id, u_namespace_uid, u_namespace_name, u_engine_instance_id, u_created_at, u_updated_at } = row;
  return {
    clusterUser: {
      id: u_id,
      namespace_uid: u_namespace_uid,
      namespace_name: u_namespace_name,
      engine_instance_id: u_engine_instance_id,
      created_at: u_created_at,
      updated_at: u_updated_at,
    },
    instance: {
      id: row.id,
      name: row.name,
      namespace_name: row.namespace_name,
      namespace_uid: row.namespace_uid,
      cluster_identity: row.cluster_identity,
      cordoned: row.cordoned,
      db_role: row.db_role,
      sealing_key_id: row.sealing_key_id,
      key_rotation_requested_at: row.key_rotation_requested_at,
      created_at: row.created_at,
      updated_at: row.updated_at,
    },
    workspaceEnvironmentId: row.workspace_id,
  };
}

/**
 * The engine instance of a tenant, placing it first when it has none: the instance named by `requested` (the
 * namespace label) when it is registered and not cordoned; without a label, the uncordoned instance with the
 * fewest applications among those whose agent listens now (all of them when none does; ties by name). A placed tenant keeps its instance whatever `requested` says now:
 * placement never changes by itself (moving a tenant is a separate, declared step). One statement for a
 * placed tenant; concurrent first placements of one tenant agree (the first to commit wins).
 */
export async function placeTenant(
  trx: Transaction<Database>,
  clusterUserId: string,
  requested: string | undefined,
  /**
   * The cluster the tenant's namespace lives on: without a label, only an instance of that cluster is chosen
   * (its deployments without an environment deploy there); a label may name an instance anywhere.
   */
  tenantClusterIdentity?: string,
): Promise<Placement> {
  // The tenant row is locked (KEY SHARE, the weakest lock) while its placement is read, so this transaction
  // and a move (moveTenant locks it FOR UPDATE) never interleave: what is written here for the tenant's
  // instance is either seen and moved by the move, or written after it to the new instance.
  const placedOn = () =>
    trx
      .selectFrom('cluster_user as u')
      .innerJoin('engine_instance as ei', 'ei.id', 'u.engine_instance_id')
      .selectAll('ei')
      .where('u.id', '=', clusterUserId)
      .forKeyShare('u')
      .executeTakeFirst();
  const current = await placedOn();
  if (current) return { placed: current };
  let chosen: EngineInstanceRow | undefined;
  if (requested !== undefined) {
    chosen = await getEngineInstanceByName(trx, requested);
    if (!chosen) return { refused: { reason: 'UnknownEngineInstance', instance: requested } };
    if (chosen.cordoned) return { refused: { reason: 'EngineInstanceCordoned', instance: requested } };
  } else {
    chosen = await leastLoadedEngineInstance(
      trx,
      tenantClusterIdentity === undefined ? {} : { clusterIdentity: tenantClusterIdentity },
    );
    if (!chosen) return { refused: { reason: 'NoSchedulableEngineInstance' } };
  }
  // Waits for a concurrent placement of the same tenant, then finds it placed and takes that one.
  const result = await trx
    .updateTable('cluster_user')
    .set({ engine_instance_id: chosen.id })
    .where('id', '=', clusterUserId)
    .where('engine_instance_id', 'is', null)
    .executeTakeFirst();
  if (result.numUpdatedRows > 0n) return { placed: chosen };
  const concurrent = await placedOn();
  if (!concurrent) throw new Error(`tenant ${clusterUserId} does not exist`);
  return { placed: concurrent };
}

/**
 * Where a tenant goes without a label: the uncordoned instance (other than `excluding`, on the cluster
 * `clusterIdentity` when given) with the fewest
 * applications, among those whose agent listens now (all of them when none does); ties by name.
 */
export async function leastLoadedEngineInstance(
  db: Kysely<Database>,
  options: { excluding?: string; clusterIdentity?: string } = {},
): Promise<EngineInstanceRow | undefined> {
  let query = db.selectFrom('engine_instance as ei').selectAll('ei').where('ei.cordoned', '=', false);
  if (options.excluding !== undefined) query = query.where('ei.id', '<>', options.excluding);
  if (options.clusterIdentity !== undefined)
    query = query.where('ei.cluster_identity', '=', options.clusterIdentity);
  return await query
    // An instance whose agent listens now comes first: one whose agents are all away takes no new tenant
    // while another can (when none listens, e.g. all restarting, load alone decides).
    .orderBy(sql<boolean>`not ${agentListening('ei.id')}`)
    .orderBy((eb) =>
      eb
        .selectFrom('application as a')
        .select((c) => c.fn.countAll<number>().as('n'))
        .whereRef('a.engine_instance_id', '=', 'ei.id'),
    )
    .orderBy('ei.name')
    .limit(1)
    .executeTakeFirst();
}

/** Cordons (true) or uncordons an instance: a cordoned instance takes no new tenants. False when unknown. */
export async function setEngineInstanceCordoned(
  db: Kysely<Database>,
  name: string,
  cordoned: boolean,
): Promise<boolean> {
  const result = await db
    .updateTable('engine_instance')
    .set({ cordoned })
    .where('name', '=', name)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** An instance as operators see it: its row, its load, and whether its agents are there now. */
export interface EngineInstanceOverview extends EngineInstanceRow {
  tenants: number;
  applications: number;
  /** Applications moved away whose Argo CD Application this instance has not released yet. */
  releasing: number;
  /** Deletes of Argo CD Applications the instance's agent holds, not confirmed yet (docs/deletion-guard.md). */
  deletionsHeld: number;
  /** An agent of the instance listens for its operations now (holds the agent-listening lock). */
  listening: boolean;
  /**
   * Agent processes of the instance connected to the database now: the sessions holding or waiting for its
   * active-agent lock (the active agent and its standbys; docs/architecture.md, "Agent replicas"), and at
   * least 1 while one listens.
   */
  agents: number;
}

/** Sessions holding or waiting for the active-agent lock of the instance in `engineInstanceIdColumn` (SQL). */
const agentSessions = (engineInstanceIdColumn: string) =>
  sql<number>`(
    select count(distinct l.pid)::int from pg_locks l
    where l.locktype = 'advisory' and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = ${sql.lit(AGENT_ACTIVE_LOCK_CLASS)}
      and l.objid::bigint = (hashtext(${sql.ref(engineInstanceIdColumn)}::text)::bigint & 4294967295)
  )`;

/**
 * Every registered instance (or the one named `name`) with its tenants, applications and agents: one
 * statement for all of them (the GitOpsEngineInstance status, the per-instance metrics, operators' views).
 */
export async function listEngineInstanceOverviews(
  db: Kysely<Database>,
  options: { name?: string } = {},
): Promise<EngineInstanceOverview[]> {
  let query = db
    .selectFrom('engine_instance as ei')
    .selectAll('ei')
    .select((eb) => [
      eb
        .selectFrom('cluster_user as u')
        .select((c) => c.fn.countAll<number>().as('n'))
        .whereRef('u.engine_instance_id', '=', 'ei.id')
        .as('tenants'),
      eb
        .selectFrom('application as a')
        .select((c) => c.fn.countAll<number>().as('n'))
        .whereRef('a.engine_instance_id', '=', 'ei.id')
        .as('applications'),
      eb
        .selectFrom('application as a')
        .select((c) => c.fn.countAll<number>().as('n'))
        .whereRef('a.releasing_engine_instance_id', '=', 'ei.id')
        // An application its new instance is adopting names that instance: not one it still releases.
        .whereRef('a.engine_instance_id', '<>', 'ei.id')
        .as('releasing'),
      eb
        .selectFrom('application_deletion_hold as h')
        .select((c) => c.fn.countAll<number>().as('n'))
        .whereRef('h.engine_instance_id', '=', 'ei.id')
        .where('h.confirmed_at', 'is', null)
        .as('deletions_held'),
      agentListening('ei.id').as('listening'),
      agentSessions('ei.id').as('agents'),
    ])
    .orderBy('ei.name');
  if (options.name !== undefined) query = query.where('ei.name', '=', options.name);
  const rows = await query.execute();
  return rows.map((r) => {
    const listening = r.listening === true;
    return {
      ...r,
      tenants: Number(r.tenants),
      applications: Number(r.applications),
      releasing: Number(r.releasing),
      deletionsHeld: Number(r.deletions_held),
      listening,
      agents: Math.max(Number(r.agents), listening ? 1 : 0),
    };
  });
}

/** What `deleteEngineInstanceIfUnused` did. */
export type EngineInstanceDeletion =
  /** The row is gone (its operations with it). */
  | 'deleted'
  /** No instance of that name is registered. */
  | 'absent'
  /** Tenants, applications or repository credentials still refer to it: nothing was deleted. */
  | 'inUse';

/**
 * Deletes the instance's row when nothing refers to it any more: no tenant placed on it, no application and
 * no repository credentials on it (its operation rows go with it: they only announced work to its agent). One
 * statement; a tenant placed on it concurrently makes it fail on the foreign key (RESTRICT), which is
 * reported as `inUse` like any other reference the database still holds. The instance's database role is dropped
 * with it (migration 0012): its agents cannot connect any more, and the name must be admitted again to return.
 */
export async function deleteEngineInstanceIfUnused(
  db: Kysely<Database>,
  name: string,
): Promise<EngineInstanceDeletion> {
  try {
    const result = await db
      .deleteFrom('engine_instance as ei')
      .where('ei.name', '=', name)
      .where((eb) =>
        eb.and([
          eb.not(
            eb.exists(
              eb
                .selectFrom('cluster_user as u')
                .select('u.id')
                .whereRef('u.engine_instance_id', '=', 'ei.id'),
            ),
          ),
          eb.not(
            eb.exists(
              eb.selectFrom('application as a').select('a.id').whereRef('a.engine_instance_id', '=', 'ei.id'),
            ),
          ),
          eb.not(
            eb.exists(
              eb
                .selectFrom('repository_credentials as r')
                .select('r.id')
                .whereRef('r.engine_instance_id', '=', 'ei.id'),
            ),
          ),
        ]),
      )
      .returning('ei.db_role')
      .executeTakeFirst();
    if (result) {
      // Its agents' role goes with it (they can no longer connect). Best effort: without the privilege to drop
      // it, the role stays bound to no instance, and row-level security gives it nothing to read.
      if (result.db_role) await dropRole(db, result.db_role).catch(() => false);
      return 'deleted';
    }
  } catch (err) {
    // 23503: a row referring to it was written meanwhile, or by a column this statement does not look at.
    if ((err as { code?: unknown }).code === '23503') return 'inUse';
    throw err;
  }
  return (await getEngineInstanceByName(db, name)) ? 'inUse' : 'absent';
}
