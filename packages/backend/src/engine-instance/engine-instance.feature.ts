/**
 * The GitOpsEngineInstance feature: one cluster-scoped object per registered engine instance, kept current
 * from the database (docs/architecture.md, "Engine instances and placement"; docs/engine-instances.md).
 *
 * The objects of this shard (label `managed-gitops.redhat.com/backend-shard`, as for every kind) → the work
 * queue, on creation, spec, finalizer and deletion changes. What changes in the database wakes no object by
 * itself (an agent's listening lock sends no notification), so a look every
 * GITOPS_ENGINE_INSTANCE_STATUS_INTERVAL (15 s), and a second after operations were created (NOTIFY: a new
 * instance, a drain's step), reads every instance in one query and queues only the objects that need
 * something: a missing object, a finalizer, a cordon, a deletion that can go on, a status that differs. The
 * look after a notification leaves a changed load alone (it changes with every burst of creates; rewriting
 * every instance's status each second grew with the fleet): the periodic look writes it.
 */
import { Kinds } from '@gitops/api';
import { listEngineInstanceOverviews } from '@gitops/db';
import {
  anyOf,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  newController,
  objectKey,
  type Periodic,
  relist,
  runPeriodically,
  type WorkQueue,
} from '@gitops/shared';
import type { BackendContext, BackendFeature } from '../backend-feature.ts';
import { BACKEND_SHARD_LABEL } from '../config.ts';
import { createEngineInstanceReconciler } from './engine-instance.reconciler.ts';
import { type EngineInstanceObject, needsReconcile, parseEngineInstance } from './engine-instance.status.ts';

/** After a notification, the look waits this long, so a burst of operations costs one query. */
const NOTIFIED_LOOK_DELAY_MS = 1_000;

export interface EngineInstanceFeature extends BackendFeature {
  readonly queue: WorkQueue;
  /** Reads every instance once and queues the objects that need something. */
  look(): Promise<void>;
}

export function createEngineInstanceFeature(ctx: BackendContext): EngineInstanceFeature {
  const kind = Kinds.GitOpsEngineInstance;
  const logger = ctx.logger.child({ controller: 'gitopsengineinstance' });
  const informer = ctx.kindInformer({ resource: kind.resource, parse: parseEngineInstance });
  const { reconcile, creatable } = createEngineInstanceReconciler({
    db: ctx.db,
    kc: ctx.kc,
    informer,
    events: ctx.events,
    logger,
    selector: ctx.selector,
    shardLabels: ctx.config.backendShard ? { [BACKEND_SHARD_LABEL]: ctx.config.backendShard } : {},
    otherShardRetryMs: ctx.config.resyncIntervalMs,
    tenantClusterIdentity: () => ctx.engineInstance().cluster_identity,
  });
  // A delete wakes it too: a registered instance gets its object back.
  const controller = newController('gitopsengineinstance', { registry: ctx.registry, logger })
    .for(informer, { predicates: [anyOf(relist, generationChanged, deletionStarted, finalizersChanged)] })
    .withOptions({ concurrency: ctx.config.maxConcurrentReconciles })
    .complete(reconcile);
  const { queue } = controller;
  const enqueue = (object: EngineInstanceObject) => queue.add(objectKey(object));

  /** `load: false` (the look after operations were created): a changed load alone waits for the periodic look. */
  async function look(options: { load?: boolean } = {}) {
    const overviews = await listEngineInstanceOverviews(ctx.db);
    const now = new Date();
    const registered = new Set<string>();
    for (const overview of overviews) {
      registered.add(overview.name);
      const object = informer.get(undefined, overview.name);
      if (object ? needsReconcile(object, overview, now, options) : creatable(overview.name)) {
        queue.add(overview.name);
      }
    }
    for (const object of informer.list()) {
      if (!registered.has(object.metadata.name) && needsReconcile(object, undefined, now, options))
        enqueue(object);
    }
  }

  let periodic: Periodic | undefined;
  let notified: NodeJS.Timeout | undefined;
  let stopped = false;
  const lookSoon = () => {
    if (stopped || notified) return;
    notified = setTimeout(() => {
      notified = undefined;
      look({ load: false }).catch((err: unknown) =>
        logger.warn({ err }, 'could not look at the engine instances'),
      );
    }, NOTIFIED_LOOK_DELAY_MS);
    notified.unref();
  };

  return {
    name: queue.name,
    queue,
    informers: [informer],
    notifications: { operationCreated: lookSoon },
    look,
    start() {
      controller.start();
      periodic = runPeriodically(
        'engine-instance-status',
        ctx.config.engineInstanceStatusIntervalMs,
        () => look(),
        {
          logger,
        },
      );
    },
    resync() {
      controller.enqueueAll();
      lookSoon();
    },
    async stop() {
      stopped = true;
      clearTimeout(notified);
      await periodic?.stop();
      await controller.stop();
    },
  };
}
