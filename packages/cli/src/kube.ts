/** The Kubernetes reads and writes of the CLI, through @gitops/shared's kubeRequest (one client for the project). */
import { Kinds } from '@gitops/api';
import {
  collectionPath,
  getPathIfExists,
  HttpMethod,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
} from '@gitops/shared';

/** A condition as every kind of ours writes it (metav1.Condition, or the GitOpsDeployment's own shape). */
export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

export async function getOrUndefined(kc: KubeConfig, path: string): Promise<KubeObject | undefined> {
  return (await getPathIfExists(kc, path)) as KubeObject | undefined;
}

export async function listObjects(kc: KubeConfig, path: string): Promise<KubeObject[]> {
  const list = (await kubeRequest(kc, { method: HttpMethod.GET, path })) as { items?: KubeObject[] };
  return list.items ?? [];
}

export function conditionsOf(object: KubeObject | undefined): Condition[] {
  const conditions = (object?.status as { conditions?: unknown } | undefined)?.conditions;
  return Array.isArray(conditions) ? (conditions as Condition[]) : [];
}

export function conditionOf(object: KubeObject | undefined, type: string): Condition | undefined {
  return conditionsOf(object).find((c) => c.type === type);
}

export const namespacePath = (name: string) => `/api/v1/namespaces/${encodeURIComponent(name)}`;

/** The GitOpsDeployments of one namespace, or of every namespace (`undefined`: -A). */
export const gitOpsDeploymentsPath = (namespace: string | undefined) =>
  collectionPath({ ...Kinds.GitOpsDeployment.resource, namespace });

export const engineInstancesPath = () => collectionPath(Kinds.GitOpsEngineInstance.resource);

export const engineInstancePath = (name: string) => `${engineInstancesPath()}/${encodeURIComponent(name)}`;

export const configMapPath = (namespace: string, name: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps/${encodeURIComponent(name)}`;

export const crdPath = (name: string) =>
  `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(name)}`;

/** A JSON merge patch of one object. */
export async function mergePatch(kc: KubeConfig, path: string, body: unknown): Promise<KubeObject> {
  return (await kubeRequest(kc, {
    method: HttpMethod.PATCH,
    path,
    body,
    contentType: 'application/merge-patch+json',
  })) as KubeObject;
}
