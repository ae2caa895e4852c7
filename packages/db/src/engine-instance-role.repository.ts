/**
 * Each engine instance's own database role (migration 0012, docs/threat-model.md): an operator admits an
 * instance, which creates its login role and binds it to the instance's row; the instance's agents connect with
 * that role and PostgreSQL's row-level security lets them see and change only what the instance serves. A
 * retired instance's role is dropped. These functions run with the backend's role (the tables' owner), except
 * `registerAgent` and `sessionRole`, which an agent runs with its own.
 */
import { randomBytes } from 'node:crypto';
import { ErrorCode, TerminalError } from '@gitops/shared';
import { type Kysely, sql } from 'kysely';
import type { Database, EngineInstanceRow } from './database.ts';

/**
 * Sessions one instance's role may hold at once: its replicas' pools (at most 32 each), LISTEN and lock sessions,
 * with room to spare. One instance cannot take every connection of the server from the others.
 */
export const ROLE_CONNECTION_LIMIT = 100;

/** An admitted instance, with the password of its role (shown once: store it in the agent's Secret). */
export interface AdmittedEngineInstance {
  instance: EngineInstanceRow;
  role: string;
  password: string;
}

/**
 * The role name of an instance: from its row id, so it is unique on the server (roles are shared by all of its
 * databases) and never collides with a name a user chose.
 */
export function engineInstanceRoleName(engineInstanceId: string): string {
  return `gitops_ei_${engineInstanceId.replaceAll('-', '')}`;
}

/** The LISTEN channel of one instance's new operations (payload `<resource type>/<resource id>`). */
export function engineInstanceChannel(engineInstanceId: string): string {
  return `gitops_engine_instance_${engineInstanceId.replaceAll('-', '')}`;
}

/** The resource a payload of `engineInstanceChannel` names, or undefined for anything else. */
export function resourceOfInstanceNotification(payload: string): { type: string; id: string } | undefined {
  const match = /^([A-Za-z]+)\/([0-9a-f-]{36})$/.exec(payload);
  return match ? { type: match[1]!, id: match[2]! } : undefined;
}

/**
 * Admits an instance: its row (created when missing; its namespace uid and cluster are recorded by its agent's
 * first start) and its role, created with a new password, or given a new password when it exists (the old one
 * stops working: re-issue after a leak). Needs the CREATEROLE privilege. The instance's name and namespace are
 * what its agent must be configured with.
 */
export async function admitEngineInstance(
  db: Kysely<Database>,
  input: { name: string; namespaceName: string },
): Promise<AdmittedEngineInstance> {
  const password = randomBytes(24).toString('base64url');
  return await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('engine_instance')
      .values({
        name: input.name,
        namespace_name: input.namespaceName,
        namespace_uid: '',
        cluster_identity: '',
      })
      .onConflict((conflict) => conflict.column('name').doNothing())
      .execute();
    const row = await trx
      .selectFrom('engine_instance')
      .selectAll()
      .where('name', '=', input.name)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (row.namespace_name !== input.namespaceName) {
      throw new TerminalError(
        ErrorCode.invalidObject,
        `engine instance "${input.name}" is registered for Argo CD namespace "${row.namespace_name}", not "${input.namespaceName}"`,
      );
    }
    const role = engineInstanceRoleName(row.id);
    const exists = await sql<{
      n: number;
    }>`select count(*)::int as n from pg_roles where rolname = ${role}`.execute(trx);
    // A password cannot be a bind parameter of CREATE/ALTER ROLE: it is a quoted literal (base64url, no quotes).
    const secret = sql.lit(password);
    if ((exists.rows[0]?.n ?? 0) === 0) {
      await sql`create role ${sql.id(role)} login noinherit connection limit ${sql.lit(ROLE_CONNECTION_LIMIT)} password ${secret}`.execute(
        trx,
      );
    } else {
      await sql`alter role ${sql.id(role)} login connection limit ${sql.lit(ROLE_CONNECTION_LIMIT)} password ${secret}`.execute(
        trx,
      );
    }
    await sql`select gitops_grant_engine_instance_role(${role})`.execute(trx);
    const instance = await trx
      .updateTable('engine_instance')
      .set({ db_role: role })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { instance, role, password };
  });
}

/**
 * Drops the role of an instance (its agents can no longer connect or read anything) and unbinds it, to cut off an
 * instance at once. Retiring an instance (`deleteEngineInstanceIfUnused`) drops it with the row.
 * Sessions already open keep running their current statement and are terminated.
 */
