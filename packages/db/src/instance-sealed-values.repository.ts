/**
 * Credentials sealed for the engine instance that uses them (migration 0013). The backend keeps every
 * credential sealed with its own key (the `*_sealed` columns, sealing.ts) and seals, for each instance, what
 * that instance needs with the instance's published public key (instance-sealing.ts); an agent opens only
 * those, with the private key it keeps on its own cluster.
 *
 * What an instance needs is what row-level security lets it read (migration 0012): the cluster credentials of
 * the environments of its tenants and of those its applications target (also while it releases them in a
 * move), and the repository credentials placed on it.
 */
import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from './database.ts';
import { sealForInstance } from './instance-sealing.ts';
import { valuesBy } from './keyed-rows.ts';
import { SealContext, type Sealer } from './sealing.ts';

/** A credential field as instance_sealed_value names it, with its row's table and the backend's seal context. */
export const INSTANCE_SEALED_FIELDS = {
  bearer_token: { table: 'cluster_credentials', context: SealContext.bearerToken },
  username: { table: 'repository_credentials', context: SealContext.username },
  password: { table: 'repository_credentials', context: SealContext.password },
  ssh_private_key: { table: 'repository_credentials', context: SealContext.sshPrivateKey },
} as const;
export type InstanceSealedField = keyof typeof INSTANCE_SEALED_FIELDS;

/** The context a field of a row is sealed under for an instance: the value opens only for that row and field. */
export function instanceSealContext(field: InstanceSealedField, rowId: string): string {
  return `${INSTANCE_SEALED_FIELDS[field].context}:${rowId}`;
}

/** An agent publishes a public key of its own instance, which the backend then seals with (migration 0013). */
export async function publishInstanceKey(
  db: Kysely<Database>,
  key: { keyId: string; publicKey: Uint8Array },
): Promise<void> {
  await sql`select gitops_agent_publish_key(${key.keyId}, ${Buffer.from(key.publicKey)})`.execute(db);
}

/** What an agent needs to know about its keys: the one sealed with now, a rotation asked for, those in use. */
export interface InstanceKeyState {
  sealingKeyId: string | null;
  rotationRequested: boolean;
  /** Key ids of the values sealed for the instance now (an older private key is needed while listed). */
  keyIdsInUse: string[];
}

/** The key ids of the values sealed for an instance now. */
const keyIdsInUse = valuesBy('instance_sealed_value', 'key_id', 'engine_instance_id', { distinct: true });

export async function getInstanceKeyState(
  db: Kysely<Database>,
  engineInstanceId: string,
  /** `keysInUse: false`: skip listing the key ids in use (an agent holding one key needs no answer). */
  options: { keysInUse?: boolean } = {},
): Promise<InstanceKeyState> {
  const instance = await db
    .selectFrom('engine_instance')
    .select(['sealing_key_id', 'key_rotation_requested_at'])
    .where('id', '=', engineInstanceId)
    .executeTakeFirst();
  if (options.keysInUse === false) {
    return {
      sealingKeyId: instance?.sealing_key_id ?? null,
      rotationRequested: instance?.key_rotation_requested_at != null,
      keyIdsInUse: [],
    };
  }
  return {
    sealingKeyId: instance?.sealing_key_id ?? null,
    rotationRequested: instance?.key_rotation_requested_at != null,
    keyIdsInUse: await keyIdsInUse(db, engineInstanceId),
  };
}

