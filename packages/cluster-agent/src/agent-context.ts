import type { Db, OperationRow } from '@gitops/db';
import type { Informer, KubeConfig, KubeObject, Logger, Registry } from '@gitops/shared';

/** What the agent's controllers share once it has started. */
export interface AgentContext {
  kc: KubeConfig;
  db: Db;
  logger: Logger;
  registry: Registry;
  /** The Argo CD namespace this agent serves. */
  namespace: string;
  engineInstanceId: string;
  /** Argo CD Applications with our database-id label in `namespace`. */
  applications: Informer<KubeObject>;
  /** Argo CD AppProjects with our database-id label in `namespace`. */
  appProjects: Informer<KubeObject>;
}

/** The outcome of making Argo CD match the database for one resource. */
export type ResourceOutcome =
  /** Argo CD matches the database. `changed`: something had to be written or deleted. */
  | { status: 'done'; changed: boolean; message?: string }
  /**
   * Waiting for someone else (Argo CD removing its finalizer): operations stay In_Progress. `changed`:
   * this run wrote or deleted something (e.g. started the delete of an orphan).
   */
  | { status: 'pending'; reason: string; requeueAfterMs: number; changed?: boolean };

/** The resource key of the work queue: `<resource_type>/<resource_id>` (as in the operation table). */
export function resourceKey(resourceType: string, resourceId: string): string {
  return `${resourceType}/${resourceId}`;
}

export function parseResourceKey(key: string): { type: string; id: string } | undefined {
  const slash = key.indexOf('/');
  if (slash <= 0 || slash === key.length - 1) return undefined;
  return { type: key.slice(0, slash), id: key.slice(slash + 1) };
}

/**
 * Makes Argo CD consistent with the database for one resource (`<type>/<id>`), given the operations that
 * announced it (none: drift repair). Assembled from the features' handlers (agent-feature.ts); run by the
 * operation processor (operation/operation.processor.ts).
 */
export type ResourceHandler = (
  resource: { type: string; id: string },
  context: { operations: readonly OperationRow[]; signal: AbortSignal; logger: Logger },
) => Promise<ResourceOutcome>;
