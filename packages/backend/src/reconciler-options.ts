/**
 * What the backend's CR reconcilers (GitOpsDeployment, SyncRun, ManagedEnvironment, RepositoryCredential)
 * are each built with; every kind adds its own options.
 */
import type { Database, Sealer } from '@gitops/db';
import type { EventRecorder, Informer, KubeConfig, KubeObject } from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { LabelSelector } from './label-selector.ts';

export interface CrReconcilerOptions<T extends KubeObject> {
  db: Kysely<Database>;
  kc: KubeConfig;
  informer: Informer<T>;
  events: EventRecorder;
  /** Only CRs matching it are served (the informer uses the same selector). */
  selector?: LabelSelector;
  now?: () => Date;
}

/** The kinds whose rows hold credentials (sealed) on their tenant's engine instance. */
export interface CredentialsReconcilerOptions<T extends KubeObject> extends CrReconcilerOptions<T> {
  /** The cluster tenants' namespaces live on (the backend's own; read after start): placement stays on it. */
  tenantClusterIdentity?: () => string;
  sealer: Sealer;
}
