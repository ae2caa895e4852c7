import type { Kysely } from 'kysely';
import type { Database, RepositoryCredentialsRow } from './database.ts';
import { deleteRowById, rowBy, updateRowById, valuesBy } from './keyed-rows.ts';
import type { RepositoryType } from './schema-values.ts';

/**
 * One row per GitOpsDeploymentRepositoryCredential. Credential columns hold sealed bytes (sealing.ts).
 * Becomes a repository Secret scoped to the tenant's AppProject, so it is never shared across tenants.
 */

export interface RepositoryCredentialsInput {
  clusterUserId: string;
  engineInstanceId: string;
  repositoryUrl: string;
  normalizedRepositoryUrl: string;
  /** What kind of repository it is (git when absent). */
  repositoryType?: RepositoryType;
  /** Name of the user's Secret holding the credentials. */
  secretName: string;
  usernameSealed: Buffer | null;
  passwordSealed: Buffer | null;
  sshPrivateKeySealed: Buffer | null;
}

function columns(input: Omit<RepositoryCredentialsInput, 'clusterUserId' | 'engineInstanceId'>) {
  return {
    repository_url: input.repositoryUrl,
    normalized_repository_url: input.normalizedRepositoryUrl,
    repository_type: input.repositoryType ?? 'git',
    secret_name: input.secretName,
    username_sealed: input.usernameSealed,
    password_sealed: input.passwordSealed,
    ssh_private_key_sealed: input.sshPrivateKeySealed,
  };
}

export async function insertRepositoryCredentials(
  db: Kysely<Database>,
  input: RepositoryCredentialsInput,
): Promise<RepositoryCredentialsRow> {
  return await db
    .insertInto('repository_credentials')
    .values({
      cluster_user_id: input.clusterUserId,
      engine_instance_id: input.engineInstanceId,
      ...columns(input),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updateRepositoryCredentials(
  db: Kysely<Database>,
  id: string,
  input: Omit<RepositoryCredentialsInput, 'clusterUserId' | 'engineInstanceId'>,
): Promise<RepositoryCredentialsRow | undefined> {
  return await updateRowById(db, 'repository_credentials', id, columns(input));
}

export const getRepositoryCredentials = rowBy('repository_credentials', 'id');

/** The normalised URLs of every repository credential on the engine instance (each once). */
export const listRepositoryCredentialUrlsOfEngineInstance = valuesBy(
  'repository_credentials',
  'normalized_repository_url',
  'engine_instance_id',
  { distinct: true },
);

/** Ids of every repository credential on the engine instance. */
export const listRepositoryCredentialIdsOfEngineInstance = valuesBy(
  'repository_credentials',
  'id',
  'engine_instance_id',
);

export const deleteRepositoryCredentials = deleteRowById('repository_credentials');
