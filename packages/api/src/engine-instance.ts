/**
 * GitOpsEngineInstance (cluster-scoped): one engine instance (an Argo CD namespace and its cluster-agents) as
 * operators see and steer it (docs/api.md, docs/engine-instances.md). Its condition types, reasons, messages,
 * Event reasons and finalizer.
 */

/** Condition types of a GitOpsEngineInstance (standard metav1.Condition). */
export const EngineInstanceConditionType = {
  /** True when an agent has registered an instance of this name (a row exists). */
  Registered: 'Registered',
  /** True when an agent of the instance listens for its work now. */
  Available: 'Available',
  /** Only while a deletion waits: True with how many tenants must leave first. */
  DeletionBlocked: 'DeletionBlocked',
  /** Only while spec.drain is set: True once no tenant and no application is left on the instance. */
  Drained: 'Drained',
  /**
   * True while the deletion guard holds deletes of Argo CD Applications (docs/deletion-guard.md); False once
   * none is held any more (absent before the first hold).
   */
  DeletionsHeld: 'DeletionsHeld',
} as const;

/** Reasons of a GitOpsEngineInstance's conditions. */
export const EngineInstanceReason = {
  /** Registered True. */
  Registered: 'Registered',
  /** Registered and Available False: no agent has registered an instance of this name. */
  NotRegistered: 'NotRegistered',
  /** Available True. */
  AgentListening: 'AgentListening',
  /** Available False: the instance is registered but none of its agents listens now. */
  AgentAway: 'AgentAway',
  /** DeletionBlocked True: tenants (or their applications) are still on the instance. */
  TenantsPlaced: 'TenantsPlaced',
  /** Drained True. */
  Drained: 'Drained',
  /** Drained False: tenants are being moved away, or Argo CD Applications released. */
  Draining: 'Draining',
  /** Drained False: tenants are left and no other instance takes new tenants. */
  NoDrainTarget: 'NoDrainTarget',
  /** DeletionsHeld True: deletes are held without proof or beyond the deletion budget. */
  DeletionGuardTripped: 'DeletionGuardTripped',
  /** DeletionsHeld False: none is held (confirmed, or no longer to be deleted). */
  NoDeletionHeld: 'NoDeletionHeld',
} as const;

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** Messages of a GitOpsEngineInstance's conditions and Events (keep these texts). */
export const EngineInstanceMessage = {
  registered: (instance: string, namespace: string, cluster: string): string =>
    `the engine instance '${instance}' is registered: Argo CD namespace '${namespace}' on cluster ${cluster}`,
  notRegistered: (instance: string): string =>
    `no agent has registered an engine instance named '${instance}': this object stands for nothing until an agent with ENGINE_INSTANCE_NAME=${instance} starts (or it is deleted)`,
  agentListening: (instance: string): string =>
    `an agent of the engine instance '${instance}' listens for its work`,
  agentAway: (instance: string): string =>
    `no agent of the engine instance '${instance}' listens now: its tenants' changes wait in the database until one is back`,
  deletionBlocked: (instance: string, tenants: number, applications: number): string =>
    tenants === 0 && applications === 0
      ? `the engine instance '${instance}' is still referred to in the database (an application moving away from it?): it is deleted once that is done; it takes no new tenants meanwhile`
      : `the engine instance '${instance}' still holds ${plural(tenants, 'tenant')} (${plural(applications, 'application')}): they must be moved or drained before it can be deleted; it takes no new tenants meanwhile`,
  deleted: (instance: string): string =>
    `the engine instance '${instance}' had no tenants left and is removed from the database; an agent that starts with this name registers it again`,
  drained: (instance: string): string =>
    `the engine instance '${instance}' is drained: no tenant and no application is left on it`,
  draining: (instance: string, tenants: number, releasing: number): string =>
    `the engine instance '${instance}' is draining: ${plural(tenants, 'tenant')} left to move, ${plural(releasing, 'Argo CD Application')} still to hand over to the instances its tenants moved to`,
  noDrainTarget: (instance: string, tenants: number): string =>
    `the engine instance '${instance}' cannot be drained: ${plural(tenants, 'tenant')} left and no other instance takes new tenants (all cordoned, or none registered); uncordon or add one`,
  tenantsMoved: (instance: string, moves: readonly { tenant: string; to: string }[]): string =>
    `moved ${plural(moves.length, 'tenant')} off the draining engine instance '${instance}': ${moves.map((m) => `${m.tenant} → ${m.to}`).join(', ')}`,
  deletionsHeld: (instance: string, held: number): string =>
    `the engine instance '${instance}' holds the deletion of ${plural(held, 'Argo CD Application')} (no proof that its GitOpsDeployment is gone, or more deleted at once than its deletion budget allows): nothing they deployed is pruned until each is no longer to be deleted or an operator confirms with \`kubectl gitops instances confirm-deletions ${instance}\``,
  noDeletionHeld: (instance: string): string =>
    `the engine instance '${instance}' holds no deletion of an Argo CD Application`,
  cordoned: (instance: string): string =>
    `the engine instance '${instance}' is cordoned: it takes no new tenants`,
  uncordoned: (instance: string): string =>
    `the engine instance '${instance}' is no longer cordoned: it takes new tenants`,
} as const;

/** Reasons of the Events on a GitOpsEngineInstance. */
export const EngineInstanceEventReason = {
  Cordoned: 'Cordoned',
  Uncordoned: 'Uncordoned',
  /** Warning: a deletion waits for tenants to leave. */
  DeletionBlocked: 'DeletionBlocked',
  /** The row is deleted; the object goes. */
  EngineInstanceDeleted: 'EngineInstanceDeleted',
  /** A drain moved tenants away. */
  TenantsMoved: 'TenantsMoved',
} as const;

/**
 * The backend's finalizer on every GitOpsEngineInstance of a registered instance: deleting the object retires
 * the instance, which waits until no tenant is left on it.
 */
export const ENGINE_INSTANCE_FINALIZER = 'managed-gitops.redhat.com/engine-instance';
