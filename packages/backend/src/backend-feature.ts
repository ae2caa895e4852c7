/**
 * What every backend feature receives and what it adds to the shared feature shape (`Feature` of
 * @gitops/shared): the handlers it runs when a database notification arrives. `app.ts` builds one
 * context, a list of features, and routes each notification to the features that handle its channel.
 */
import type { Database, EngineInstanceRow, NOTIFICATION_CHANNELS, OperationRow, Sealer } from '@gitops/db';
import {
  createInformer,
  type EventRecorder,
  type Feature,
  type Informer,
  type KubeConfig,
  type KubeObject,
  type Logger,
  type Registry,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { BackendConfig } from './config.ts';
import type { LabelSelector } from './label-selector.ts';
import { createWorkspaceAccess, type WorkspaceAccess } from './workspace-access/workspace-access.ts';

export type NotificationChannel = keyof typeof NOTIFICATION_CHANNELS;

/**
 * The row of one notification shared by every feature that handles it: parsed from the payload (or, for a row
 * announced by id, read) once, however many controllers look at it.
 */
export interface NotificationReads {
  operation(): Promise<OperationRow | undefined>;
}

export interface BackendFeature extends Feature {
  /** The handler table: what the feature does with the payload of each channel it listens to. */
  readonly notifications?: Partial<
    Record<NotificationChannel, (payload: string, reads: NotificationReads) => Promise<void> | void>
  >;
}

export interface BackendContext {
  readonly config: BackendConfig;
  readonly db: Kysely<Database>;
  readonly kc: KubeConfig;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly events: EventRecorder;
  readonly sealer: Sealer;
  /** This backend's shard (GITOPS_BACKEND_SHARD) as a label selector. */
  readonly selector: LabelSelector;
  /** The registered engine instance (throws before start). */
  readonly engineInstance: () => EngineInstanceRow;
  /** Credentials for a tenant's namespace when its instance runs on another cluster (workspace-access.ts). */
  readonly workspaceAccess: WorkspaceAccess;
  /**
   * An informer with the backend's common settings (kubeconfig, metrics, resync period); custom resources
   * are limited to this shard (`sharded`), Secrets are selected by type instead (`fieldSelector`), optionally
   * trimmed before they are cached (`transform`, e.g. to their metadata when only their events matter).
   */
  informer(
    resource: { apiVersion: string; plural: string },
    select: { sharded: true } | { fieldSelector: string; transform?: (object: KubeObject) => KubeObject },
  ): Informer<KubeObject>;
}

export function createBackendContext(
  fields: Omit<BackendContext, 'informer' | 'workspaceAccess'>,
): BackendContext {
  const { config } = fields;
  return {
    ...fields,
    workspaceAccess: createWorkspaceAccess({
      kc: fields.kc,
      sealer: fields.sealer,
      apiUrl: config.tenantClusterApiUrl,
      ...(config.tenantClusterCaFile ? { caFile: config.tenantClusterCaFile } : {}),
    }),
    informer(resource, select) {
      return createInformer<KubeObject>({
        kubeConfig: fields.kc,
        resource,
        ...('sharded' in select
          ? { labelSelector: fields.selector.text }
          : { fieldSelector: select.fieldSelector, transform: select.transform }),
        registry: fields.registry,
        logger: fields.logger,
        resyncPeriodMs: fields.config.resyncIntervalMs,
      });
    },
  };
}
