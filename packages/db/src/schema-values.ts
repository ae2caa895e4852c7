import type { Database } from './database.ts';

/**
 * Values of the enum-like text columns, as `as const` lists for code that needs them at run time
 * (validation, metrics labels). The SQL CHECK constraints are the source of truth: the generated types
 * carry them as literal unions, and the assertions at the end of this file make `pnpm typecheck` fail if a
 * list here drifts from the schema.
 */

export const OPERATION_STATES = ['Waiting', 'In_Progress', 'Completed', 'Failed'] as const;
export type OperationState = (typeof OPERATION_STATES)[number];

/** Terminal operation states. */
export const FINISHED_OPERATION_STATES = ['Completed', 'Failed'] as const satisfies readonly OperationState[];

export const OPERATION_RESOURCE_TYPES = [
  'Application',
  'ManagedEnvironment',
  'RepositoryCredentials',
  'SyncOperation',
  'AppProject',
] as const;
export type OperationResourceType = (typeof OPERATION_RESOURCE_TYPES)[number];

/** Kinds of the user-facing custom resources that own database rows. */
export const CR_KINDS = [
  'GitOpsDeployment',
  'GitOpsDeploymentSyncRun',
  'GitOpsDeploymentManagedEnvironment',
  'GitOpsDeploymentRepositoryCredential',
] as const;
export type CrKind = (typeof CR_KINDS)[number];

export const MANAGED_ENVIRONMENT_KINDS = ['Workspace', 'External'] as const;
export type ManagedEnvironmentKind = (typeof MANAGED_ENVIRONMENT_KINDS)[number];

export const SYNC_DESIRED_STATES = ['Running', 'Terminated'] as const;
export type SyncDesiredState = (typeof SYNC_DESIRED_STATES)[number];

export const SYNC_OUTCOMES = ['Succeeded', 'Failed', 'Error', 'Terminated'] as const;
export type SyncOutcome = (typeof SYNC_OUTCOMES)[number];

/** Kinds of repository a repository credential is for (Argo CD's repository Secret `type`). */
export const REPOSITORY_TYPES = ['git', 'helm', 'oci'] as const;
export type RepositoryType = (typeof REPOSITORY_TYPES)[number];

// Compile-time checks: each list equals the union generated from the schema.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;
type Column<T extends keyof Database, C extends keyof Database[T]> = Exclude<
  import('kysely').SelectType<Database[T][C]>,
  null
>;
export type SchemaValuesMatchDatabase = [
  Assert<Equal<OperationState, Column<'operation', 'state'>>>,
  Assert<Equal<OperationResourceType, Column<'operation', 'resource_type'>>>,
  Assert<Equal<CrKind, Column<'operation', 'owner_kind'>>>,
  Assert<Equal<CrKind, Column<'api_cr_mapping', 'cr_kind'>>>,
  Assert<Equal<ManagedEnvironmentKind, Column<'managed_environment', 'kind'>>>,
  Assert<Equal<SyncDesiredState, Column<'sync_operation', 'desired_state'>>>,
  Assert<Equal<SyncOutcome, Column<'sync_operation', 'outcome'>>>,
  Assert<Equal<RepositoryType, Column<'repository_credentials', 'repository_type'>>>,
];
