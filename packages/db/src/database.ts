import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type * as Tables from './database.generated.ts';

/**
 * The Kysely `Database` interface. database.generated.ts is generated from the migrated schema
 * (scripts/generate-types.ts) and checked against it by schema-types.int.test.ts; kysely-codegen names the
 * interface `DB`, this file gives it the project's name and row aliases.
 */
export type Database = Tables.DB;

export type { Json, JsonValue } from './database.generated.ts';

/**
 * A database handle as `createDb` returns it, what every repository function takes first. Callers outside
 * this package hold one through this name, without depending on kysely themselves.
 */
export type Db = Kysely<Database>;

export type ClusterUserRow = Selectable<Tables.ClusterUser>;
export type EngineInstanceRow = Selectable<Tables.EngineInstance>;
export type ClusterCredentialsRow = Selectable<Tables.ClusterCredentials>;
export type ManagedEnvironmentRow = Selectable<Tables.ManagedEnvironment>;
export type ApplicationRow = Selectable<Tables.Application>;
export type ApplicationStateRow = Selectable<Tables.ApplicationState>;
export type SyncOperationRow = Selectable<Tables.SyncOperation>;
export type RepositoryCredentialsRow = Selectable<Tables.RepositoryCredentials>;
export type ApiCrMappingRow = Selectable<Tables.ApiCrMapping>;
export type OperationRow = Selectable<Tables.Operation>;

export type NewOperation = Insertable<Tables.Operation>;
export type OperationUpdate = Updateable<Tables.Operation>;
