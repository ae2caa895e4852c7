import { type Kysely, sql, type Transaction } from 'kysely';
import type { ApplicationStateRow, Database, JsonValue } from './database.ts';
import { rowBy } from './keyed-rows.ts';
import { NOTIFICATION_CHANNELS } from './notify.ts';
import { jsonObjectOfPayload, UUID } from './operation.repository.ts';

/**
 * The agent's compact projection of an Argo CD Application's status. Written only when it changed; the
 * table's trigger then NOTIFYs `gitops_application_state_changed` with the application id, and the backend's
 * own state channel with the row (migration 0017, `applicationStateOfNotification`).
 */

export type WriteApplicationStateResult = 'changed' | 'unchanged' | 'application-missing';

/**
 * Stores the projection if it differs from the stored one (jsonb equality: key order does not matter).
 * 'application-missing' when the application row does not exist (deleted meanwhile); nothing is written.
 * With `engineInstanceId` (the writing agent's), also when the row's Argo CD Application is not that
 * instance's: it moved to another instance and, once released here, only the new one reports its state.
 */
export async function writeApplicationState(
  db: Kysely<Database>,
  applicationId: string,
  state: { [key: string]: JsonValue },
  options: { engineInstanceId?: string } = {},
): Promise<WriteApplicationStateResult> {
  const [result] = await writeApplicationStates(db, [{ applicationId, state }], options);
  return result ?? 'application-missing';
}

/**
 * writeApplicationState for several applications in one statement (a second one only when some were not
 * written, to tell unchanged from missing); one result per item, in order. An application listed twice gets
 * its last state.
 */
export async function writeApplicationStates(
  db: Kysely<Database>,
  items: readonly { applicationId: string; state: { [key: string]: JsonValue } }[],
  options: { engineInstanceId?: string } = {},
): Promise<WriteApplicationStateResult[]> {
  const latest = new Map(items.map((item) => [item.applicationId, JSON.stringify(item.state)]));
  const ids = [...latest.keys()];
  const instance = options.engineInstanceId ?? null;
  // The instance whose Argo CD holds the row's Application: the releasing one during a move, else its own.
  const heldHere = sql<boolean>`(${instance}::uuid is null or coalesce(a.releasing_engine_instance_id, a.engine_instance_id) = ${instance}::uuid)`;
  const written = await sql<{ application_id: string }>`
    insert into application_state (application_id, state)
    select a.id, v.state
    from unnest(${ids}::uuid[], ${[...latest.values()]}::jsonb[]) as v(id, state)
    join application a on a.id = v.id
    where ${heldHere}
    on conflict (application_id) do update set state = excluded.state
      where application_state.state is distinct from excluded.state
    returning application_id`.execute(db);
  const changed = new Set(written.rows.map((row) => row.application_id));
  const rest = ids.filter((id) => !changed.has(id));
  const present = new Set<string>();
  if (rest.length > 0) {
    const found = await sql<{ id: string }>`
      select a.id from application a where a.id = any(${rest}::uuid[]) and ${heldHere}`.execute(db);
    for (const row of found.rows) present.add(row.id);
  }
  return items.map(({ applicationId }) =>
    changed.has(applicationId) ? 'changed' : present.has(applicationId) ? 'unchanged' : 'application-missing',
  );
}

export const getApplicationState = rowBy('application_state', 'application_id');

/**
 * Announces, as part of `trx`, that what the status path shows of these applications changed although their
 * state did not (moveTenant: their engine instance): on both channels the trigger uses, with the id alone on the
 * backend's, so it reads each row back. One statement.
 */
export async function notifyApplicationStatesChanged(
  trx: Transaction<Database>,
  applicationIds: readonly string[],
): Promise<void> {
  if (applicationIds.length === 0) return;
  await sql`
    select pg_notify(${NOTIFICATION_CHANNELS.applicationStateChanged}, id::text),
      pg_notify((select state_name from backend_channel), json_build_object('application_id', id)::text)
    from unnest(${applicationIds}::uuid[]) as id`.execute(trx);
}

/** What the status path shows of an application: its state and the name of the engine instance it is on. */
export type ApplicationStateWithEngineInstance = Pick<ApplicationStateRow, 'state'> & {
  engine_instance_name: string;
};

/** The state with the name of the engine instance its application is on (one statement, for the status path). */
export async function getApplicationStateWithEngineInstance(
  db: Kysely<Database>,
  applicationId: string,
): Promise<(ApplicationStateRow & ApplicationStateWithEngineInstance) | undefined> {
  return await db
    .selectFrom('application_state as s')
    .innerJoin('application as a', 'a.id', 's.application_id')
    .innerJoin('engine_instance as e', 'e.id', 'a.engine_instance_id')
    .selectAll('s')
    .select('e.name as engine_instance_name')
    .where('s.application_id', '=', applicationId)
    .executeTakeFirst();
}

/** An application_state change as a notification announces it. */
export interface ApplicationStateNotification {
  applicationId: string;
  /** The state and its instance's name when the payload carried them (nothing to read back). */
  carried?: ApplicationStateWithEngineInstance;
}

/**
 * The change a notification announces: on `gitops_application_state_changed` the application id; on the
 * backend's own state channel (migration 0017) `{"application_id", "state", "engine_instance_name"}`, or
 * `{"application_id"}` alone when the row would not fit a payload or only the instance changed (moveTenant).
 * Anything else (not an id, not such an object) is undefined.
 */
export function applicationStateOfNotification(payload: string): ApplicationStateNotification | undefined {
  if (UUID.test(payload)) return { applicationId: payload };
  const value = jsonObjectOfPayload(payload);
  if (value === undefined) return undefined;
  const { application_id, state, engine_instance_name } = value;
  if (typeof application_id !== 'string' || !UUID.test(application_id)) return undefined;
  if (state === undefined || typeof engine_instance_name !== 'string')
    return { applicationId: application_id };
  return { applicationId: application_id, carried: { state: state as JsonValue, engine_instance_name } };
}
