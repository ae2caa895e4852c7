/**
 * Named, composable filters of informer events: which creates, updates and deletes of a watched kind wake a
 * controller. A predicate speaks only about the events it defines a method for; about the others it passes
 * (so `not(generationChanged)` still lets creates and deletes through). Combine them with `anyOf`, `allOf` and
 * `not`; give a combination a name when a log or a test should say why an event was dropped.
 *
 *   anyOf(relist, generationChanged, deletionStarted)   // what most controllers of a spec want
 *   allOf(not(relist), ownWrites.predicate)              // a status writer: real changes, not its own echo
 *
 * The informer delivers an update with the same resourceVersion only on a relist (it drops replayed watch
 * events), so `relist` is "the periodic, level-triggered look at everything".
 */
import type { Informer } from './informer.ts';
import { isJsonObject, jsonEqual } from './json.ts';
import { type KubeObject, objectKey, splitObjectKey } from './kube.ts';

export interface Predicate<T extends KubeObject = KubeObject> {
  /** Says what passes, e.g. `generation changed`; combinations join their parts' names. */
  readonly name: string;
  /** Whether an object the informer added wakes the controller. Undefined: it does. */
  create?(object: T): boolean;
  /** Whether an update wakes the controller. Undefined: it does. */
  update?(oldObject: T, newObject: T): boolean;
  /** Whether a deleted object wakes the controller. Undefined: it does. */
  delete?(object: T): boolean;
}

/**
 * Every predicate sees every event (no short cut after the first "no"), so a predicate that keeps state
 * (`createOwnWrites`, `createSettledVersions`) stays in step wherever it is listed.
 */
function every(answers: boolean[]): boolean {
  return answers.every(Boolean);
}

function some(answers: boolean[]): boolean {
  return answers.some(Boolean);
}

/** Whether `predicates` (all of them) let a create through. */
export function passesCreate<T extends KubeObject>(predicates: readonly Predicate<T>[], object: T): boolean {
  return every(predicates.map((p) => p.create?.(object) ?? true));
}

/** Whether `predicates` (all of them) let an update through. */
export function passesUpdate<T extends KubeObject>(
  predicates: readonly Predicate<T>[],
  oldObject: T,
  newObject: T,
): boolean {
  return every(predicates.map((p) => p.update?.(oldObject, newObject) ?? true));
}

/** Whether `predicates` (all of them) let a delete through. */
export function passesDelete<T extends KubeObject>(predicates: readonly Predicate<T>[], object: T): boolean {
  return every(predicates.map((p) => p.delete?.(object) ?? true));
}

/** An update-only predicate. */
export function updatePredicate<T extends KubeObject = KubeObject>(
  name: string,
  update: (oldObject: T, newObject: T) => boolean,
): Predicate<T> {
  return { name, update };
}

/**
 * Passes an event when one of `predicates` that speaks about that event passes it; an event none of them
 * speaks about passes.
 */
export function anyOf<T extends KubeObject>(...predicates: Predicate<T>[]): Predicate<T> {
  const speaking = <K extends 'create' | 'update' | 'delete'>(kind: K) => {
    const found = predicates.filter((p) => p[kind] !== undefined);
    return found.length === 0 ? undefined : found;
  };
  const creates = speaking('create');
  const updates = speaking('update');
  const deletes = speaking('delete');
  return {
    name: predicates.map((p) => p.name).join(' or '),
    ...(creates && { create: (o: T) => some(creates.map((p) => p.create?.(o) === true)) }),
    ...(updates && { update: (a: T, b: T) => some(updates.map((p) => p.update?.(a, b) === true)) }),
    ...(deletes && { delete: (o: T) => some(deletes.map((p) => p.delete?.(o) === true)) }),
  };
}

/** Passes an event when every one of `predicates` passes it (each of them sees the event). */
export function allOf<T extends KubeObject>(...predicates: Predicate<T>[]): Predicate<T> {
  return {
    name: predicates.map((p) => p.name).join(' and '),
    create: (o) => passesCreate(predicates, o),
    update: (a, b) => passesUpdate(predicates, a, b),
    delete: (o) => passesDelete(predicates, o),
  };
}

