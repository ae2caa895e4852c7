/**
 * GitOpsEngineInstance reconciler (key: the object's name = the instance's name; cluster-scoped).
 *
 * - A registered instance without an object: the object is created (spec.cordoned as the database has it,
 *   the finalizer, this backend's shard label). A name that cannot be an object name is logged, once.
 * - A live object of a registered instance: the finalizer is added; spec.cordoned and the database's cordon
 *   are made equal: a generation not applied yet (status.observedGeneration) is the operator's switch and
 *   the database follows it; once applied, a cordon changed in the database (SQL, another feature) is written
 *   back to spec. The status is rewritten when it differs.
 * - A live object without an instance (made by hand, or its row is gone): Registered/Available False with
 *   reason NotRegistered; it is left alone otherwise.
 * - An object being deleted: the instance is cordoned and its row deleted once no tenant, application or
 *   repository credentials are on it; the finalizer is removed then (or at once when there is no row). Until
 *   then DeletionBlocked says how many tenants must leave, with a Warning Event when that changes.
 *
 * Two backend replicas may run it for one object at once: every write is idempotent, the object's writes carry
 * the resourceVersion they were computed from (a stale one fails with 409 and is retried on fresh data), and a
 * creation that finds the object there is done.
 *
 * Every step is a top-level function over a `deps` object (`EngineInstanceSteps`: the client, database,
 * recorder, clock, this shard and the names remembered), so a test can drive one alone.
 */