export async function dropEngineInstanceRole(
  db: Kysely<Database>,
  engineInstanceId: string,
): Promise<boolean> {
  const unbound = await db
    .updateTable('engine_instance')
    .set({ db_role: null })
    .where('id', '=', engineInstanceId)
    .where('db_role', 'is not', null)
    .returning('db_role')
    .executeTakeFirst();
  return (await dropRole(db, engineInstanceRoleName(engineInstanceId))) || unbound !== undefined;
}

/**
 * Drops a login role of an instance if it exists: its sessions ended, its privileges in this database revoked
 * (DROP ROLE refuses a role that still holds any), the role gone. True when there was one.
 */
export async function dropRole(db: Kysely<Database>, role: string): Promise<boolean> {
  return await db.transaction().execute(async (trx) => {
    const exists = await sql<{
      n: number;
    }>`select count(*)::int as n from pg_roles where rolname = ${role}`.execute(trx);
    if ((exists.rows[0]?.n ?? 0) === 0) return false;
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where usename = ${role}`.execute(trx);
    await sql`drop owned by ${sql.id(role)}`.execute(trx);
    await sql`drop role ${sql.id(role)}`.execute(trx);
    return true;
  });
}

/** Who this session is: its login role and the instance that role is bound to (undefined: none). */
export interface SessionRole {
  role: string;
  engineInstanceId: string | undefined;
  /** True when the role owns the schema's tables (the backend's role): row-level security does not apply. */
  ownsTables: boolean;
}

export async function sessionRole(db: Kysely<Database>): Promise<SessionRole> {
  const { rows } = await sql<{ role: string; instance: string | null; owns: boolean }>`
    select session_user::text as role, gitops_agent_instance() as instance,
      pg_has_role(session_user, (select relowner from pg_class where oid = 'engine_instance'::regclass), 'USAGE')
        as owns`.execute(db);
  const row = rows[0];
  if (!row) throw new Error('no answer to the session role query');
  return { role: row.role, engineInstanceId: row.instance ?? undefined, ownsTables: row.owns };
}

/**
 * An agent's registration with its own role: the row its role is bound to, after checking that it is the
 * instance the agent is configured as (`name`) and serves that namespace on the cluster it was first started on
 * (the database refuses anything else and writes nothing). A TerminalError names both sides.
 */
export async function registerAgent(
  db: Kysely<Database>,
  input: { name: string; namespaceName: string; namespaceUid: string; clusterIdentity: string },
): Promise<EngineInstanceRow> {
  const me = await sessionRole(db);
  const bound = me.engineInstanceId
    ? await db
        .selectFrom('engine_instance')
        .select('name')
        .where('id', '=', me.engineInstanceId)
        .executeTakeFirst()
    : undefined;
  if (!bound) {
    throw new TerminalError(
      ErrorCode.configInvalid,
      `database role "${me.role}" is not the role of any admitted engine instance; this agent is configured as engine instance "${input.name}": admit it (kubectl gitops instances admit ${input.name} --namespace ${input.namespaceName}) and give the agent the connection string it prints`,
    );
  }
  if (bound.name !== input.name) {
    throw new TerminalError(
      ErrorCode.configInvalid,
      `database role "${me.role}" belongs to engine instance "${bound.name}"; this agent is configured as engine instance "${input.name}" (ENGINE_INSTANCE_NAME)`,
    );
  }
  try {
    const { rows } = await sql<EngineInstanceRow>`
      select * from gitops_agent_register(${input.namespaceName}, ${input.namespaceUid}, ${input.clusterIdentity})`.execute(
      db,
    );
    const row = rows[0];
    if (!row) throw new Error('the registration returned no row');
    return row;
  } catch (err) {
    if ((err as { code?: unknown }).code === '42501') {
      throw new TerminalError(ErrorCode.configInvalid, (err as Error).message);
    }
    throw err;
  }
}

/**
 * The connection string of an agent: `adminUrl` (the backend's) with the instance role's name and password
 * instead of the backend's; host, port, database and TLS parameters kept.
 */
export function agentDatabaseUrl(
  adminUrl: string,
  admitted: Pick<AdmittedEngineInstance, 'role' | 'password'>,
): string {
  const url = new URL(adminUrl);
  url.username = encodeURIComponent(admitted.role);
  url.password = encodeURIComponent(admitted.password);
  return url.toString();
}