/** The opposite of `predicate` for the events it speaks about; the others still pass. */
export function not<T extends KubeObject>(predicate: Predicate<T>): Predicate<T> {
  const { create, update, delete: del } = predicate;
  return {
    name: `not (${predicate.name})`,
    ...(create && { create: (o: T) => !create.call(predicate, o) }),
    ...(update && { update: (a: T, b: T) => !update.call(predicate, a, b) }),
    ...(del && { delete: (o: T) => !del.call(predicate, o) }),
  };
}

/** A relist re-delivered the object unchanged (same resourceVersion): the periodic level-triggered resync. */
export const relist: Predicate = updatePredicate(
  'relist',
  (a, b) => a.metadata.resourceVersion === b.metadata.resourceVersion,
);

/** `metadata.generation` changed: the API server bumps it for spec changes, never for status or metadata. */
export const generationChanged: Predicate = updatePredicate(
  'generation changed',
  (a, b) => a.metadata.generation !== b.metadata.generation,
);

/**
 * `metadata.deletionTimestamp` appeared (the API server sets it once, when a delete meets finalizers; it is
 * never cleared).
 */
export const deletionStarted: Predicate = updatePredicate(
  'deletion started',
  (a, b) => a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp,
);

/** Another incarnation under the same name (deleted and created again between two looks of a relist). */
export const uidChanged: Predicate = updatePredicate(
  'uid changed',
  (a, b) => a.metadata.uid !== b.metadata.uid,
);

/** `spec` changed (as JSON). For kinds whose spec does not bump the generation, e.g. a CRD without a status subresource. */
export const specChanged: Predicate = updatePredicate('spec changed', (a, b) => !jsonEqual(a.spec, b.spec));

export const labelsChanged: Predicate = updatePredicate(
  'labels changed',
  (a, b) => !jsonEqual(a.metadata.labels, b.metadata.labels),
);

export const annotationsChanged: Predicate = updatePredicate(
  'annotations changed',
  (a, b) => !jsonEqual(a.metadata.annotations, b.metadata.annotations),
);

export const finalizersChanged: Predicate = updatePredicate(
  'finalizers changed',
  (a, b) => !jsonEqual(a.metadata.finalizers, b.metadata.finalizers),
);

/** The object's version changed (anything but a relist). */
export const resourceVersionChanged: Predicate = not(relist);

/**
 * These `status` fields changed (as JSON): a controller that writes other status fields itself is woken by
 * another writer's fields, not by the echo of its own.
 */
export function statusFieldsChanged(...fields: string[]): Predicate {
  const field = (o: KubeObject, name: string) => (isJsonObject(o.status) ? o.status[name] : undefined);
  return updatePredicate(`status ${fields.join(', ')} changed`, (a, b) =>
    fields.some((name) => !jsonEqual(field(a, name), field(b, name))),
  );
}

/** Deletes do not wake the controller (e.g. a status writer: nothing to write on a gone object). */
export const ignoreDeletes: Predicate = { name: 'not a delete', delete: () => false };

/** Creates do not wake the controller (e.g. a watch that cares only about changes or departures). */
export const ignoreCreates: Predicate = { name: 'not a create', create: () => false };

/** Updates do not wake the controller (e.g. a watch that cares only about arrivals and departures). */
export const ignoreUpdates: Predicate = { name: 'not an update', update: () => false };

/**
 * The controller's own writes, so that their echo does not wake it again. Around each write of an object:
 * `begin(key)`, then `end(key, written)` with the object the write returned (or nothing when it failed, or
 * when its echo should wake the controller after all). The event that delivers exactly the written
 * resourceVersion is dropped, whether it arrives after the write's answer or — as a watch event often does —
 * before it: an update, or a create when the write created the object (server-side apply). Other updates and
 * creates that arrive during the write are held back, and `end` says whether there were any: the caller then
 * queues the key again (they may be another writer's). Outside a write every update and create passes except
 * that echo; relists always pass; a delete forgets the key. One write per key at a time (the work queue never
 * runs one key twice at once).
 */
