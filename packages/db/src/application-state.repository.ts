import { type Kysely, sql } from 'kysely';
import type { ApplicationStateRow, Database, JsonValue } from './database.ts';

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
  const json = JSON.stringify(state);
  const instance = options.engineInstanceId;
  // The instance whose Argo CD holds the row's Application: the releasing one during a move, else its own.
  const heldHere = sql<boolean>`(${instance ?? null}::uuid is null or coalesce(releasing_engine_instance_id, engine_instance_id) = ${instance ?? null}::uuid)`;
  const written = await db
    .insertInto('application_state')
    .columns(['application_id', 'state'])
    .expression((eb) =>
      eb
        .selectFrom('application')
        .select([
          sql<string>`${applicationId}::uuid`.as('application_id'),
          sql<string>`${json}::jsonb`.as('state'),
        ])
        .where('id', '=', applicationId)
        .where(heldHere),
    )
    .onConflict((conflict) =>
      conflict
        .column('application_id')
        .doUpdateSet(({ ref }) => ({ state: ref('excluded.state') }))
        .where(
          ({ ref }) =>
            sql<boolean>`${ref('application_state.state')} is distinct from ${ref('excluded.state')}`,
        ),
    )
    .returning('application_id')
    .executeTakeFirst();
  if (written) return 'changed';
  const exists = await db
    .selectFrom('application')
    .select('id')
    .where('id', '=', applicationId)
    .where(heldHere)
    .executeTakeFirst();
  return exists ? 'unchanged' : 'application-missing';
}

export async function getApplicationState(
  db: Kysely<Database>,
  applicationId: string,
): Promise<ApplicationStateRow | undefined> {
  return await db
    .selectFrom('application_state')
    .selectAll()
    .where('application_id', '=', applicationId)
    .executeTakeFirst();
}

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
