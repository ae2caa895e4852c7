import { type Kysely, sql } from 'kysely';
import type { ApplicationStateRow, Database, JsonValue } from './database.ts';
import { rowBy } from './keyed-rows.ts';

/**
 * The agent's compact projection of an Argo CD Application's status. Written only when it changed; the
 * table's trigger then NOTIFYs `gitops_application_state_changed` with the application id.
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

/** The state with the name of the engine instance its application is on (one statement, for the status path). */
export async function getApplicationStateWithEngineInstance(
  db: Kysely<Database>,
  applicationId: string,
): Promise<(ApplicationStateRow & { engine_instance_name: string }) | undefined> {
  return await db
    .selectFrom('application_state as s')
    .innerJoin('application as a', 'a.id', 's.application_id')
    .innerJoin('engine_instance as e', 'e.id', 'a.engine_instance_id')
    .selectAll('s')
    .select('e.name as engine_instance_name')
    .where('s.application_id', '=', applicationId)
    .executeTakeFirst();
}
