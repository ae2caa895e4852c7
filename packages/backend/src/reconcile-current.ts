/**
 * The frame of a GitOpsDeployment's and a SyncRun's reconcile (the kinds whose ErrorOccurred the backend
 * owns, `error-occurred.ts`): the key's object read live, the kind's step, and a failure of the step said in
 * the object's ErrorOccurred (`reportUnknownError`) before the work queue gets it. `readCurrent`, the key's
 * object read live, is the part the ManagedEnvironment and RepositoryCredential reconciles use too; `provenGone`,
 * which rows of other incarnations of a name a live read proves gone, the part a GitOpsDeployment's and a
 * SyncRun's share.
 */
import type { ApiCrMappingRow, Db } from '@gitops/db';
import type { KubeObject, Logger, ReconcileContext, ReconcileResult } from '@gitops/shared';
import { splitObjectKey } from '@gitops/shared';
import { type ErrorState, reportUnknownError } from './error-occurred.ts';

/** The object `namespace/name` read live: undefined when gone, null when it is another shard's. */
export type CurrentObjectRead<T> = (
  namespace: string,
  name: string,
  signal: AbortSignal,
) => Promise<T | undefined | null>;

/** The uid of the object `namespace/name` of one kind now, read live (`readLiveUid`): undefined when none. */
export type LiveUidRead = (
  namespace: string,
  name: string,
  signal: AbortSignal,
) => Promise<string | undefined>;

/**
 * The mappings among `mappings` (read before this call) whose CR is proven gone by a live read of the name: all
 * but the one of the uid it finds (`liveUid`). A cache is no proof: one that is behind may show an incarnation
 * the name no longer has, and taking another's rows for stale would delete or end the current one's.
 */
export async function provenGone(
  deps: { liveUid: LiveUidRead },
  mappings: readonly ApiCrMappingRow[],
  { namespace, name }: { namespace: string; name: string },
  signal: AbortSignal,
): Promise<{ liveUid: string | undefined; gone: ReadonlySet<string> }> {
  if (mappings.length === 0) return { liveUid: undefined, gone: new Set() };
  const liveUid = await deps.liveUid(namespace, name, signal);
  return { liveUid, gone: new Set(mappings.filter((m) => m.cr_uid !== liveUid).map((m) => m.id)) };
}

/** How a kind finds the mappings of one CR name (`apiCrMappingsOfKind`). */
export type MappingsOfName = (
  db: Db,
  namespace: string,
  name: string,
  options?: { exceptUid?: string },
) => Promise<ApiCrMappingRow[]>;

/**
 * The mappings of `namespace/name` (but incarnation `exceptUid`) that `find` reads, then `provenGone` over them:
 * which a live read proves gone. `mappings` empty: nothing was read live.
 */
export async function provenGoneOfName(
  deps: { db: Db; liveUid: LiveUidRead },
  find: MappingsOfName,
  ref: { namespace: string; name: string },
  signal: AbortSignal,
  exceptUid?: string,
): Promise<{ mappings: ApiCrMappingRow[]; liveUid: string | undefined; gone: ReadonlySet<string> }> {
  const mappings = await find(deps.db, ref.namespace, ref.name, exceptUid ? { exceptUid } : {});
  return { mappings, ...(await provenGone(deps, mappings, ref, signal)) };
}

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
