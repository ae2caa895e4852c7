/**
 * What a GitOpsEngineInstance should say, from its object and its instance's overview in the database (pure):
 * its status, whether the backend has something to do for it, and which instance names can be objects.
 */
import {
  type Condition,
  ENGINE_INSTANCE_FINALIZER,
  EngineInstanceConditionType,
  EngineInstanceMessage,
  EngineInstanceReason,
  type GitOpsEngineInstance,
  type GitOpsEngineInstanceStatus,
  Kinds,
} from '@gitops/api';
import type { EngineInstanceOverview } from '@gitops/db';
import {
  type ConditionInput,
  findCondition,
  type KubeObject,
  kindParser,
  nextCondition,
} from '@gitops/shared';
import { jsonEqual } from '../json.ts';

/** A GitOpsEngineInstance as the API server returns it: its generated type, with a name. */
export type EngineInstanceObject = GitOpsEngineInstance & KubeObject;

/**
 * Types a GitOpsEngineInstance read from the API server (kindParser): the informer's parser and a live read's
 * (@throws for one without a name or whose spec or status is not an object).
 */
export const parseEngineInstance = kindParser<EngineInstanceObject>(Kinds.GitOpsEngineInstance);

/** Object names of a cluster-scoped custom resource: DNS-1123 subdomains of at most 253 characters. */
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Whether an instance name can be the name of its GitOpsEngineInstance. ENGINE_INSTANCE_NAME allows any
 * name without white space (up to 253 characters); the API server allows only DNS-1123 subdomains.
 */
export function isObjectName(name: string): boolean {
  return name.length <= 253 && dns1123Subdomain.test(name);
}

export function hasFinalizer(object: EngineInstanceObject): boolean {
  return (object.metadata.finalizers ?? []).includes(ENGINE_INSTANCE_FINALIZER);
}

/** Available: an agent of the instance listens, or none does. */
function availableCondition(name: string, overview: EngineInstanceOverview): ConditionInput {
  return overview.listening
    ? {
        type: EngineInstanceConditionType.Available,
        status: 'True',
        reason: EngineInstanceReason.AgentListening,
        message: EngineInstanceMessage.agentListening(name),
      }
    : {
        type: EngineInstanceConditionType.Available,
        status: 'False',
        reason: EngineInstanceReason.AgentAway,
        message: EngineInstanceMessage.agentAway(name),
      };
}

/** Drained (asked for by `spec.drain`): nothing left, tenants left with nowhere to go, or on their way. */
function drainedCondition(
  name: string,
  overview: EngineInstanceOverview,
  noDrainTarget: boolean,
): ConditionInput {
  const type = EngineInstanceConditionType.Drained;
  if (overview.tenants === 0 && overview.applications === 0 && overview.releasing === 0)
    return {
      type,
      status: 'True',
      reason: EngineInstanceReason.Drained,
      message: EngineInstanceMessage.drained(name),
    };
  return noDrainTarget
    ? {
        type,
        status: 'False',
        reason: EngineInstanceReason.NoDrainTarget,
        message: EngineInstanceMessage.noDrainTarget(name, overview.tenants),
      }
    : {
        type,
        status: 'False',
        reason: EngineInstanceReason.Draining,
        message: EngineInstanceMessage.draining(name, overview.tenants, overview.releasing),
      };
}

/** DeletionsHeld: True while deletes are held, False once none is (only after it was ever True). */
function deletionsHeldCondition(
  name: string,
  overview: EngineInstanceOverview,
  shown: boolean,
): ConditionInput | undefined {
  const type = EngineInstanceConditionType.DeletionsHeld;
  if (overview.deletionsHeld > 0)
    return {
      type,
      status: 'True',
      reason: EngineInstanceReason.DeletionGuardTripped,
      message: EngineInstanceMessage.deletionsHeld(name, overview.deletionsHeld),
    };
  return shown
    ? {
        type,
        status: 'False',
        reason: EngineInstanceReason.NoDeletionHeld,
        message: EngineInstanceMessage.noDeletionHeld(name),
      }
    : undefined;
}

