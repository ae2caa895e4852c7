/**
 * The Argo CD cluster Secret of an External environment (docs/api.md "Argo CD objects the agent owns"):
 * `managed-env-<id>`, label `argocd.argoproj.io/secret-type: cluster` + database-id; data `name`, `server`
 * (`<apiURL>?managedEnvironment=<id>`, so several environments on one API server stay distinct in Argo CD),
 * `config` (bearer token + TLS), `namespaces` / `clusterResources` when set, `project` (tenant AppProject).
 */
import { ArgoCDSecretType } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { appProjectName, argoCdSecret, managedEnvironmentClusterName } from '../argocd.ts';

export interface ClusterSecretInput {
  environmentId: string;
  clusterUserId: string;
  apiUrl: string;
  /** Plaintext (unsealed just before rendering; never logged). */
  bearerToken: string;
  insecure: boolean;
  namespaces: readonly string[];
  clusterResources: boolean;
  /** Base64 PEM CA bundle of the API server (Argo CD's tlsClientConfig.caData); null: system trust store. */
  caData?: string | null | undefined;
  /** The Argo CD namespace. */
  namespace: string;
}

/** The cluster `server` of an environment. */
export function clusterServer(apiUrl: string, environmentId: string): string {
  return `${apiUrl}?managedEnvironment=${environmentId}`;
}

/** The string data of the cluster Secret (before base64). */
export function clusterSecretStringData(input: ClusterSecretInput): Record<string, string> {
  const data: Record<string, string> = {
    name: managedEnvironmentClusterName(input.environmentId),
    server: clusterServer(input.apiUrl, input.environmentId),
    config: JSON.stringify({
      bearerToken: input.bearerToken,
      tlsClientConfig: {
        insecure: input.insecure,
        ...(input.caData && !input.insecure ? { caData: input.caData } : {}),
      },
    }),
    project: appProjectName(input.clusterUserId),
  };
  if (input.namespaces.length > 0) {
    data.namespaces = input.namespaces.join(',');
    data.clusterResources = String(input.clusterResources);
  }
  return data;
}

export function renderClusterSecret(input: ClusterSecretInput): KubeObject {
  return argoCdSecret(
    {
      name: managedEnvironmentClusterName(input.environmentId),
      namespace: input.namespace,
      secretType: ArgoCDSecretType.Cluster,
      databaseId: input.environmentId,
      clusterUserId: input.clusterUserId,
    },
    clusterSecretStringData(input),
  );
}
