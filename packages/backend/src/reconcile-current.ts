/**
 * The frame of a GitOpsDeployment's and a SyncRun's reconcile (the kinds whose ErrorOccurred the backend
 * owns, `error-occurred.ts`): the key's object read live, the kind's step, and a failure of the step said in
 * the object's ErrorOccurred (`reportUnknownError`) before the work queue gets it. `readCurrent`, the key's
 * object read live, is the part the ManagedEnvironment and RepositoryCredential reconciles use too.
 */
import type { KubeObject, Logger, ReconcileContext, ReconcileResult } from '@gitops/shared';
import { splitObjectKey } from '@gitops/shared';
import { type ErrorState, reportUnknownError } from './error-occurred.ts';

/** The object `namespace/name` read live: undefined when gone, null when it is another shard's. */
export type CurrentObjectRead<T> = (
  namespace: string,
  name: string,
  signal: AbortSignal,
) => Promise<T | undefined | null>;

/**
 * The object of `key` read live (undefined: gone), or null when there is nothing to reconcile: a
 * cluster-scoped key, or another shard's object (the shard rule, kinds.ts).
 */
export async function readCurrent<T>(
  read: CurrentObjectRead<T>,
  key: string,
  signal: AbortSignal,
): Promise<{ namespace: string; name: string; object: T | undefined } | null> {
  const { namespace, name } = splitObjectKey(key);
  if (namespace === undefined) return null;
  const object = await read(namespace, name, signal);
  if (object === null) return null;
  return { namespace, name, object };
}

/**
 * Reconciles `key` with `step` over its current object (undefined: gone). A cluster-scoped key does nothing;
 * another shard's object is left alone (the shard rule, kinds.ts); a failed step is reported through `write`.
 */
export async function reconcileCurrentObject<
  T extends KubeObject,
  D extends { currentObject: CurrentObjectRead<T> },
>(
  deps: D,
  key: string,
  context: ReconcileContext,
  step: (
    deps: D,
    object: T | undefined,
    namespace: string,
    name: string,
    context: ReconcileContext,
  ) => Promise<ReconcileResult | undefined>,
  write: (deps: D, object: T, state: ErrorState, logger: Logger) => Promise<unknown>,
): Promise<ReconcileResult | undefined> {
  const current = await readCurrent(deps.currentObject, key, context.signal);
  if (!current) return;
  const { namespace, name, object } = current;
  try {
    return await step(deps, object, namespace, name, context);
  } catch (err) {
    await reportUnknownError(object, err, context, (o, state, logger) => write(deps, o, state, logger));
    throw err;
  }
}
