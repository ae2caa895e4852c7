/**
 * One App Studio controller as a feature of the shared shape: a work queue of `namespace/name` keys of its
 * kind, fed by its informer (add, delete, and every update that is not only our own status write), by its
 * extra watches, and on resync by every cached object.
 */
import {
  createWorkQueue,
  type Feature,
  type Informer,
  KubeApiError,
  type KubeObject,
  objectKey,
  type Reconciler,
  type WorkQueue,
} from '@gitops/shared';
import type { AppStudioContext } from './context.ts';

/** The API server refuses to create objects in a namespace that is being deleted (403, "... being terminated"). */
export function isNamespaceTerminating(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 403 && err.message.includes('being terminated');
}

export interface AppStudioController extends Feature {
  readonly queue: WorkQueue;
  readonly informer: Informer<KubeObject>;
  enqueueAll(): void;
}

export function createController(
  ctx: AppStudioContext,
  options: {
    name: string;
    informer: Informer<KubeObject>;
    alsoReads: readonly Informer<KubeObject>[];
    reconcile: Reconciler;
    /** Extra event sources → keys of this kind; returns the unsubscribe functions. */
    watch?: (enqueue: (key: string) => void) => (() => void)[];
    /** Whether an update of an object of this kind needs a reconcile (default: spec, metadata or status changed). */
    needsReconcile?: (oldObject: KubeObject, newObject: KubeObject) => boolean;
  },
): AppStudioController {
  const { informer } = options;
  // In a namespace being deleted nothing can be created and everything goes anyway: stop quietly there
  // (the original checked the namespace's deletionTimestamp first).
  const reconcile: Reconciler = async (key, context) => {
    try {
      return await options.reconcile(key, context);
    } catch (err) {
      if (isNamespaceTerminating(err)) {
        context.logger.debug({ key }, 'namespace is being deleted; nothing to do');
        return undefined;
      }
      throw err;
    }
  };
  const queue = createWorkQueue({
    name: options.name,
    reconcile,
    concurrency: ctx.concurrency,
    registry: ctx.registry,
    logger: ctx.logger,
  });
  const enqueue = (key: string) => queue.add(key);
  const enqueueAll = () => {
    for (const object of informer.list()) enqueue(objectKey(object));
  };
  let unsubscribe: (() => void)[] = [];
  return {
    name: options.name,
    queue,
    informer,
    informers: [informer, ...options.alsoReads],
    enqueueAll,
    start() {
      unsubscribe = [
        informer.onAdd((o) => enqueue(objectKey(o))),
        informer.onUpdate((a, b) => {
          if (options.needsReconcile === undefined || options.needsReconcile(a, b)) enqueue(objectKey(b));
        }),
        informer.onDelete((o) => enqueue(objectKey(o))),
        ...(options.watch?.(enqueue) ?? []),
      ];
      queue.start();
      enqueueAll();
    },
    resync: enqueueAll,
    async stop() {
      for (const u of unsubscribe) u();
      await queue.shutdown();
    },
  };
}
