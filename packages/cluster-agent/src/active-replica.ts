/**
 * Two replicas of one engine instance: one is active, the other waits as the standby until the active one's
 * lock session is gone (it stopped, crashed or lost PostgreSQL), then takes over. The lock is the agent's last
 * start step (not retried: it waits by itself); it is released after every feature stopped, so the standby
 * starts only once this one does nothing more. `gitops_agent_active` says which replica is active.
 */
import { type ActiveLock, AGENT_ACTIVE_LOCK_CLASS, holdActiveLock } from '@gitops/db';
import { getOrCreateGauge, type Logger, type Registry, type StartStep } from '@gitops/shared';

export interface ActiveReplica {
  /** Waits until this agent holds its instance's active lock. */
  readonly step: StartStep;
  /** True while it waits as the standby. */
  standby(): boolean;
  /** True while it holds the lock. */
  held(): boolean;
  /** Gives the lock up (after the features stopped). */
  release(): Promise<void>;
}

export function createActiveReplica(deps: {
  /**
   * The lock's session: PostgreSQL's own, never a transaction-mode pooler's (`sessionDatabaseUrl` of
   * @gitops/db).
   */
  sessionUrl: string;
  logger: Logger;
  registry: Registry;
  /** The registered instance's id (known once the step runs). */
  engineInstanceId: () => string;
  /** Another replica took over while the lock session was lost: this one must stop. */
  onTakenOver: () => void;
}): ActiveReplica {
  const { logger } = deps;
  const gauge = getOrCreateGauge(deps.registry, {
    name: 'gitops_agent_active',
    help: '1 while this agent is the active replica of its engine instance, 0 while it waits as the standby',
    labelNames: [],
  });
  let lock: ActiveLock | undefined;
  let waiting = false;
  let released = false;

  async function acquire(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const held = holdActiveLock(
      deps.sessionUrl,
      { classId: AGENT_ACTIVE_LOCK_CLASS, key: deps.engineInstanceId() },
      {
        applicationName: 'gitops-cluster-agent-active',
        onWaiting: () => {
          waiting = true;
          logger.info(
            'standby: another agent of this engine instance is active; this one takes over when it stops',
          );
        },
        onError: (err) => logger.warn({ err }, 'active-lock connection problem'),
        onLost: (err) => {
          gauge.set(0);
          logger.warn(
            { err },
            'the active-lock session was lost (PostgreSQL restart?); taking the lock again',
          );
        },
        onReacquired: () => {
          gauge.set(1);
          logger.info('still the active agent of this engine instance');
        },
        onTakenOver: () => {
          logger.warn(
            'another agent of this engine instance took over while the lock session was lost: stopping',
          );
          deps.onTakenOver();
        },
      },
    );
    lock = held;
    const aborted = new Promise<never>((_, reject) =>
      signal.addEventListener('abort', () => reject(new Error('the agent was closed during start')), {
        once: true,
      }),
    );
    aborted.catch(() => {});
    await Promise.race([held.acquired, aborted]);
    waiting = false;
    gauge.set(1);
    logger.info('active agent of this engine instance');
  }

  return {
    step: { what: 'taking the active lock', retry: false, run: acquire },
    standby: () => waiting && !released,
    held: () => lock?.held() === true,
    async release() {
      released = true;
      waiting = false;
      await lock?.release();
      gauge.set(0);
    },
  };
}
