/**
 * What every backend feature receives and what it adds to the shared feature shape (`Feature` of
 * @gitops/shared): the handlers it runs when a database notification arrives. `app.ts` builds one
 * context, a list of features, and the notification feature that routes each notification to the features
 * that handle its channel.
 */
import {
  type ApplicationStateNotification,
  createDb,
  createSealer,
  type Database,
  type EngineInstanceRow,
  MigrationFailedError,
  migrateToLatest,
  type NOTIFICATION_CHANNELS,
  type OperationRow,
  type Sealer,
  sessionDatabaseUrl,
} from '@gitops/db';
import {
  createEventRecorder,
  createInformer,
  type EventRecorder,
  type Feature,
  type Informer,
  type KubeConfig,
  type KubeObject,
  type Logger,
  type ProcessOptions,
  processDeps,
  type Registry,
  type StartStep,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { type BackendConfig, shardSelector } from './config.ts';
import {
  registerEngineInstance,
  registerEngineInstanceMetrics,
} from './engine-instance/engine-instance.registration.ts';
import { type LabelSelector, parseLabelSelector } from './label-selector.ts';
import { createWorkspaceAccess, type WorkspaceAccess } from './workspace-access/workspace-access.ts';

export type NotificationChannel = keyof typeof NOTIFICATION_CHANNELS;

/**
 * The row of one notification shared by every feature that handles it: parsed from the payload (or, for a row
 * announced by id, read) once, however many controllers look at it.
 */
export interface NotificationReads {
  operation(): Promise<OperationRow | undefined>;
  /** The application_state change announced, parsed from the payload (undefined when malformed). */
  applicationState(): ApplicationStateNotification | undefined;
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
  /**
   * What start() does before any cache: migrate the database (an advisory lock makes it safe with several
   * replicas), then register the engine instance (which `engineInstance()` returns from then on).
   */
  readonly startSteps: readonly StartStep[];
  /** Credentials for a tenant's namespace when its instance runs on another cluster (workspace-access.ts). */
  readonly workspaceAccess: WorkspaceAccess;
  /**
   * An informer with the backend's common settings (kubeconfig, metrics, resync period); custom resources
   * are limited to this shard (`sharded`), Secrets are selected by type instead (`fieldSelector`), all objects
   * of a kind are taken otherwise (e.g. namespaces), optionally
   * trimmed before they are cached (`transform`, e.g. to their metadata when only their events matter).
   */
  informer(
    resource: { apiVersion: string; plural: string },
    select:
      | { sharded: true }
      | {
          fieldSelector?: string;
          transform?: (object: KubeObject) => KubeObject;
          /** Its metrics' `resource` label when another informer of the same resource exists. */
          metricsLabel?: string;
        },
  ): Informer<KubeObject>;
  /**
   * The informer of one core kind (this shard), its objects typed as the kind's generated type: parsed once
   * as they arrive with the descriptor's `parse` (kindParser; an object it refuses is left out of the cache
   * and logged, never crashing the process).
   */
  kindInformer<T extends KubeObject>(kind: {
    resource: { apiVersion: string; plural: string };
    parse: (raw: unknown) => T;
  }): Informer<T>;
}

export type BackendContextOptions = ProcessOptions;

/** A migration that failed by itself (not because the database went away) is not retried at start. */
export function isPermanentStartError(err: unknown): boolean {
  return err instanceof MigrationFailedError && !err.transient;
}

export function createBackendContext(
  config: BackendConfig,
  options: BackendContextOptions = {},
): BackendContext {
  const { logger, registry, kc } = processDeps('backend', config, options);
  const db = createDb(config.databaseUrl, {
    applicationName: 'gitops-backend',
    preparedStatements: config.databasePreparedStatements,
    onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
  });
  const sealer = createSealer(config.encryptionKeys);
  const selector = parseLabelSelector(shardSelector(config.backendShard));
  registerEngineInstanceMetrics(registry, db, logger);
  let engineInstance: EngineInstanceRow | undefined;
  const sessionUrl = sessionDatabaseUrl(config.databaseUrl, config.databaseSessionAddress);
  /**
   * Kysely's migrator holds a session advisory lock around the migration: lock, transaction, unlock, on one
   * pooled connection. Past a transaction-mode pooler those could be three server sessions, and the lock would
   * stay with the first, blocking the next replica's migration. With DATABASE_SESSION_ADDRESS it runs on a
   * session of PostgreSQL's own, closed after it.
   */
  async function migrateOnSession(): Promise<{ applied: string[]; newer: string[] }> {
    if (sessionUrl === config.databaseUrl) return await migrateToLatest(db);
    const session = createDb(sessionUrl, {
      max: 1,
      applicationName: 'gitops-backend-migrate',
      onConnectionError: (err) => logger.warn({ err }, 'database connection failed'),
    });
    try {
      return await migrateToLatest(session);
    } finally {
      await session.destroy();
    }
  }
  return {
    config,
    db,
    kc,
    registry,
    logger,
    sealer,
    selector,
    events: createEventRecorder(kc, { component: 'gitops-backend', logger }),
    engineInstance: () => {
      if (!engineInstance) throw new Error('the backend has not started');
      return engineInstance;
    },
    startSteps: [
      {
        what: 'database migration',
        async run() {
          const { applied, newer } = await migrateOnSession();
          if (applied.length > 0) logger.info({ applied }, 'database migrated');
          // A newer version's schema (a rolling upgrade, or a rollback): compatible by docs/upgrades.md.
          if (newer.length > 0) logger.info({ newer }, 'the database has migrations of a newer version');
        },
      },
      {
        what: 'engine instance registration',
        async run() {
          const row = await registerEngineInstance(db, kc, {
            name: config.engineInstanceName,
            namespace: config.argoCdNamespace,
          });
          engineInstance = row;
          logger.info(
            { engineInstance: row.id, namespace: row.namespace_name },
            'engine instance registered',
          );
        },
      },
    ],
    workspaceAccess: createWorkspaceAccess({
      kc,
      sealer,
      apiUrl: config.tenantClusterApiUrl,
      ...(config.tenantClusterCaFile ? { caFile: config.tenantClusterCaFile } : {}),
    }),
    informer(resource, select) {
      return createInformer<KubeObject>({
        kubeConfig: kc,
        resource,
        ...('sharded' in select
          ? { labelSelector: selector.text }
          : {
              fieldSelector: select.fieldSelector,
              transform: select.transform,
              ...(select.metricsLabel ? { metricsLabel: select.metricsLabel } : {}),
            }),
        registry,
        logger,
        resyncPeriodMs: config.resyncIntervalMs,
      });
    },
    kindInformer<T extends KubeObject>(kind: {
      resource: { apiVersion: string; plural: string };
      parse: (raw: unknown) => T;
    }) {
      return createInformer<T>({
        kubeConfig: kc,
        resource: kind.resource,
        labelSelector: selector.text,
        parse: kind.parse,
        registry,
        logger,
        resyncPeriodMs: config.resyncIntervalMs,
      });
    },
  };
}
