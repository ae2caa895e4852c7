/**
 * Registers the engine instance (the Argo CD namespace this deployment of the service serves) at start,
 * as the cluster-agent does too (docs/contracts/core-pipeline.md). The namespace must exist: it is
 * never created here.
 */
import { type Database, type EngineInstanceRow, ensureEngineInstance } from '@gitops/db';
import {
  clusterIdentity,
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
  return await ensureEngineInstance(
    db,
    { name: instance.name, namespaceName: instance.namespace, namespaceUid: uid },
    () => clusterIdentity(kc),
  );
}
