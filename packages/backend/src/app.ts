/**
 * `buildBackend(config)`: the whole backend without ports or process signals (tests build it in-process;
 * main.ts adds the health server and signal handling). A context (backend-feature.ts), a list of features
 * and a manager (`createManager` of @gitops/shared) that runs them.
 *
 * start(): migrate the database and register the engine instance (the context's start steps, retried while
 * the database or the API server is briefly away), start every informer, open the LISTEN connection
 * (notifications.feature.ts), wait for the caches, then start the features in list order (stopped in
 * reverse). ready() is true from then on.
 */
import type { Database, EngineInstanceRow, Sealer } from '@gitops/db';
import { createManager, type Informer, type KubeConfig, type Logger, type Registry } from '@gitops/shared';
import type { Kysely } from 'kysely';
import { createAppStudio } from './appstudio.ts';
import {
  type BackendContextOptions,
  type BackendFeature,
  createBackendContext,
  isPermanentStartError,
} from './backend-feature.ts';
import type { BackendConfig } from './config.ts';
import { createEngineInstanceFeature } from './engine-instance/engine-instance.feature.ts';
import {
  createGitOpsDeploymentFeature,
  type GitOpsDeploymentFeature,
} from './gitops-deployment/gitops-deployment.feature.ts';
import { createInstanceSealingFeature } from './instance-sealing/instance-sealing.feature.ts';
import type { GitOpsDeploymentObject } from './kinds.ts';
import {
  createManagedEnvironmentFeature,
  type ManagedEnvironmentFeature,
} from './managed-environment/managed-environment.feature.ts';
import { createNotificationFeature } from './notifications/notifications.feature.ts';
import { createOperationRelayFeature, type OperationRelay } from './relay/operation-relay.ts';
import {
  createRepositoryCredentialsFeature,
  type RepositoryCredentialsFeature,
} from './repository-credential/repository-credentials.feature.ts';
import { createStatusFeature, type StatusFeature } from './status/status.feature.ts';
import { createSyncRunFeature, type SyncRunFeature } from './sync-run/sync-run.feature.ts';
import { createTenantMoveFeature, type TenantMoveFeature } from './tenant-move/tenant-move.feature.ts';
import { createTenantSweepFeature } from './tenant-sweep.ts';
import { createWorkspaceTokenRenewalFeature } from './workspace-access/workspace-access.feature.ts';

export type BuildBackendOptions = BackendContextOptions;

export interface Backend {
  start(): Promise<void>;
  /** Stops everything (draining running reconciles) and closes the database pool. Idempotent. */
  close(): Promise<void>;
  /** True once started and every informer cache has synced; false again while closing. */
  ready(): boolean;
  readonly db: Kysely<Database>;
  readonly kubeConfig: KubeConfig;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly sealer: Sealer;
  /** The GitOpsDeployment cache. */
  readonly informer: Informer<GitOpsDeploymentObject>;
  readonly deployments: GitOpsDeploymentFeature;
  readonly environments: ManagedEnvironmentFeature;
  readonly status: StatusFeature;
  readonly repositoryCredentials: RepositoryCredentialsFeature;
  readonly syncRuns: SyncRunFeature;
  readonly tenantMoves: TenantMoveFeature;
  /** Undefined when GITOPS_RELAY_ENABLED=false. */
  readonly relay: OperationRelay | undefined;
  /** The registered engine instance (after start). */
  engineInstance(): EngineInstanceRow;
}

export function buildBackend(config: BackendConfig, options: BuildBackendOptions = {}): Backend {
  const ctx = createBackendContext(config, options);
  // The features, in start order (stopped in reverse).
  const environments = createManagedEnvironmentFeature(ctx);
  const deployments = createGitOpsDeploymentFeature(ctx, { environments });
  const repositoryCredentials = createRepositoryCredentialsFeature(ctx);
  const syncRuns = createSyncRunFeature(ctx, { deployments });
  const status = createStatusFeature(ctx, { deployments });
  const relay = config.relayEnabled ? createOperationRelayFeature(ctx) : undefined;
  if (!relay)
    ctx.logger.warn(
      'the outbox relay is disabled (GITOPS_RELAY_ENABLED=false): no Operation CRs are created',
    );
  const tenantMoves = createTenantMoveFeature(ctx);
  const appStudio = createAppStudio(ctx, {
    deployments: deployments.informer,
    managedEnvironments: environments.informer,
  });
  const features: BackendFeature[] = [
    environments,
    deployments,
    repositoryCredentials,
    syncRuns,
    status,
    ...(relay ? [relay] : []),
    createEngineInstanceFeature(ctx),
    createTenantSweepFeature(ctx),
    tenantMoves,
    createWorkspaceTokenRenewalFeature(ctx),
    createInstanceSealingFeature(ctx),
    ...appStudio.features,
  ];
  const manager = createManager({
    name: 'backend',
    logger: ctx.logger,
    steps: [...ctx.startSteps, ...appStudio.steps],
    features: [...features, createNotificationFeature(ctx, features)],
    isPermanent: isPermanentStartError,
    release: () => ctx.db.destroy(),
  });

  return {
    db: ctx.db,
    kubeConfig: ctx.kc,
    registry: ctx.registry,
    logger: ctx.logger,
    sealer: ctx.sealer,
    informer: deployments.informer,
    deployments,
    environments,
    status,
    repositoryCredentials,
    syncRuns,
    tenantMoves,
    relay,
    engineInstance: ctx.engineInstance,
    ready: manager.ready,
    start: manager.start,
    close: manager.close,
  };
}
