/**
 * Operations as one feature: the database wake-up (LISTEN `gitops_operation_created` → resource queue, with
 * the agent-listening lock held on that connection so the relay creates no Operation CRs meanwhile), the
 * Operation CR informer and its controller (CR → resource queue; CRs of finished operations deleted), the
 * resource queue (operation.processor.ts) that calls the other features' handlers, the startup recovery, the
 * periodic sweep (due Waiting rows, stale In_Progress ones, CRs of finished operations left behind) and the
 * retention of finished rows.
 */
import { API_GROUP_VERSION, Plural } from '@gitops/api';
import {
  engineInstanceChannel,
  holdAgentListeningLock,
  type Listener,
  listDueWaitingOperations,
  listen,
  type OperationResourceType,
  resourceOfInstanceNotification,
  sessionDatabaseUrl,
  startDueOperationsOfResource,
} from '@gitops/db';
import { createInformer, type KubeObject, type Periodic, runPeriodically } from '@gitops/shared';
import { type AgentFeature, type FeatureContext, resourceHandlerOf } from '../agent-feature.ts';
import { createOperationProcessor, type OperationQueueContext } from './operation.processor.ts';
import { collectFinishedOperations, sweepFinishedOperationCrs, sweepOperations } from './operation.sweeps.ts';
import { createOperationCrController } from './operation-cr.controller.ts';

export interface OperationFeature extends AgentFeature {
  /** Queues a resource key (`<type>/<id>`) on the resource queue. */
  enqueue(resourceType: string, resourceId: string): void;
  /**
   * Crash recovery, once the informers synced and before any feature starts: this agent is the only one
   * serving the engine instance, so an In_Progress row at start was left by a previous process that died
   * mid-operation. Hands them all back (and queues due Waiting rows) before any new work is taken.
   */
  beforeStart(): Promise<void>;
  /**
   * Resolves when neither the Operation CR queue nor the resource queue has a key queued or running
   * (delayed keys do not count). For tests: what the agent was given has been processed to the end.
   */
  whenIdle(): Promise<void>;
}

export function createOperationFeature(
  ctx: Omit<FeatureContext, 'enqueue'>,
  /** The features whose resources it processes: their handlers, and their watches on the resource queue. */
  resourceFeatures: readonly AgentFeature[],
): OperationFeature {
  const { config, db, kc, logger, registry, namespace, engineInstanceId } = ctx;
  const operations = createInformer<KubeObject>({
    kubeConfig: kc,
    namespace,
    registry,
    logger,
    resyncPeriodMs: config.resyncIntervalMs,
    resource: { apiVersion: API_GROUP_VERSION, plural: Plural.Operation },
  });
  const queueContext: OperationQueueContext = {
    db,
    kc,
    logger,
    registry,
    namespace,
    engineInstanceId,
    concurrency: config.concurrency,
  };
  const processor = createOperationProcessor({
    ...queueContext,
    maxAttempts: config.operationMaxAttempts,
    retryMaxDelayMs: config.operationRetryMaxMs,
    handle: resourceHandlerOf(resourceFeatures, (resource) =>
      startDueOperationsOfResource(db, engineInstanceId, {
        type: resource.type as OperationResourceType,
        id: resource.id,
      }),
    ),
    watches: (resources) => {
      for (const feature of resourceFeatures) feature.watches?.(resources);
    },
    operationCrs: operations,
  });
  const enqueueResource = (type: string, id: string) => processor.enqueue(type, id);
  const crController = createOperationCrController({
    ...queueContext,
    operations,
    enqueueResource,
  });
  const controllers = [crController, processor.controller];
  const periodics: Periodic[] = [];
  let listener: Listener | undefined;
  const log = logger.child({ component: 'operation-listener' });

  /**
   * A new operation of this instance (NOTIFY on the instance's own channel, payload `<type>/<id>`, nothing
   * more: migration 0012): queue its resource; the processor reads its operations through this agent's role.
   */
  function onOperationCreated(payload: string): void {
    const resource = resourceOfInstanceNotification(payload);
    if (resource) enqueueResource(resource.type, resource.id);
  }

  /** After a (re)connect: what was announced while nobody listened (the relay may also have sent CRs). */
  async function queueWaiting(): Promise<void> {
    const waiting = await listDueWaitingOperations(db, engineInstanceId, { dueForMs: 0, limit: 10_000 });
    for (const row of waiting) enqueueResource(row.resource_type, row.resource_id);
  }
  const sweep = (staleAfterMs: number) =>
    sweepOperations({ db, engineInstanceId, logger, staleAfterMs, holds: processor.holds, enqueueResource });

  return {
    name: 'operation',
    informers: [operations, ...processor.controller.informers],
    handles: {},
    enqueue: enqueueResource,
    beforeStart: () => sweep(0),
    async whenIdle() {
      // An Operation CR's reconcile queues its resource before it ends, so the resource queue is waited for
      // after the CR queue.
      await crController.queue.whenIdle();
      await processor.queue.whenIdle();
    },
    start() {
      for (const controller of controllers) controller.start();
      listener = listen(
        // LISTEN and the listening lock live on the session: PostgreSQL's own, past a transaction-mode pooler.
        sessionDatabaseUrl(config.databaseUrl, config.databaseSessionAddress),
        [engineInstanceChannel(engineInstanceId)],
        ({ payload }) => onOperationCreated(payload),
        {
          applicationName: 'gitops-cluster-agent-listen',
          onSession: async (session) => {
            if (!(await holdAgentListeningLock(session, engineInstanceId)))
              log.warn(
                'another agent already listens for this engine instance; Operation CRs still wake this one',
              );
          },
          onConnected: ({ reconnected }) => {
            if (reconnected) log.info('LISTEN connection re-established; queueing Waiting operations');
            void queueWaiting().catch((err: unknown) =>
              log.warn({ err }, 'could not list Waiting operations'),
            );
          },
          onError: (err) => log.warn({ err }, 'LISTEN connection problem'),
        },
      );
      periodics.push(
        runPeriodically(
          'operation-sweep',
          config.operationSweepIntervalMs,
          async () => {
            await sweep(config.operationStaleAfterMs);
            await sweepFinishedOperationCrs({
              db,
              engineInstanceId,
              operationCrs: operations,
              enqueueCr: (key) => crController.enqueue(key),
            });
          },
          { logger },
        ),
        runPeriodically(
          'operation-retention',
          Math.min(Math.max(config.operationRetentionMs / 2, 1_000), 10 * 60_000),
          async (signal) => {
            const deleted = await collectFinishedOperations(
              db,
              engineInstanceId,
              config.operationRetentionMs,
              signal,
            );
            if (deleted > 0) logger.info({ deleted }, 'finished operations past retention deleted');
          },
          { logger },
        ),
      );
    },
    async stop() {
      await listener?.close();
      await Promise.all(periodics.map((periodic) => periodic.stop()));
      await Promise.all(controllers.map((controller) => controller.stop()));
    },
  };
}