export interface OwnWrites {
  readonly predicate: Predicate;
  /** A write of the object of `key` starts. */
  begin(key: string): void;
  /**
   * The write ended: `written` is what it returned (undefined when it failed, or when its echo is to pass:
   * then every version held meanwhile, its own included, counts as another). True when other versions of the
   * object arrived meanwhile (held back by the predicate): queue the key again.
   */
  end(key: string, written: Pick<KubeObject, 'metadata'> | undefined): boolean;
  /** Keys with a write in progress or an echo still to come. */
  size(): number;
}

export function createOwnWrites(): OwnWrites {
  /** Key → the resourceVersion of our last write whose echo has not arrived yet. */
  const echoes = new Map<string, string>();
  /** Key → the versions that arrived while our write was in progress. */
  const writing = new Map<string, Set<string>>();
  /** Whether an update or create delivering `object` passes: held during a write, dropped if our echo. */
  const passes = (object: KubeObject): boolean => {
    const version = object.metadata.resourceVersion;
    const key = objectKey(object);
    const held = writing.get(key);
    if (held) {
      if (version !== undefined) held.add(version);
      return false;
    }
    const echo = echoes.get(key);
    echoes.delete(key);
    return echo === undefined || echo !== version;
  };
  return {
    predicate: {
      name: 'not our own write',
      create: passes,
      update: (a, b) => a.metadata.resourceVersion === b.metadata.resourceVersion || passes(b),
      delete(o) {
        echoes.delete(objectKey(o));
        writing.delete(objectKey(o));
        return true;
      },
    },
    begin(key) {
      echoes.delete(key);
      writing.set(key, new Set());
    },
    end(key, written) {
      const held = writing.get(key) ?? new Set<string>();
      writing.delete(key);
      const version = written?.metadata.resourceVersion;
      if (version !== undefined && !held.has(version)) echoes.set(key, version);
      return [...held].some((v) => v !== version);
    },
    size: () => echoes.size + writing.size,
  };
}

/**
 * Remembers the resourceVersion at which each object's last reconcile settled (succeeded and asked for no
 * requeue); its `predicate` drops a relist of an object still at that version, so an idle resync costs no
 * reconcile per settled object. Explicit resyncs (enqueueing keys directly) still reconcile everything.
 */
export interface SettledVersions {
  readonly predicate: Predicate;
  /** Call before a reconcile of `key`: what the cache holds now, and forget the old settlement. */
  begin(key: string): string | undefined;
  /** Call after a reconcile that asked for nothing more; `version` is what `begin` returned. */
  settle(key: string, version: string | undefined): void;
  /**
   * Call for an update the controller's predicates dropped (a change it needs no reconcile for, e.g. its own
   * status write): an object settled at the old version stays settled at the new one, so the next relist
   * does not reconcile it for a change that was never its business.
   */
  carry(key: string, from: string | undefined, to: string | undefined): void;
}

export function createSettledVersions(informer: Pick<Informer<KubeObject>, 'get'>): SettledVersions {
  const settled = new Map<string, string>();
  return {
    predicate: {
      name: 'not a relist of a settled object',
      update(a, b) {
        return !(
          a.metadata.resourceVersion === b.metadata.resourceVersion &&
          settled.get(objectKey(b)) === b.metadata.resourceVersion
        );
      },
      delete(o) {
        settled.delete(objectKey(o));
        return true;
      },
    },
    begin(key) {
      const { namespace, name } = splitObjectKey(key);
      const version = informer.get(namespace, name)?.metadata.resourceVersion;
      settled.delete(key);
      return version;
    },
    settle(key, version) {
      if (version !== undefined) settled.set(key, version);
    },
    carry(key, from, to) {
      if (from !== undefined && to !== undefined && settled.get(key) === from) settled.set(key, to);
    },
  };
}
