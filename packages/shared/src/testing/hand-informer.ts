import type { KeyController } from '../builder.ts';
import type { Informer } from '../informer.ts';
import { createInformerStore, storeReader } from '../informer-store.ts';
import type { KubeObject } from '../kube.ts';

/** An informer whose events a test delivers by hand, and the way it delivers them. */
export interface HandInformer<T extends KubeObject = KubeObject> {
  readonly informer: Informer<T>;
  /** Adds or updates the object (an update when its key is cached; the same resourceVersion is a relist). */
  put(object: T): void;
  /** Deletes the object (a delete event of `object`). */
  remove(object: T): void;
}

/**
 * An informer whose events the test delivers by hand (the real one's store: its cache, indexes and handlers):
 * what the controller builder subscribes to, for tests of which events wake which keys. The real informer's
 * indexes against the API server are tested in informer.int.test.ts.
 */
export function handInformer<T extends KubeObject = KubeObject>(): HandInformer<T> {
  const store = createInformerStore<T>({
    handlerFailed: (err) => {
      throw err;
    },
  });
  const informer: Informer<T> = {
    start: () => undefined,
    stop: async () => undefined,
    hasSynced: () => true,
    waitForSync: async () => true,
    ...storeReader(store),
    lastResourceVersion: () => '',
  };
  return { informer, put: store.put, remove: store.remove };
}

/**
 * A controller whose reconcile only records the keys it was given: `build` wires it (its `for`, `owns` and
 * `watches`) around that reconcile. `drain()` answers the keys reconciled since the last call, sorted, once
 * the queue is idle; `wakes(event)` drains, delivers the event and answers the keys it woke.
 */
export function recordingController<C extends KeyController>(
  build: (reconcile: (key: string) => Promise<{ requeueAfter?: number } | undefined>) => C,
) {
  const reconciled: string[] = [];
  let answer: { requeueAfter?: number } | undefined;
  const controller = build(async (key) => {
    reconciled.push(key);
    return answer;
  });
  const drain = async () => {
    await controller.queue.whenIdle();
    return reconciled.splice(0).sort();
  };
  return {
    controller,
    drain,
    async wakes(event: () => void): Promise<string[]> {
      await drain();
      event();
      return drain();
    },
    answer(next: { requeueAfter?: number } | undefined) {
      answer = next;
    },
  };
}
