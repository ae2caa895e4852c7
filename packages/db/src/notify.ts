import { setTimeout as sleep } from 'node:timers/promises';
import { backoffCeiling } from '@gitops/shared';
import { type Kysely, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import { asError, watchedSession } from './connection.ts';
import type { Database } from './database.ts';

/**
 * PostgreSQL LISTEN/NOTIFY. NOTIFY is transactional: a notification is delivered when its transaction
 * commits and never if it rolls back. It is also lossy across connection loss: whatever is sent while the
 * listener is reconnecting is gone, so every consumer pairs it with a sweep (run one on `onConnected`).
 */

/**
 * Channels sent by the schema's triggers (db/migrations/0001_initial.sql, 0006_sync_operation_progress.sql,
 * 0007_operation_notification_rows.sql). Writers do not need to call `notify` for these: the triggers fire when
 * the row really changes (moveTenant adds one, see applicationStateChanged).
 */
export const NOTIFICATION_CHANNELS = {
  /**
   * An operation row was inserted: wakes the relay. Payload: its id (migration 0012: payloads carry nothing
   * another engine instance could use; any role may LISTEN on any channel). The instance's agents hear it on
   * their own channel, `engineInstanceChannel(id)`.
   */
  operationCreated: 'gitops_operation_created',
  /**
   * An operation's state changed: the backend re-enqueues its owner. Payload here: its id (0.1.0 backends read
   * it back during an upgrade). The backend listens instead on its own channel (`backendChannels`), where
   * the payload is the row as JSON (0007), or its id when too large.
   */
  operationStateChanged: 'gitops_operation_state_changed',
  /**
   * An application_state row was inserted or its state changed, or its application moved to another engine
   * instance (moveTenant). Payload here: application id (what backends before migration 0017 read back). The
   * backend listens instead on its own state channel (`backendChannels`), where the payload is the state with
   * its instance's name, or the id alone when too large (`applicationStateOfNotification`).
   */
  applicationStateChanged: 'gitops_application_state_changed',
  /**
   * What a sync_operation row reports changed (requested, Argo CD's phase, revision, times, message,
   * outcome): the backend rewrites the owning SyncRun's status. Payload: sync_operation id.
   */
  syncOperationChanged: 'gitops_sync_operation_changed',
  /**
   * What an engine instance needs sealed for it may have changed (migration 0013): the backend seals. Payload:
   * `tenant:<cluster_user id>` or `instance:<engine_instance id>`.
   */
  instanceSealing: 'gitops_instance_sealing',
} as const;

/** PostgreSQL rejects NOTIFY payloads of 8000 bytes or more. */
const MAX_PAYLOAD_BYTES = 7999;

/**
 * Sends a notification as part of `trx`: listeners receive it only if the transaction commits.
 * Identical (channel, payload) pairs within one transaction are delivered once.
 */
export async function notify(trx: Transaction<Database>, channel: string, payload: string): Promise<void> {
  if (Buffer.byteLength(payload, 'utf8') > MAX_PAYLOAD_BYTES) {
    throw new RangeError(`notification payload on ${channel} exceeds ${MAX_PAYLOAD_BYTES} bytes`);
  }
  await sql`select pg_notify(${channel}, ${payload})`.execute(trx);
}

export interface Notification {
  channel: string;
  payload: string;
}

export interface ListenOptions {
  /**
   * Called after every successful (re)connect + LISTEN. `reconnected` is true after a connection loss:
   * notifications may have been missed, so the consumer should sweep.
   */
  onConnected?: (event: { reconnected: boolean }) => void;
  /** Connection failures and errors thrown by `onNotification`; the listener keeps going. */
  onError?: (error: Error) => void;
  /** Reconnect backoff: exponential from min to max with full jitter (defaults 100 ms, 10 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * A `select 1` every interval detects a silently dead connection (e.g. a network partition that TCP
   * keepalive has not noticed yet). Default 30 s; 0 disables it.
   */
  healthCheckIntervalMs?: number;
  applicationName?: string;
  /**
   * Runs on the dedicated connection after every (re)connect + LISTEN, before `onConnected`: for session
   * state that must live exactly as long as the listening session (e.g. holdAgentListeningLock). A failure
   * counts as a failed connection (reconnect with backoff).
   */
  onSession?: (session: pg.ClientBase) => Promise<void>;
}

export interface Listener {
  /** Resolves after the first successful LISTEN; rejects if closed before that. */
  readonly ready: Promise<void>;
  /** Stops listening and closes the connection. */
  close(): Promise<void>;
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * LISTENs on `channels` on a dedicated connection (not from a pool: LISTEN is per session). When the
 * connection is lost it reconnects with backoff and LISTENs again, until `close()`.
 */
export function listen(
  url: string,
  channels: readonly string[],
  onNotification: (notification: Notification) => void | Promise<void>,
  options: ListenOptions = {},
): Listener {
  const minBackoff = options.minBackoffMs ?? 100;
  const maxBackoff = options.maxBackoffMs ?? 10_000;
  const healthCheckInterval = options.healthCheckIntervalMs ?? 30_000;
  const wanted = new Set(channels);
  const stop = new AbortController();
  let client: pg.Client | undefined;
  const { promise: ready, resolve: resolveReady, reject: rejectReady } = Promise.withResolvers<void>();
  ready.catch(() => {}); // closing early is not an unhandled rejection when nobody awaits `ready`

  const report = (error: unknown) => {
    if (!stop.signal.aborted) options.onError?.(asError(error));
  };

  const deliver = (message: pg.Notification) => {
    if (!wanted.has(message.channel)) return;
    try {
      const result = onNotification({ channel: message.channel, payload: message.payload ?? '' });
      if (result instanceof Promise) result.catch(report);
    } catch (error) {
      report(error);
    }
  };

  /** Connects and LISTENs; resolves when that connection is lost (or the listener is closed). */
  async function session(reconnected: boolean): Promise<boolean> {
    const watched = watchedSession(
      url,
      options.applicationName ?? 'gitops-listen',
      'LISTEN connection ended',
    );
    const { client: connection, lost, markLost } = watched;
    client = connection;
    connection.on('notification', deliver);
    const onAbort = () => markLost(new Error('closed'));
    stop.signal.addEventListener('abort', onAbort);
    let healthCheck: NodeJS.Timeout | undefined;
    try {
      await connection.connect();
      for (const channel of wanted) await connection.query(`LISTEN ${quoteIdentifier(channel)}`);
      await options.onSession?.(connection);
      if (stop.signal.aborted) return true;
      healthCheck = watched.healthCheck(healthCheckInterval, 'LISTEN connection health check timed out');
      resolveReady();
      try {
        options.onConnected?.({ reconnected });
      } catch (error) {
        report(error);
      }
      report(await lost);
      return true;
    } catch (error) {
      report(error);
      return false;
    } finally {
      stop.signal.removeEventListener('abort', onAbort);
      clearInterval(healthCheck);
      if (client === connection) client = undefined;
      connection.removeListener('notification', deliver);
      // Keep an 'error' listener: a late socket error on a dropped client must not crash the process.
      connection.end().catch(() => {});
    }
  }

  const loop = (async () => {
    let everConnected = false;
    let failures = 0;
    while (!stop.signal.aborted) {
      const connected = await session(everConnected);
      if (connected) {
        everConnected = true;
        failures = 0;
      } else {
        failures++;
      }
      if (stop.signal.aborted) break;
      const ceiling = backoffCeiling(failures + 1, minBackoff, maxBackoff);
      await sleep(Math.random() * ceiling, undefined, { signal: stop.signal }).catch(() => {});
    }
  })();

  return {
    ready,
    async close() {
      if (stop.signal.aborted) return loop;
      stop.abort();
      rejectReady(new Error('listener closed'));
      const current = client;
      client = undefined;
      await current?.end().catch(() => {});
      await loop;
    },
  };
}

/**
 * The backend's own channels, by the notification they stand for: operation state changes with the row as
 * payload (migration 0012) and application_state changes with the state (0017). Their names are random and
 * readable only by the backend's role, so no engine instance's role can LISTEN on them.
 */
export async function backendChannels(
  db: Kysely<Database>,
): Promise<{ operationStateChanged: string; applicationStateChanged: string }> {
  const row = await db.selectFrom('backend_channel').select(['name', 'state_name']).executeTakeFirstOrThrow();
  return { operationStateChanged: row.name, applicationStateChanged: row.state_name };
}
