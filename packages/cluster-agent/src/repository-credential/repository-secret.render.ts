/**
 * repository_credentials row → the Argo CD repository Secrets `repo-cred-<id>` and `repo-cred-<id>-cluster`
 * (pure). Project-scoped: the `project` key is one of the tenant's AppProjects, so another tenant's
 * Applications can never use these credentials. Argo CD (v3.5 `getRepositorySecret`) gives an Application
 * only a Secret of its own project (or an unscoped one, which we never write), so each of the tenant's two
 * projects (app-project.render.ts) needs its own copy.
 */
import { ArgoCDSecretType, Label } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { AgentLabel, appProjectName, argoCdSecret, clusterAppProjectName } from '../argocd.ts';

/** Which of the tenant's AppProjects a repository Secret is scoped to. */
export type RepositoryProject = 'main' | 'cluster';

/** The Argo CD repository Secret of a repository_credentials row (for the tenant's `project`). */
export function repositorySecretName(
  repositoryCredentialsId: string,
  project: RepositoryProject = 'main',
): string {
  return project === 'main'
    ? `repo-cred-${repositoryCredentialsId}`
    : `repo-cred-${repositoryCredentialsId}-cluster`;
}

/** Label selector of every repository Secret the agent owns. */
export const REPOSITORY_SECRET_SELECTOR = `${Label.ArgoCDSecretType}=${ArgoCDSecretType.Repository},${AgentLabel.DatabaseId}`;

export interface RepositorySecretInput {
  id: string;
  clusterUserId: string;
  repositoryUrl: string;
  /**
   * git, helm or oci: the Secret's `type` key, as Argo CD reads it (v3.5 `secretToRepository`: a Helm
   * repository's index and an OCI registry are read only through a Secret of their type). Left out for git,
   * Argo CD's default, so the Secrets of git rows stay as they were.
   */
  repositoryType?: 'git' | 'helm' | 'oci';
  username?: string;
  password?: string;
  sshPrivateKey?: string;
  /** The Argo CD namespace. */
  namespace: string;
  /** The tenant's AppProject it is scoped to (default: the main one). */
  project?: RepositoryProject;
}

/** The desired Secret (data base64-encoded, as the API server stores it). */
export function renderRepositorySecret(input: RepositorySecretInput): KubeObject & {
  type: string;
  data: Record<string, string>;
} {
  const values: Record<string, string> = {
    url: input.repositoryUrl,
    project:
      input.project === 'cluster'
        ? clusterAppProjectName(input.clusterUserId)
        : appProjectName(input.clusterUserId),
  };
  if (input.repositoryType !== undefined && input.repositoryType !== 'git')
    values.type = input.repositoryType;
  if (input.sshPrivateKey !== undefined) values.sshPrivateKey = input.sshPrivateKey;
  if (input.username !== undefined) values.username = input.username;
  if (input.password !== undefined) values.password = input.password;
  return argoCdSecret(
    {
      name: repositorySecretName(input.id, input.project),
      namespace: input.namespace,
      secretType: ArgoCDSecretType.Repository,
      databaseId: input.id,
      clusterUserId: input.clusterUserId,
    },
    values,
  );
}

/** Both Secrets of a row: one per tenant AppProject. */
export function renderRepositorySecrets(
  input: Omit<RepositorySecretInput, 'project'>,
): ReturnType<typeof renderRepositorySecret>[] {
  return [
    renderRepositorySecret({ ...input, project: 'main' }),
    renderRepositorySecret({ ...input, project: 'cluster' }),
  ];
}

/** True when the live Secret differs from the desired one in what we own (labels we set, all data keys). */
export function repositorySecretDrifted(
  live: KubeObject | undefined,
  desired: ReturnType<typeof renderRepositorySecret>,
): boolean {
  if (!live) return true;
  const labels = live.metadata.labels ?? {};
  for (const [k, v] of Object.entries(desired.metadata.labels ?? {})) if (labels[k] !== v) return true;
  const data = (live as { data?: Record<string, unknown> }).data ?? {};
  const keys = new Set([...Object.keys(data), ...Object.keys(desired.data)]);
  for (const key of keys) if (data[key] !== desired.data[key]) return true;
  return false;
}
