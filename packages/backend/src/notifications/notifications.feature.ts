/**
 * The database notifications as one feature: a LISTEN connection on every channel of `NOTIFICATION_CHANNELS`
 * (the state changes of operations and applications on the backend's own channels instead, whose payloads
 * carry the rows), opened while the caches fill (so nothing announced meanwhile is missed), each notification
 * handed to every feature that handles its channel (`BackendFeature.notifications`), one after the other, with
 * its operation row read and its application_state payload parsed at most once. Notifications sent while the
 * connection was down are lost: after a reconnect every feature resyncs. Listed last, so it stops first and no
 * notification reaches a stopped feature.
 */
import {
  type ApplicationStateNotification,
  applicationStateOfNotification,
  backendChannels,
  type Listener,
  listen,
  NOTIFICATION_CHANNELS,
  type Notification,
  type OperationRow,
  operationOfNotification,
  sessionDatabaseUrl,
} from '@gitops/db';
import { DEFAULT_START_RETRY_MS, type Feature, retryAtStart } from '@gitops/shared';
import type {
  BackendContext,
  BackendFeature,
  NotificationChannel,
  NotificationReads,
} from '../backend-feature.ts';

export function createNotificationFeature(
  ctx: BackendContext,
  features: readonly (BackendFeature | Feature)[],
): Feature {
  const { config, db, logger } = ctx;
  const channelOf = new Map<string, NotificationChannel>(
    Object.entries(NOTIFICATION_CHANNELS)
      // State changes come on the backend's own channels (below), with the row: no read per notification.
      .filter(([key]) => key !== 'operationStateChanged' && key !== 'applicationStateChanged')
      .map(([key, channel]) => [channel, key as NotificationChannel]),
  );
  const onNotification = async ({ channel, payload }: Notification) => {
    const key = channelOf.get(channel);
    if (!key) return;
    let operation: Promise<OperationRow | undefined> | undefined;
    let applicationState: ApplicationStateNotification | undefined | null = null;
    const reads: NotificationReads = {
      operation: () => (operation ??= operationOfNotification(db, payload)),
      applicationState: () => {
        if (applicationState === null) applicationState = applicationStateOfNotification(payload);
        return applicationState;
      },
    };
    for (const feature of features) {
      if ('notifications' in feature) await feature.notifications?.[key]?.(payload, reads);
    }
  };
  let listener: Listener | undefined;

  return {
    name: 'notifications',
    informers: [],
    async open(signal) {
      // Read as a start step is (the database may be away a moment, e.g. restarting): not a reason to exit.
      const own = await retryAtStart("the backend's channel names", () => backendChannels(db), {
        logger,
        forMs: DEFAULT_START_RETRY_MS,
        giveUp: () => signal.aborted,
      });
      for (const [key, channel] of Object.entries(own)) channelOf.set(channel, key as NotificationChannel);
      // LISTEN lives on the session: PostgreSQL's own, past a transaction-mode pooler (DATABASE_SESSION_ADDRESS).
      const sessionUrl = sessionDatabaseUrl(config.databaseUrl, config.databaseSessionAddress);
      listener = listen(sessionUrl, [...channelOf.keys()], onNotification, {
        applicationName: 'gitops-backend-listen',
        onConnected: ({ reconnected }) => {
          if (!reconnected) return;
          logger.info('LISTEN connection re-established; resyncing');
          for (const feature of features) feature.resync?.();
        },
        onError: (err) => logger.warn({ err }, 'LISTEN connection problem'),
      });
      await listener.ready;
    },
    start: () => undefined,
    async stop() {
      await listener?.close();
    },
  };
}
