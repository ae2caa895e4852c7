/**
 * repository_credentials row → the Argo CD repository Secret `repo-cred-<id>` (pure). Project-scoped: the
 * `project` key is the tenant's AppProject, so another tenant's Applications can never use these credentials.
 */
import { ArgoCDSecretType, Label } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { AgentLabel, appProjectName } from '../argocd.ts';

/** The Argo CD repository Secret of a repository_credentials row. */
export function repositorySecretName(repositoryCredentialsId: string): string {
  return `repo-cred-${repositoryCredentialsId}`;
}

/** Label selector of every repository Secret the agent owns. */
export const REPOSITORY_SECRET_SELECTOR = `${Label.ArgoCDSecretType}=${ArgoCDSecretType.Repository},${AgentLabel.DatabaseId}`;

export interface RepositorySecretInput {
  id: string;
  clusterUserId: string;
  repositoryUrl: string;
  username?: string;
  password?: string;
  sshPrivateKey?: string;
  /** The Argo CD namespace. */
  namespace: string;
}

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/** The desired Secret (data base64-encoded, as the API server stores it). */
export function renderRepositorySecret(input: RepositorySecretInput): KubeObject & {
  type: string;
  data: Record<string, string>;
} {
  const data: Record<string, string> = {
    url: b64(input.repositoryUrl),
    project: b64(appProjectName(input.clusterUserId)),
  };
  if (input.sshPrivateKey !== undefined) data.sshPrivateKey = b64(input.sshPrivateKey);
  if (input.username !== undefined) data.username = b64(input.username);
  if (input.password !== undefined) data.password = b64(input.password);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: repositorySecretName(input.id),
      namespace: input.namespace,
      labels: {
        [Label.ArgoCDSecretType]: ArgoCDSecretType.Repository,
        [AgentLabel.DatabaseId]: input.id,
        [AgentLabel.ClusterUserId]: input.clusterUserId,
      },
    },
    type: 'Opaque',
    data,
  };
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
