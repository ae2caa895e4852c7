/**
 * `createNewServiceAccount: true`: with the user's credentials, create on the target cluster a
 * ServiceAccount `argocd-manager-<cr uid>` in kube-system, a ClusterRole/ClusterRoleBinding giving it
 * full access (what Argo CD's `argocd cluster add` installs), and a token from the TokenRequest API.
 * Removed again when the ManagedEnvironment is deleted (the backend keeps a finalizer for that).
 */
import { MANAGED_BY_LABELS } from '@gitops/api';
import {
  createUnlessExists,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  requestServiceAccountToken,
} from '@gitops/shared';

export const SERVICE_ACCOUNT_NAMESPACE = 'kube-system';

/** Token lifetime requested from the TokenRequest API (the API server may cap it; we re-request on failure). */
const TOKEN_EXPIRATION_SECONDS = 365 * 24 * 3600;

export function serviceAccountName(crUid: string): string {
  return `argocd-manager-${crUid}`;
}

/** Creates (idempotently) the ServiceAccount, ClusterRole and ClusterRoleBinding; returns a fresh token. */
export async function installServiceAccount(
  kc: KubeConfig,
  crUid: string,
  signal: AbortSignal,
): Promise<string> {
  const name = serviceAccountName(crUid);
  const metadata = { name, labels: MANAGED_BY_LABELS };
  // In this order, as removeServiceAccount deletes them the other way round.
  const objects: [collectionPath: string, object: KubeObject][] = [
    [
      `/api/v1/namespaces/${SERVICE_ACCOUNT_NAMESPACE}/serviceaccounts`,
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { ...metadata, namespace: SERVICE_ACCOUNT_NAMESPACE },
      },
    ],
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata,
        rules: [
          { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
          { nonResourceURLs: ['*'], verbs: ['*'] },
        ],
      },
    ],
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata,
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
        subjects: [{ kind: 'ServiceAccount', name, namespace: SERVICE_ACCOUNT_NAMESPACE }],
      },
    ],
  ];
  for (const [collectionPath, object] of objects)
    await createUnlessExists(kc, collectionPath, object, signal);
  return await requestServiceAccountToken(
    kc,
    { namespace: SERVICE_ACCOUNT_NAMESPACE, name },
    TOKEN_EXPIRATION_SECONDS,
    signal,
  );
}

/** Deletes the ServiceAccount, ClusterRole and ClusterRoleBinding (missing ones are fine). */
export async function removeServiceAccount(
  kc: KubeConfig,
  crUid: string,
  signal: AbortSignal,
): Promise<void> {
  const name = serviceAccountName(crUid);
  for (const path of [
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`,
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`,
    `/api/v1/namespaces/${SERVICE_ACCOUNT_NAMESPACE}/serviceaccounts/${name}`,
  ]) {
    try {
      await kubeRequest(kc, { method: HttpMethod.DELETE, path, signal });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