/** An operator asks an instance's agent for a new key (`kubectl gitops instances rotate-key`). */
export async function requestInstanceKeyRotation(db: Kysely<Database>, name: string): Promise<boolean> {
  const result = await db
    .updateTable('engine_instance')
    .set({ key_rotation_requested_at: sql<Date>`now()` })
    .where('name', '=', name)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** One field sealed for an instance. */
export interface InstanceSealedValue {
  field: InstanceSealedField;
  keyId: string;
  sealed: Buffer;
  /** The credential row's updated_at when it was sealed: current when equal to the row's. */
  sourceUpdatedAt: Date;
}

/** The fields of one credential row sealed for `engineInstanceId`. */
export async function listInstanceSealedValues(
  db: Kysely<Database>,
  engineInstanceId: string,
  row: { clusterCredentialsId: string } | { repositoryCredentialsId: string },
): Promise<InstanceSealedValue[]> {
  let query = db
    .selectFrom('instance_sealed_value')
    .select(['field', 'key_id', 'sealed', 'source_updated_at'])
    .where('engine_instance_id', '=', engineInstanceId);
  query =
    'clusterCredentialsId' in row
      ? query.where('cluster_credentials_id', '=', row.clusterCredentialsId)
      : query.where('repository_credentials_id', '=', row.repositoryCredentialsId);
  const rows = await query.execute();
  return rows.map((r) => ({
    field: r.field as InstanceSealedField,
    keyId: r.key_id,
    sealed: r.sealed,
    sourceUpdatedAt: r.source_updated_at,
  }));
}

/** Which credentials to look at: those of some tenants, of some instances, or all. */
export type SealingScope =
  | { clusterUserIds?: readonly string[]; engineInstanceIds?: readonly string[] }
  | 'all';

export interface SealingResult {
  /** Values sealed (new, changed, or for a new key). */
  sealed: number;
  /** Values removed: no longer needed by their instance. */
  removed: number;
  /** Instances that need values but have published no key yet (their agent has not started). */
  waitingForKey: string[];
  /** Values the backend could not open with its own keys (reported, left as they are). */
  unreadable: number;
}

interface NeededRow {
  instance_id: string;
  cluster_credentials_id: string | null;
  repository_credentials_id: string | null;
  field: InstanceSealedField;
  source: Buffer;
  source_updated_at: Date;
  key_id: string | null;
  public_key: Buffer | null;
  sealed_key_id: string | null;
  sealed_source_updated_at: Date | null;
}

/**
 * Brings the values sealed for instances in line with what each needs, within `scope`: seals what is missing,
 * changed since, or sealed with a key other than the instance's current one, and removes what an instance no
 * longer needs. Idempotent; safe beside another backend doing the same (a value is never replaced by one
 * sealed from an older row).
 */
export async function sealCredentialsForInstances(
  db: Kysely<Database>,
  sealer: Sealer,
  scope: SealingScope,
): Promise<SealingResult> {
  const tenants = scope === 'all' ? null : [...(scope.clusterUserIds ?? [])];
  const instances = scope === 'all' ? null : [...(scope.engineInstanceIds ?? [])];
  const all = scope === 'all';
  const inScope = (tenant: RawBuilder<unknown>, instance: RawBuilder<unknown>) =>
    sql<boolean>`(${all} or ${tenant} = any(${tenants ?? []}::uuid[]) or ${instance} = any(${instances ?? []}::uuid[]))`;
  const needed = await sql<NeededRow>`
    with needed as (
      select distinct inst.instance_id, c.id as cluster_credentials_id, null::uuid as repository_credentials_id,
        'bearer_token' as field, c.bearer_token_sealed as source, c.updated_at as source_updated_at
      from cluster_credentials c
      join managed_environment e on e.cluster_credentials_id = c.id
      cross join lateral (
        select u.engine_instance_id as instance_id from cluster_user u
          where u.id = e.cluster_user_id and u.engine_instance_id is not null
        union select a.engine_instance_id from application a where a.managed_environment_id = e.id
        union select a.releasing_engine_instance_id from application a
          where a.managed_environment_id = e.id and a.releasing_engine_instance_id is not null
      ) inst
      where ${inScope(sql`c.cluster_user_id`, sql`inst.instance_id`)}
      union all
      select r.engine_instance_id, null, r.id, f.field, f.source, r.updated_at
      from repository_credentials r
      cross join lateral (values ('username', r.username_sealed), ('password', r.password_sealed),
        ('ssh_private_key', r.ssh_private_key_sealed)) f(field, source)
      where f.source is not null and ${inScope(sql`r.cluster_user_id`, sql`r.engine_instance_id`)}
    )
    select n.*, k.key_id, k.public_key, s.key_id as sealed_key_id, s.source_updated_at as sealed_source_updated_at
    from needed n
    join engine_instance ei on ei.id = n.instance_id
    left join engine_instance_key k on k.engine_instance_id = ei.id and k.key_id = ei.sealing_key_id
    left join instance_sealed_value s on s.engine_instance_id = n.instance_id
      and coalesce(s.cluster_credentials_id, s.repository_credentials_id)
        = coalesce(n.cluster_credentials_id, n.repository_credentials_id)
      and s.field = n.field`.execute(db);

  const result: SealingResult = { sealed: 0, removed: 0, waitingForKey: [], unreadable: 0 };
  const waiting = new Set<string>();
  const keep = new Set<string>();
  for (const row of needed.rows) {
    const rowId = (row.cluster_credentials_id ?? row.repository_credentials_id) as string;
    keep.add(`${row.instance_id}/${rowId}/${row.field}`);
    if (row.key_id === null || row.public_key === null) {
      waiting.add(row.instance_id);
      continue;
    }
    const current =
      row.sealed_key_id === row.key_id &&
      row.sealed_source_updated_at?.getTime() === row.source_updated_at.getTime();
    if (current) continue;
    let plaintext: string;
    try {
      plaintext = sealer.openString(row.source, INSTANCE_SEALED_FIELDS[row.field].context);
    } catch {
      result.unreadable++;
      continue;
    }
    const sealed = await sealForInstance(
      { keyId: row.key_id, publicKey: row.public_key },
      plaintext,
      instanceSealContext(row.field, rowId),
    );
    const written = await upsert(db, row, sealed);
    // A row changed meanwhile (its own notification seals it again), or the credential is gone.
    if (written) result.sealed++;
  }
  result.waitingForKey = [...waiting];
  return { ...result, removed: await removeUnneeded(db, inScope, keep) };
}

/** Writes one sealed value unless a newer one is there; false when nothing was written. */
async function upsert(db: Kysely<Database>, row: NeededRow, sealed: Buffer): Promise<boolean> {
  try {
    const written = await sql`
      insert into instance_sealed_value
        (engine_instance_id, cluster_credentials_id, repository_credentials_id, field, key_id, sealed, source_updated_at)
      values (${row.instance_id}::uuid, ${row.cluster_credentials_id}::uuid, ${row.repository_credentials_id}::uuid,
        ${row.field}, ${row.key_id}, ${sealed}, ${row.source_updated_at})
      on conflict (engine_instance_id, (coalesce(cluster_credentials_id, repository_credentials_id)), field)
      do update set key_id = excluded.key_id, sealed = excluded.sealed, source_updated_at = excluded.source_updated_at
        where instance_sealed_value.source_updated_at <= excluded.source_updated_at`.execute(db);
    return (written.numAffectedRows ?? 0n) > 0n;
  } catch (err) {
    // 23503: the credential row was deleted meanwhile (its values go with it).
    if ((err as { code?: unknown }).code === '23503') return false;
    throw err;
  }
}

/** Removes the values instances in scope hold but no longer need (`keep`: instance/row/field). */
async function removeUnneeded(
  db: Kysely<Database>,
  inScope: (tenant: RawBuilder<unknown>, instance: RawBuilder<unknown>) => RawBuilder<boolean>,
  keep: ReadonlySet<string>,
): Promise<number> {
  let removed = 0;
  const held = await sql<{ engine_instance_id: string; row_id: string; field: string }>`
    select s.engine_instance_id, coalesce(s.cluster_credentials_id, s.repository_credentials_id) as row_id, s.field
    from instance_sealed_value s
    left join cluster_credentials c on c.id = s.cluster_credentials_id
    left join repository_credentials r on r.id = s.repository_credentials_id
    where ${inScope(sql`coalesce(c.cluster_user_id, r.cluster_user_id)`, sql`s.engine_instance_id`)}`.execute(
    db,
  );
  for (const row of held.rows) {
    if (keep.has(`${row.engine_instance_id}/${row.row_id}/${row.field}`)) continue;
    const deleted = await sql`
      delete from instance_sealed_value
      where engine_instance_id = ${row.engine_instance_id}::uuid
        and coalesce(cluster_credentials_id, repository_credentials_id) = ${row.row_id}::uuid
        and field = ${row.field}`.execute(db);
    removed += Number(deleted.numAffectedRows ?? 0n);
  }
  return removed;
}
