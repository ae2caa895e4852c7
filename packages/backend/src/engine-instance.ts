/**
 * Registers the engine instance (the Argo CD namespace this deployment of the service serves) at start,
 * as the cluster-agent does too (docs/contracts/core-pipeline.md). The namespace must exist: it is
 * never created here.
 */
import {
  type Database,
  type EngineInstanceRow,
  getEngineInstanceByName,
  upsertEngineInstance,
} from '@gitops/db';
import {
  ErrorCode,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  kubeRequest,
  TerminalError,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { isJsonObject } from './json.ts';

async function namespaceUid(kc: KubeConfig, name: string): Promise<string | undefined> {
  try {
    const ns = await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: `/api/v1/namespaces/${encodeURIComponent(name)}`,
    });
    const uid = isJsonObject(ns) && isJsonObject(ns.metadata) ? ns.metadata.uid : undefined;
    return typeof uid === 'string' ? uid : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** kube-system's uid identifies a cluster across API server URLs; the URL is the fallback (RBAC). */
async function clusterIdentityOf(kc: KubeConfig): Promise<string> {
  const uid = await namespaceUid(kc, 'kube-system').catch(() => undefined);
  return uid ?? kc.getCurrentCluster()?.server ?? 'unknown';
}

/**
 * Upserts `engine_instance` (name, namespace, namespace uid). Writes nothing when the row already says
 * so, and keeps the cluster identity another process (the agent) recorded; a new row gets the uid of
 * `kube-system` (as the agent does), the usual stable identity of a cluster.
 * @throws TerminalError when the namespace does not exist.
 */
export async function registerEngineInstance(
  db: Kysely<Database>,
  kc: KubeConfig,
  instance: { name: string; namespace: string },
): Promise<EngineInstanceRow> {
  const uid = await namespaceUid(kc, instance.namespace);
  if (!uid) {
    throw new TerminalError(
      ErrorCode.invalidObject,
      `the Argo CD namespace "${instance.namespace}" (ARGOCD_NAMESPACE) does not exist: create it (and install Argo CD there) before starting the backend`,
    );
  }
  const existing = await getEngineInstanceByName(db, instance.name);
  if (existing && existing.namespace_name === instance.namespace && existing.namespace_uid === uid)
    return existing;
  const clusterIdentity = existing?.cluster_identity ?? (await clusterIdentityOf(kc));
  return await upsertEngineInstance(db, {
    name: instance.name,
    namespaceName: instance.namespace,
    namespaceUid: uid,
    clusterIdentity,
  });
}
