import type { Db, OperationRow, ResourceOperation } from '@gitops/db';
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

/** What a reconcile of one resource is run with: the operations started for it (none: drift repair). */
export interface ReconcileContext {
  operations: readonly OperationRow[];
  signal: AbortSignal;
  logger: Logger;
}

/**
 * A reconcile of one resource, begun: its unfinished operations (the due ones just started, In_Progress) and
 * what makes Argo CD consistent with the database for it, given the operations the processor holds.
 */
export interface BegunReconcile {
  readonly found: readonly ResourceOperation[];
  run(context: ReconcileContext): Promise<ResourceOutcome>;
}

/**
 * Begins a reconcile of one resource (`<type>/<id>`): starts its due operations and gives them with the
 * reconcile to run. Assembled from the features' handlers (agent-feature.ts); run by the operation processor
 * (operation/operation.processor.ts).
 */
export type ResourceHandler = (resource: { type: string; id: string }) => Promise<BegunReconcile>;
