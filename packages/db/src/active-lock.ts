/**
 * One active process among replicas, by a PostgreSQL session advisory lock held on a dedicated connection:
 * the lock lives exactly as long as that session, so a process that crashes (SIGKILL closes its socket) or
 * loses its connection releases it at once, and a waiting replica, blocked in PostgreSQL on the same lock (no
 * polling, nothing at idle), gets it in that instant. Used by the
 * cluster-agent: two replicas per engine instance, one active (docs/architecture.md, "Agent replicas").
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { backoffCeiling } from '@gitops/shared';
import type pg from 'pg';
import { asError, watchedSession } from './connection.ts';

/** Advisory lock class of "the active cluster-agent of an engine instance" (key: hashtext(instance id)). */
export const AGENT_ACTIVE_LOCK_CLASS = 1_734_964_226; // 0x67697402, fits int4

export interface ActiveLockOptions {
  applicationName?: string;
  /** A `select 1` this often detects a silently dead session of the holder (default 30 s; 0: never). */
  healthCheckIntervalMs?: number;
  /** Called once when the first try finds the lock held by another session. */
  onWaiting?: () => void;
  /** Connection problems while waiting (it keeps trying). */
  onError?: (error: Error) => void;
  /**
   * The held lock's session is gone (PostgreSQL restarted, the connection was cut): the lock is taken again
   * at once on a new session. Meanwhile a waiting replica may take it; then `onTakenOver` follows.
   */
  onLost?: (error: Error) => void;
  /** The lock was held again after `onLost`: this process stays the active one. */
  onReacquired?: () => void;
  /** After `onLost`, another process holds the lock: this one must stop acting. Nothing more is tried. */
  onTakenOver: () => void;
}

export interface ActiveLock {
  /** Resolves when this process holds the lock; rejects when released before. */
  readonly acquired: Promise<void>;
  /** True while held. */
  held(): boolean;
  /** Gives the lock up (closes the session); nothing is reported as lost. */
  release(): Promise<void>;
}

/**
 * Waits for, then holds, the advisory lock (`classId`, hashtext(`key`)) until `release()`. A lost session is
 * replaced and the lock taken again; if another process got it meanwhile, `onTakenOver` says so and this one
 * stops trying.
 */
export function holdActiveLock(
  url: string,
  lock: { classId: number; key: string },
  options: ActiveLockOptions,
): ActiveLock {
  const healthMs = options.healthCheckIntervalMs ?? 30_000;
  const stop = new AbortController();
  let client: pg.Client | undefined;
  let isHeld = false;
  const {
    promise: acquired,
    resolve: resolveAcquired,
    reject: rejectAcquired,
  } = Promise.withResolvers<void>();
  acquired.catch(() => {}); // a release before acquisition is not an unhandled rejection

  const loop = (async () => {
    let failures = 0;
    let saidWaiting = false;
    let everHeld = false;
    while (!stop.signal.aborted) {
      const watched = watchedSession(
        url,
        options.applicationName ?? 'gitops-active-lock',
        'the active-lock session ended',
      );
      const { client: session, lost } = watched;
      client = session;
      try {
        await session.connect();
        const tried = await session.query<{ held: boolean }>(
          'select pg_try_advisory_lock($1::int, hashtext($2::text)) as held',
          [lock.classId, lock.key],
        );
        if (tried.rows[0]?.held !== true) {
          if (everHeld) {
            await session.end().catch(() => {});
            options.onTakenOver();
            return;
          }
          if (!saidWaiting) options.onWaiting?.();
          saidWaiting = true;
          failures = 0;
          // Waits inside PostgreSQL until the holder's session ends; release() ends this session to stop it.
          await session.query('select pg_advisory_lock($1::int, hashtext($2::text))', [
            lock.classId,
            lock.key,
          ]);
        }
      } catch (error) {
        await session.end().catch(() => {});
        if (stop.signal.aborted) break;
        options.onError?.(asError(error));
        failures++;
        await sleep(Math.random() * backoffCeiling(failures, 100, 5_000), undefined, {
          signal: stop.signal,
        }).catch(() => {});
        continue;
      }
      failures = 0;
      isHeld = true;
      if (everHeld) options.onReacquired?.();
      everHeld = true;
      resolveAcquired();
      const health = watched.healthCheck(healthMs, 'the active-lock session stopped answering');
      const reason = await Promise.race([
        lost,
        new Promise<undefined>((resolve) => stop.signal.addEventListener('abort', () => resolve(undefined))),
      ]);
      clearInterval(health);
      isHeld = false;
      await session.end().catch(() => {});
      if (reason === undefined || stop.signal.aborted) return;
      options.onLost?.(reason);
    }
  })();

  return {
    acquired,
    held: () => isHeld,
    async release() {
      if (!stop.signal.aborted) {
        stop.abort();
        rejectAcquired(new Error('the active lock was released'));
      }
      await client?.end().catch(() => {});
      await loop;
    },
  };
}
