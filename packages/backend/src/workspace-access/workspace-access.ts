/**
 * Workspace access: how a tenant placed on an engine instance of another cluster still deploys its
 * GitOpsDeployments without an environment into its own namespace, on the cluster where that namespace lives
 * (docs/engine-instances.md, "Tenants on an instance of another cluster").
 *
 * The backend creates in the tenant's namespace a ServiceAccount bound to the ClusterRole `admin` by a
 * RoleBinding (so: that namespace only, nothing cluster-scoped), asks the TokenRequest API for a token, and
 * stores it sealed as the credentials of the tenant's Workspace environment (setWorkspaceCredentials). The
 * instance's agent then reaches the namespace through an Argo CD cluster Secret limited to it, as it does an
 * External environment. When the tenant comes back to an instance of its own cluster the credentials are
 * dropped and the ServiceAccount (so every token of it) and RoleBinding are deleted.
 */
import { readFileSync } from 'node:fs';
import { MANAGED_BY_LABELS } from '@gitops/api';
import { type ClusterCredentialsInput, SealContext, type Sealer } from '@gitops/db';
import {
  createUnlessExists,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  kubeRequest,
  requestServiceAccountToken,
} from '@gitops/shared';
import { isJsonObject } from '../json.ts';

/** The ServiceAccount in the tenant's namespace whose token a remote Argo CD deploys with. */
export const WORKSPACE_SERVICE_ACCOUNT = 'gitops-service-workspace';
const ROLE_BINDING = `${WORKSPACE_SERVICE_ACCOUNT}-admin`;
/** What marks the two objects as ours: nothing without it is ever deleted. */
/** Token lifetime asked of the TokenRequest API (the API server may cap it). */
const TOKEN_EXPIRATION_SECONDS = 365 * 24 * 3600;

/**
 * Thrown inside a transaction that would put a deployment without an environment on an instance of another
 * cluster while the tenant's Workspace has no credentials yet: the caller provisions them (outside any
 * transaction: API calls) and runs the transaction again with them.
 */
export class WorkspaceAccessNeededError extends Error {
  readonly instance: string;

  constructor(instance: string) {
    super(`the tenant's namespace needs credentials for engine instance ${instance} (another cluster)`);
    this.name = 'WorkspaceAccessNeededError';
    this.instance = instance;
  }
}

export interface WorkspaceAccess {
  /** Creates (idempotently) the ServiceAccount and RoleBinding in `namespace`; returns sealed credentials. */
  provision(namespace: string, signal?: AbortSignal): Promise<ClusterCredentialsInput>;
  /** Deletes the ServiceAccount and RoleBinding when they are ours (every token of the account dies with it). */
  remove(namespace: string, signal?: AbortSignal): Promise<void>;
}

export interface WorkspaceAccessOptions {
  kc: KubeConfig;
  sealer: Sealer;
  /** How an Argo CD on another cluster reaches this cluster's API server; empty: the backend's own URL. */
  apiUrl?: string;
  /** PEM file of that API server's CA, read at each provisioning; unset: the backend's own kubeconfig's CA. */
  caFile?: string;
}

/** The API server URL and CA (base64 PEM) a remote Argo CD is given for this cluster. */
function reachableCluster(options: WorkspaceAccessOptions): { apiUrl: string; caData: string | null } {
  const cluster = options.kc.getCurrentCluster();
  const apiUrl = options.apiUrl || cluster?.server || '';
  if (options.caFile) return { apiUrl, caData: readFileSync(options.caFile).toString('base64') };
  if (cluster?.caData) return { apiUrl, caData: cluster.caData };
  if (cluster?.caFile) return { apiUrl, caData: readFileSync(cluster.caFile).toString('base64') };
  return { apiUrl, caData: null };
}

export function createWorkspaceAccess(options: WorkspaceAccessOptions): WorkspaceAccess {
  const { kc, sealer } = options;

  async function deleteIfOurs(path: string, signal?: AbortSignal) {
    try {
      const live = await kubeRequest(kc, { method: HttpMethod.GET, path, ...(signal ? { signal } : {}) });
      const labels = isJsonObject(live) && isJsonObject(live.metadata) ? live.metadata.labels : undefined;
      if (
        !isJsonObject(labels) ||
        labels['app.kubernetes.io/managed-by'] !== MANAGED_BY_LABELS['app.kubernetes.io/managed-by']
      )
        return;
      await kubeRequest(kc, { method: HttpMethod.DELETE, path, ...(signal ? { signal } : {}) });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  return {
    async provision(namespace, signal) {
      const ns = encodeURIComponent(namespace);
      // Already there: an earlier attempt made it, or the user did (then the token request below fails if it
      // is not a ServiceAccount we may use, and nothing of theirs is changed).
      await createUnlessExists(
        kc,
        `/api/v1/namespaces/${ns}/serviceaccounts`,
        {
          apiVersion: 'v1',
          kind: 'ServiceAccount',
          metadata: { name: WORKSPACE_SERVICE_ACCOUNT, labels: MANAGED_BY_LABELS },
        },
        signal,
      );
      await createUnlessExists(
        kc,
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: ROLE_BINDING, labels: MANAGED_BY_LABELS },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
          subjects: [{ kind: 'ServiceAccount', name: WORKSPACE_SERVICE_ACCOUNT, namespace }],
        },
        signal,
      );
      const token = await requestServiceAccountToken(
        kc,
        { namespace, name: WORKSPACE_SERVICE_ACCOUNT },
        TOKEN_EXPIRATION_SECONDS,
        signal,
      );
      const { apiUrl, caData } = reachableCluster(options);
      return {
        apiUrl,
        bearerTokenSealed: sealer.seal(token, SealContext.bearerToken),
        allowInsecureSkipTlsVerify: false,
        namespaces: [namespace],
        clusterResources: false,
        caData,
      };
    },

    async remove(namespace, signal) {
      const ns = encodeURIComponent(namespace);
      await deleteIfOurs(
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${ROLE_BINDING}`,
        signal,
      );
      await deleteIfOurs(`/api/v1/namespaces/${ns}/serviceaccounts/${WORKSPACE_SERVICE_ACCOUNT}`, signal);
    },
  };
}
