/**
 * The cluster-agent's feature: the shared `Feature` shape (@gitops/shared feature.ts: informers, start,
 * stop) plus the operation resource types it handles. `buildAgent` is a list of these; the operation
 * processor dispatches each resource key to the one feature that handles its type.
 */
import {
  createSealer,
  type Db,
  type InstanceKeyring,
  type OperationResourceType,
  type OperationRow,
  type ResourceOperation,
} from '@gitops/db';
import {
  createInformer,
  ErrorCode,
  type Feature,
  type KeyControllerBuilder,
  type KubeConfig,
  type KubeObject,
  type Logger,
  type MapToKeys,
  type Registry,
  TerminalError,
} from '@gitops/shared';
import {
  type AgentContext,
  type ReconcileContext,
  type ResourceHandler,
  type ResourceOutcome,
  resourceKey,
} from './agent-context.ts';
import { AgentLabel, ApplicationResource, AppProjectResource, databaseIdOf, isUuid } from './argocd.ts';
import type { AgentConfig } from './config.ts';
import { type CredentialOpener, createCredentialOpener } from './credentials.ts';

/** What a feature gets for one reconcile of one of its resources. */
export interface ResourceContext {
  /** The operations started for this reconcile, oldest first (none: drift repair or an informer event). */
  readonly operations: readonly OperationRow[];
  /** The tenants that own those operations (de-duplicated). */
  readonly ownerUserIds: readonly string[];
  readonly signal: AbortSignal;
  readonly logger: Logger;
}

/** Makes Argo CD match the database for resource `id` (level-based). */
export type ResourceTypeHandler = (id: string, context: ResourceContext) => Promise<ResourceOutcome>;

/**
 * A handler whose reconcile needs a read that can come with the start of its resource's operations: `begin`
 * starts them and reads in one statement, and gives the reconcile with what it read.
 */
export interface ReadingResourceTypeHandler {
  begin(id: string): Promise<{
    found: readonly ResourceOperation[];
    reconcile: (context: ResourceContext) => Promise<ResourceOutcome>;
  }>;
}

/** The handler of each operation resource type a feature serves. */
export type ResourceHandlers = Partial<
  Record<OperationResourceType, ResourceTypeHandler | ReadingResourceTypeHandler>
>;

export interface AgentFeature extends Feature {
  /** The operation resource types this feature reconciles (each type is handled by one feature). */
  readonly handles: ResourceHandlers;
  /**
   * The informers whose events wake its resources on the resource queue (a `forKeys()` controller built by
   * the operation feature): each maps an object to resource keys, filtered by named predicates.
   */
  readonly watches?: (resources: KeyControllerBuilder) => void;
}

/**
 * The resource key of an object of ours: its database-id label (`managed-gitops.redhat.com/database-id`) as an
 * id of `resourceType`; nothing for an object without a valid one.
 */
export function keysOfDatabaseId(resourceType: OperationResourceType): MapToKeys<KubeObject> {
  return (object) => {
    const id = databaseIdOf(object);
    return id ? [resourceKey(resourceType, id)] : [];
  };
}

/** What every agent feature is built from (after the engine instance is registered). */
export interface FeatureContext extends AgentContext {
  readonly config: AgentConfig;
  /** Opens stored credentials: those sealed for this instance, with its key (credentials.ts). */
  readonly credentials: CredentialOpener;
  /** Queues `<resourceType>/<resourceId>` on the operation processor (operations and drift repair alike). */
  enqueue(resourceType: OperationResourceType, resourceId: string): void;
}

/** The context of the agent's features: its Argo CD namespace's Applications and AppProjects cached. */
export function createFeatureContext(deps: {
  config: AgentConfig;
  kc: KubeConfig;
  db: Db;
  logger: Logger;
  registry: Registry;
  engineInstanceId: string;
  enqueue: FeatureContext['enqueue'];
  /** The instance's private keys (undefined: the agent runs with the backend's role). */
  keyring: () => InstanceKeyring | undefined;
}): FeatureContext {
  const { config, kc, logger, registry } = deps;
  const namespace = config.argoCdNamespace;
  const argoCdInformer = (resource: { apiVersion: string; plural: string }) =>
    createInformer<KubeObject>({
      kubeConfig: kc,
      namespace,
      registry,
      logger,
      resyncPeriodMs: config.resyncIntervalMs,
      resource,
      labelSelector: AgentLabel.DatabaseId,
    });
  return {
    ...deps,
    namespace,
    credentials: createCredentialOpener({
      db: deps.db,
      engineInstanceId: deps.engineInstanceId,
      keyring: deps.keyring,
      sealer: config.encryptionKeys ? createSealer(config.encryptionKeys) : undefined,
    }),
    applications: argoCdInformer(ApplicationResource),
    appProjects: argoCdInformer(AppProjectResource),
  };
}

/**
 * The processor's handler, assembled from the features' handler tables. `startOperations` starts the due
 * operations of a resource whose handler reads nothing with them. A type no feature handles fails its
 * operations at once (TerminalError), as a newer backend's operation for an older agent must.
 * @throws Error when two features claim the same type.
 */
export function resourceHandlerOf(
  features: readonly AgentFeature[],
  startOperations: (resource: { type: string; id: string }) => Promise<readonly ResourceOperation[]>,
): ResourceHandler {
  const table = new Map<
    string,
    { feature: string; handler: ResourceTypeHandler | ReadingResourceTypeHandler }
  >();
  for (const feature of features) {
    for (const [type, handler] of Object.entries(feature.handles)) {
      if (!handler) continue;
      const other = table.get(type);
      if (other) throw new Error(`${type} is handled by both ${other.feature} and ${feature.name}`);
      table.set(type, { feature: feature.name, handler });
    }
  }
  const withOwners = ({ operations, signal, logger }: ReconcileContext): ResourceContext => ({
    operations,
    ownerUserIds: [...new Set(operations.map((op) => op.owner_user_id).filter(isUuid))],
    signal,
    logger,
  });
  return async (resource) => {
    const handler = table.get(resource.type)?.handler;
    if (handler && typeof handler !== 'function') {
      const { found, reconcile } = await handler.begin(resource.id);
      return { found, run: (context) => reconcile(withOwners(context)) };
    }
    const found = await startOperations(resource);
    return {
      found,
      async run(context) {
        if (!handler) {
          throw new TerminalError(
            ErrorCode.invalidObject,
            `${resource.type} operations are not supported by this cluster-agent version`,
          );
        }
        return await handler(resource.id, withOwners(context));
      },
    };
  };
}
