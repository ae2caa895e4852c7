/**
 * The outbox relay: turns committed operation rows into `Operation` CRs (`operation-<id>` in the engine
 * instance's namespace) and marks them delivered. Claims rows with FOR UPDATE SKIP LOCKED inside a
 * transaction that lasts until they are marked, so several relays (backend replicas) never create the
 * same CR twice and a crash before the commit only means the CR is created again (AlreadyExists = done).
 *
 * Woken by NOTIFY `gitops_operation_created`, by a periodic sweep (safety net, and due retries) and
 * after the LISTEN connection is re-established. A failed creation backs off per operation
 * (`next_delivery_at`), so one bad namespace cannot hold up the others.
 */
import { API_GROUP_VERSION, Kind, Label, operationCrName, Plural } from '@gitops/api';
import {
  type ClaimedOperation,
  claimUndeliveredOperations,
  type Database,
  hasUndeliveredOperations,
  markOperationsDelivered,
  recordDeliveryFailure,
} from '@gitops/db';
import {
  backoffDelay,
  clusterIdentity,
  collectionPath,
  getOrCreateCounter,
  HttpMethod,
  isConflict,
  type KubeConfig,
  kubeRequest,
  type Logger,
  type Registry,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import type { BackendContext, BackendFeature } from '../backend-feature.ts';

/** Name of the Operation CR of an operation row (defined once, in @gitops/api, for both processes). */
export { operationCrName };

/** The Operation CR announcing `operationId` in `namespace`. */
export function operationCr(operationId: string, namespace: string) {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: Kind.Operation,
    metadata: { name: operationCrName(operationId), namespace, labels: { [Label.OperationId]: operationId } },
    spec: { operationID: operationId },
  };
}

/** Delivery retry delay after `attempts` failures: 1 s doubling to 5 min, ±20 % jitter. */
export function deliveryBackoffMs(attempts: number, random = Math.random): number {
  return backoffDelay(attempts + 1, 1_000, 300_000, random);
}

/** How long a wake waits for the rest of its burst: the delay an Operation CR may add when no agent listens. */
const WAKE_COALESCE_MS = 50;

export interface OperationRelayOptions {
  db: Kysely<Database>;
  kc: KubeConfig;
  logger: Logger;
  registry: Registry;
  sweepIntervalMs: number;
  /** Rows claimed per transaction. Default 20 (the agent waits on these row locks while we work). */
  batchSize?: number;
}

export interface OperationRelay {
  start(): void;
  /**
   * Asks for a pass within WAKE_COALESCE_MS (NOTIFY, reconnect): wakes meanwhile share it. Passes never overlap;
   * one requested during a pass runs after it.
   */
  wake(): void;
  /** Runs passes until nothing due is left; resolves with the number delivered. */
  drain(): Promise<number>;
  stop(): Promise<void>;
}

export function createOperationRelay(options: OperationRelayOptions): OperationRelay {
  const { db, kc, logger } = options;
  const batchSize = options.batchSize ?? 20;
  // Operation CRs go only to instances on this cluster (the one kc reaches); an instance registered from
  // another cluster is reached through its agent alone. Asked once, on the first pass that needs it.
  let identity: Promise<string> | undefined;
  const ownCluster = () => {
    identity ??= clusterIdentity(kc).catch((err: unknown) => {
      identity = undefined;
      throw err;
    });
    return identity;
  };
  const delivered = getOrCreateCounter(options.registry, {
    name: 'gitops_relay_operation_crs_total',
    help: 'Operation CRs the relay handled, by result (created, already_existed, failed)',
    labelNames: ['result'],
  });
  for (const result of ['created', 'already_existed', 'failed']) delivered.inc({ result }, 0);

  let running: Promise<number> | undefined;
  let again = false;
  let stopped = false;
  let started = false;
  let timer: NodeJS.Timeout | undefined;
  let wakeTimer: NodeJS.Timeout | undefined;

  async function createCr(operation: ClaimedOperation): Promise<boolean> {
    const namespace = operation.engine_instance_namespace;
    try {
      await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: collectionPath({ apiVersion: API_GROUP_VERSION, plural: Plural.Operation, namespace }),
        body: operationCr(operation.id, namespace),
      });
      delivered.inc({ result: 'created' });
      return true;
    } catch (err) {
      if (isConflict(err)) {
        delivered.inc({ result: 'already_existed' });
        return true;
      }
      delivered.inc({ result: 'failed' });
      logger.warn(
        { err, operation: operation.id, namespace, attempts: operation.delivery_attempts + 1 },
        'could not create the Operation CR; backing off',
      );
      return false;
    }
  }

  /** One transaction: claim a batch, create the CRs, mark them. Returns [claimed, delivered]. */
  async function batch(): Promise<[number, number]> {
    return await db.transaction().execute(async (trx) => {
      const claimed = await claimUndeliveredOperations(trx, batchSize, await ownCluster());
      const results = await Promise.all(claimed.map(async (op) => [op, await createCr(op)] as const));
      const ok = results.filter(([, success]) => success).map(([op]) => op.id);
      for (const [op, success] of results) {
        if (!success) await recordDeliveryFailure(trx, op.id, deliveryBackoffMs(op.delivery_attempts));
      }
      await markOperationsDelivered(trx, ok);
      return [claimed.length, ok.length];
    });
  }

  async function pass(): Promise<number> {
    let total = 0;
    if (!(await hasUndeliveredOperations(db, await ownCluster()))) return 0;
    for (;;) {
      const [claimed, ok] = await batch();
      total += ok;
      if (claimed < batchSize || stopped) break;
    }
    if (total > 0) logger.debug({ delivered: total }, 'operations delivered');
    return total;
  }

  function run(): Promise<number> {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      let total = 0;
      try {
        do {
          again = false;
          total += await pass();
        } while (again && !stopped);
      } catch (err) {
        logger.warn({ err }, 'relay pass failed; the next sweep retries');
      } finally {
        running = undefined;
      }
      return total;
    })();
    return running;
  }

  function schedule() {
    if (stopped) return;
    timer = setTimeout(() => {
      void run().finally(schedule);
    }, options.sweepIntervalMs);
    timer.unref();
  }

  return {
    start() {
      if (started) return;
      started = true;
      void run();
      schedule();
    },
    wake() {
      // A burst of new operations (one NOTIFY each) asks once: while an agent listens, which is the usual
      // case, every pass finds nothing, so one per WAKE_COALESCE_MS is plenty.
      if (!started || stopped || wakeTimer) return;
      wakeTimer = setTimeout(() => {
        wakeTimer = undefined;
        if (!stopped) void run();
      }, WAKE_COALESCE_MS);
      wakeTimer.unref();
    },
    async drain() {
      let total = 0;
      for (;;) {
        if (running) await running;
        const n = await run();
        total += n;
        if (n === 0) return total;
      }
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(wakeTimer);
      await running;
    },
  };
}

export type OperationRelayFeature = OperationRelay & BackendFeature;

/** The relay as a backend feature: woken by every new operation (NOTIFY) and on resync. */
export function createOperationRelayFeature(ctx: BackendContext): OperationRelayFeature {
  const relay = createOperationRelay({
    db: ctx.db,
    kc: ctx.kc,
    registry: ctx.registry,
    logger: ctx.logger.child({ component: 'relay' }),
    sweepIntervalMs: ctx.config.relaySweepIntervalMs,
  });
  return {
    ...relay,
    name: 'operation-relay',
    informers: [],
    notifications: { operationCreated: () => relay.wake() },
    resync: () => relay.wake(),
  };
}