import {
  API_GROUP_VERSION,
  ENGINE_INSTANCE_FINALIZER,
  EngineInstanceConditionType,
  EngineInstanceEventReason,
  EngineInstanceMessage,
  type GitOpsEngineInstanceSpec,
  Kind,
  Kinds,
} from '@gitops/api';
import {
  type Database,
  deleteEngineInstanceIfUnused,
  drainEngineInstance,
  type EngineInstanceOverview,
  listEngineInstanceOverviews,
  setEngineInstanceCordoned,
} from '@gitops/db';
import {
  collectionPath,
  type EventRecorder,
  findCondition,
  getObject,
  HttpMethod,
  type Informer,
  isConflict,
  type KubeConfig,
  kubeRequest,
  type Logger,
  mergePatch,
  patchStatus,
  type Reconciler,
  refOfKind,
  withTypeMeta,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { createMergePatch } from '../json.ts';
import { BACKEND_FIELD_MANAGER } from '../kinds.ts';
import type { LabelSelector } from '../label-selector.ts';
import {
  desiredStatus,
  type EngineInstanceObject,
  hasFinalizer,
  isObjectName,
  parseEngineInstance,
} from './engine-instance.status.ts';

/** Tenants a drain moves per step, and how soon the next step follows while tenants are left. */
const DRAIN_BATCH = 20;
const DRAIN_STEP_INTERVAL_MS = 1_000;

const kind = Kinds.GitOpsEngineInstance;

export interface EngineInstanceReconcilerOptions {
  db: Kysely<Database>;
  kc: KubeConfig;
  informer: Informer<EngineInstanceObject>;
  events: EventRecorder;
  logger: Logger;
  /** This backend's shard: the objects it serves, and the labels of those it creates. */
  selector: LabelSelector;
  shardLabels: Record<string, string>;
  /** How long a name whose object belongs to another shard is not tried again. */
  otherShardRetryMs: number;
  /** The cluster tenants' namespaces live on (the backend's own): see drainEngineInstance. */
  tenantClusterIdentity: () => string;
  now?: () => Date;
}

export interface EngineInstanceReconciler {
  reconcile: Reconciler;
  /** Whether the backend would create an object for an instance of this name now (logs a bad name once). */
  creatable(name: string): boolean;
}

/** What the steps use: the client, database, recorder, clock, this shard, and the process's memory of names. */
export interface EngineInstanceSteps extends Omit<EngineInstanceReconcilerOptions, 'informer' | 'now'> {
  informer: Pick<Informer<EngineInstanceObject>, 'get'>;
  now: () => Date;
  /** Names that cannot be object names, logged once per process. */
  badNames: Set<string>;
  /** Name → when its creation found another shard's object. */
  otherShard: Map<string, number>;
}

/** Whether the backend would create an object for an instance of this name now (logs a bad name once). */
export function creatable(
  deps: Pick<EngineInstanceSteps, 'logger' | 'now' | 'otherShardRetryMs' | 'badNames' | 'otherShard'>,
  name: string,
): boolean {
  if (!isObjectName(name)) {
    if (!deps.badNames.has(name)) {
      deps.badNames.add(name);
      deps.logger.warn(
        { engineInstance: name },
        `the engine instance '${name}' has no ${Kind.GitOpsEngineInstance}: its name is not a Kubernetes object name (lower case letters, digits, '-' and '.', at most 253 characters). Operate it through the database, or give its agents an ENGINE_INSTANCE_NAME that is one`,
      );
    }
    return false;
  }
  const refused = deps.otherShard.get(name);
  return refused === undefined || deps.now().getTime() - refused >= deps.otherShardRetryMs;
}

async function create(
  deps: EngineInstanceSteps,
  overview: EngineInstanceOverview,
  logger: Logger,
  signal: AbortSignal,
) {
  const name = overview.name;
  let created: EngineInstanceObject;
  try {
    created = parseEngineInstance(
      await kubeRequest(deps.kc, {
        method: HttpMethod.POST,
        path: collectionPath(kind.resource),
        query: { fieldManager: BACKEND_FIELD_MANAGER },
        body: {
          apiVersion: API_GROUP_VERSION,
          kind: Kind.GitOpsEngineInstance,
          metadata: { name, labels: deps.shardLabels, finalizers: [ENGINE_INSTANCE_FINALIZER] },
          spec: { cordoned: overview.cordoned },
        },
        signal,
      }),
    );
  } catch (err) {
    if (!isConflict(err)) throw err;
    // AlreadyExists: another replica made it (the watch brings it), or it belongs to another shard.
    const existing = await getObject(deps.kc, refOfKind(kind, { metadata: { name } }), {
      signal,
      parse: parseEngineInstance,
    });
    if (existing && !deps.selector.matches(existing.metadata.labels)) {
      if (!deps.otherShard.has(name))
        logger.info(
          { engineInstance: name },
          `the ${Kind.GitOpsEngineInstance} of this engine instance belongs to another backend shard, which keeps it current`,
        );
      deps.otherShard.set(name, deps.now().getTime());
    }
    return;
  }
  deps.otherShard.delete(name);
  logger.info(
    { engineInstance: name },
    `${Kind.GitOpsEngineInstance} created for a registered engine instance`,
  );
  // Its spec came from the database: say so at once (status.observedGeneration), so a cordon changed in the
  // database from now on is written back to spec rather than undone.
  await writeStatus(deps, created, overview, signal);
}

/** Merge-patches the object, on the resourceVersion the patch was computed from; returns the live object. */
async function patchObject(
  deps: Pick<EngineInstanceSteps, 'kc'>,
  object: EngineInstanceObject,
  patch: { metadata?: { finalizers: string[] }; spec?: GitOpsEngineInstanceSpec },
  signal: AbortSignal,
) {
  return parseEngineInstance(
    await mergePatch(
      deps.kc,
      refOfKind(kind, object),
      { ...patch, metadata: { ...patch.metadata, resourceVersion: object.metadata.resourceVersion } },
      { fieldManager: BACKEND_FIELD_MANAGER, signal },
    ),
  );
}
const patchFinalizers = (
  deps: Pick<EngineInstanceSteps, 'kc'>,
  object: EngineInstanceObject,
  finalizers: string[],
  signal: AbortSignal,
) => patchObject(deps, object, { metadata: { finalizers } }, signal);

/** Writes the status when it differs; true when written. */
async function writeStatus(
  deps: Pick<EngineInstanceSteps, 'kc' | 'now'>,
  object: EngineInstanceObject,
  overview: EngineInstanceOverview | undefined,
  signal: AbortSignal,
  noDrainTarget = false,
): Promise<boolean> {
  const patch = createMergePatch(
    object.status ?? {},
    desiredStatus(object, overview, deps.now(), noDrainTarget),
  );
  if (patch === undefined) return false;
  await patchStatus(
    deps.kc,
    refOfKind(kind, object),
    { metadata: { resourceVersion: object.metadata.resourceVersion }, status: patch },
    { fieldManager: BACKEND_FIELD_MANAGER, signal },
  );
  return true;
}

const event = (
  deps: Pick<EngineInstanceSteps, 'events'>,
  object: EngineInstanceObject,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
) => deps.events.event(withTypeMeta(kind, object), type, reason, message);

/** An object being deleted: the instance cordoned, its row deleted once unused, then the finalizer removed. */
export async function retire(
  deps: EngineInstanceSteps,
  object: EngineInstanceObject,
  overview: EngineInstanceOverview | undefined,
  logger: Logger,
  signal: AbortSignal,
) {
  const name = object.metadata.name;
  if (!hasFinalizer(object)) return;
  if (overview) {
    // A retiring instance takes no new tenants, whatever spec.cordoned says.
    if (!overview.cordoned) await setEngineInstanceCordoned(deps.db, name, true);
    const deletion = await deleteEngineInstanceIfUnused(deps.db, name);
    if (deletion === 'inUse') {
      const [current] = await listEngineInstanceOverviews(deps.db, { name });
      const before = findCondition(object.status?.conditions, EngineInstanceConditionType.DeletionBlocked);
      if (!(await writeStatus(deps, object, current, signal))) return;
      const message = EngineInstanceMessage.deletionBlocked(
        name,
        current?.tenants ?? 0,
        current?.applications ?? 0,
      );
      if (before?.message !== message) {
        logger.info({ engineInstance: name }, message);
        await event(deps, object, 'Warning', EngineInstanceEventReason.DeletionBlocked, message);
      }
      return;
    }
    if (deletion === 'deleted') {
      logger.info({ engineInstance: name }, EngineInstanceMessage.deleted(name));
      await event(
        deps,
        object,
        'Normal',
        EngineInstanceEventReason.EngineInstanceDeleted,
        EngineInstanceMessage.deleted(name),
      );
    }
  }
  await patchFinalizers(
    deps,
    object,
    (object.metadata.finalizers ?? []).filter((f) => f !== ENGINE_INSTANCE_FINALIZER),
    signal,
  );
}

/**
 * Which side of a differing cordon follows the other (pure): `spec` when the spec was applied
 * (status.observedGeneration = generation) and the database changed since; `database` when the spec is the
 * operator's switch the database has not taken yet; undefined when they agree.
 */
export function cordonFollower(
  object: EngineInstanceObject,
  overview: Pick<EngineInstanceOverview, 'cordoned'>,
): 'spec' | 'database' | undefined {
  const cordoned = object.spec?.cordoned === true;
  if (cordoned === overview.cordoned) return undefined;
  // status.observedGeneration: the generation whose spec the database has taken (absent while no agent has
  // registered the instance, so a spec written before that is applied when it registers).
  return object.status?.observedGeneration === object.metadata.generation ? 'spec' : 'database';
}

/** A live object of a registered instance: its finalizer, and spec.cordoned and the database's cordon made equal. */
export async function reconcileCordon(
  deps: EngineInstanceSteps,
  object: EngineInstanceObject,
  overview: EngineInstanceOverview,
  logger: Logger,
  signal: AbortSignal,
): Promise<EngineInstanceObject> {
  const name = object.metadata.name;
  if (!hasFinalizer(object))
    object = await patchFinalizers(
      deps,
      object,
      [...(object.metadata.finalizers ?? []), ENGINE_INSTANCE_FINALIZER],
      signal,
    );
  if ((object.spec?.cordoned === true) !== overview.cordoned) {
    // Which side changed is told by status.observedGeneration: read it live, as the cache may not have our
    // last status write yet (a stale one would take a cordon set in the database for the operator's).
    object =
      (await getObject(deps.kc, refOfKind(kind, object), { signal, parse: parseEngineInstance })) ?? object;
  }
  const cordoned = object.spec?.cordoned === true;
  const follower = cordonFollower(object, overview);
  if (follower === 'spec') {
    // The spec was applied and the database changed since (SQL, another feature): the spec follows it.
    object = await patchObject(deps, object, { spec: { cordoned: overview.cordoned } }, signal);
    logger.info(
      { engineInstance: name, cordoned: overview.cordoned },
      'spec.cordoned follows the database, changed meanwhile',
    );
  } else if (follower === 'database') {
    // A spec the database has not taken yet (the operator's switch): the database follows it.
    await setEngineInstanceCordoned(deps.db, name, cordoned);
    overview.cordoned = cordoned;
    const message = cordoned ? EngineInstanceMessage.cordoned(name) : EngineInstanceMessage.uncordoned(name);
    logger.info({ engineInstance: name }, message);
    await event(
      deps,
      object,
      'Normal',
      cordoned ? EngineInstanceEventReason.Cordoned : EngineInstanceEventReason.Uncordoned,
      message,
    );
  }
  return object;
}

/**
 * One step of a drain (the instance is cordoned by now): up to DRAIN_BATCH tenants moved to the least loaded
 * instance that takes new tenants, each move as a namespace label change makes it (nothing is pruned).
 */
export async function drainStep(
  deps: EngineInstanceSteps,
  object: EngineInstanceObject,
  overview: EngineInstanceOverview,
  logger: Logger,
) {
  const name = object.metadata.name;
  if (!overview.cordoned || overview.tenants === 0) return undefined;
  const step = await drainEngineInstance(deps.db, overview.id, DRAIN_BATCH, deps.tenantClusterIdentity());
  if (step.moved.length > 0) {
    const message = EngineInstanceMessage.tenantsMoved(name, step.moved);
    logger.info({ engineInstance: name, moved: step.moved.length, remaining: step.remaining }, message);
    await event(deps, object, 'Normal', EngineInstanceEventReason.TenantsMoved, message);
  }
  if (step.noTarget)
    logger.warn({ engineInstance: name }, EngineInstanceMessage.noDrainTarget(name, step.remaining));
  const [current] = await listEngineInstanceOverviews(deps.db, { name });
  return {
    overview: current ?? overview,
    noTarget: step.noTarget,
    again: step.remaining > 0 && !step.noTarget,
  };
}

/** One reconcile of the instance `name` (a conflict is the caller's). */
export async function reconcileEngineInstance(
  deps: EngineInstanceSteps,
  name: string,
  logger: Logger,
  signal: AbortSignal,
) {
  let object = deps.informer.get(undefined, name);
  const [overview] = await listEngineInstanceOverviews(deps.db, { name });
  if (!object) {
    if (overview && creatable(deps, name)) await create(deps, overview, logger, signal);
    return;
  }
  if (object.metadata.deletionTimestamp) {
    await retire(deps, object, overview, logger, signal);
    return;
  }
  if (overview && object.spec?.drain === true && object.spec.cordoned !== true) {
    // A drain cordons the instance (and it stays cordoned after the drain, like a drained node).
    object = await patchObject(deps, object, { spec: { cordoned: true } }, signal);
  }
  if (overview) object = await reconcileCordon(deps, object, overview, logger, signal);
  const drain =
    overview && object.spec?.drain === true ? await drainStep(deps, object, overview, logger) : undefined;
  await writeStatus(deps, object, drain?.overview ?? overview, signal, drain?.noTarget);
  return drain?.again ? { requeueAfter: DRAIN_STEP_INTERVAL_MS } : undefined;
}

export function createEngineInstanceReconciler(
  options: EngineInstanceReconcilerOptions,
): EngineInstanceReconciler {
  const deps: EngineInstanceSteps = {
    ...options,
    now: options.now ?? (() => new Date()),
    badNames: new Set<string>(),
    otherShard: new Map<string, number>(),
  };
  const reconcile: Reconciler = async (name, { logger, signal }) => {
    try {
      return await reconcileEngineInstance(deps, name, logger, signal);
    } catch (err) {
      // Written on a resourceVersion the cache had before our own last write (or another replica's) reached
      // it: again, with backoff, on fresh data. Not a failure worth a warning.
      if (!isConflict(err)) throw err;
      logger.debug({ err }, 'the object changed meanwhile; again on fresh data');
      return { requeue: true };
    }
  };
  return { reconcile, creatable: (name) => creatable(deps, name) };
}