/**
 * The status `object` should have given its instance's `overview` (undefined: no agent registered an instance
 * of its name), once its spec is applied. Condition times are kept while a condition's status, reason and
 * message stay, so an unchanged verdict equals the current status and causes no write.
 */
export function desiredStatus(
  object: EngineInstanceObject,
  overview: EngineInstanceOverview | undefined,
  now: Date,
  /** A drain found tenants left and no instance to take them. */
  noDrainTarget = false,
): GitOpsEngineInstanceStatus {
  const name = object.metadata.name;
  const generation = object.metadata.generation;
  const existing = object.status?.conditions ?? [];
  const conditions: Condition[] = [];
  const put = (input: ConditionInput) =>
    conditions.push(
      nextCondition(
        findCondition(existing, input.type),
        { ...input, observedGeneration: generation },
        now,
      ) as Condition,
    );
  if (!overview) {
    const message = EngineInstanceMessage.notRegistered(name);
    put({
      type: EngineInstanceConditionType.Registered,
      status: 'False',
      reason: EngineInstanceReason.NotRegistered,
      message,
    });
    put({
      type: EngineInstanceConditionType.Available,
      status: 'False',
      reason: EngineInstanceReason.NotRegistered,
      message,
    });
    return { agents: 0, tenants: 0, applications: 0, conditions };
  }
  put({
    type: EngineInstanceConditionType.Registered,
    status: 'True',
    reason: EngineInstanceReason.Registered,
    message: EngineInstanceMessage.registered(name, overview.namespace_name, overview.cluster_identity),
  });
  put(availableCondition(name, overview));
  if (object.spec?.drain === true) put(drainedCondition(name, overview, noDrainTarget));
  const held = deletionsHeldCondition(
    name,
    overview,
    findCondition(existing, EngineInstanceConditionType.DeletionsHeld) !== undefined,
  );
  if (held) put(held);
  if (object.metadata.deletionTimestamp)
    put({
      type: EngineInstanceConditionType.DeletionBlocked,
      status: 'True',
      reason: EngineInstanceReason.TenantsPlaced,
      message: EngineInstanceMessage.deletionBlocked(name, overview.tenants, overview.applications),
    });
  return {
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    argoCDNamespace: overview.namespace_name,
    cluster: overview.cluster_identity,
    agents: overview.agents,
    tenants: overview.tenants,
    applications: overview.applications,
    cordoned: overview.cordoned,
    conditions,
  };
}

/**
 * Whether the backend has something to do for `object` (seen from one overview of every instance, so the
 * periodic look costs one query and a reconcile only where something changed): a finalizer to add or remove, a
 * cordon to write, a deletion that can go ahead, or a status to rewrite.
 */
export function needsReconcile(
  object: EngineInstanceObject,
  overview: EngineInstanceOverview | undefined,
  now: Date,
  options: {
    /**
     * False: a change of the load alone (`status.tenants`, `status.applications`) is nothing to do. The look a
     * second after operations were created passes it: while deployments are created or moved the load changes
     * with every burst, and rewriting every instance's status each second costs a write per instance per
     * second, which grows with the fleet; the load follows at the periodic look instead.
     */
    load?: boolean;
  } = {},
): boolean {
  if (object.metadata.deletionTimestamp) {
    if (!hasFinalizer(object)) return false;
    // Gone, to be cordoned (a retiring instance takes no new tenants), or empty: the deletion can go on.
    if (!overview?.cordoned || (overview.tenants === 0 && overview.applications === 0)) return true;
  } else if (overview && (!hasFinalizer(object) || (object.spec?.cordoned === true) !== overview.cordoned)) {
    return true;
  } else if (overview && object.spec?.drain === true && (!overview.cordoned || overview.tenants > 0)) {
    // A drain with tenants left (or not cordoned yet) has work to do.
    return true;
  }
  const desired = desiredStatus(object, overview, now);
  if (options.load !== false) return !jsonEqual(desired, object.status);
  const withoutLoad = (status: GitOpsEngineInstanceStatus | undefined) => {
    const { tenants: _tenants, applications: _applications, ...rest } = status ?? {};
    return rest;
  };
  return !jsonEqual(withoutLoad(desired), withoutLoad(object.status));
}
