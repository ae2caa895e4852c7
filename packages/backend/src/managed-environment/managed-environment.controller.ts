/**
 * Wires the ManagedEnvironment reconciler: CR informer events and Secret events (Secrets of type
 * `managed-gitops.redhat.com/managed-environment`, mapped to the CRs of the same namespace that
 * reference them) → work queue keys `namespace/name`. The reconciler's `requeueAfter` is the periodic
 * re-check; the informer's relist is the slow safety net.
 */
import { SecretType } from '@gitops/api';
import type { Database } from '@gitops/db';
import {
  createWorkQueue,
  type Informer,
  type KubeObject,
  type Logger,
  objectKey,
  type Reconciler,
  type Registry,
  type WorkQueue,
} from '@gitops/shared';
import type { Kysely } from 'kysely';
import { type CrControllerLifecycle, crControllerLifecycle } from '../cr-controller.ts';
import { isJsonObject, jsonEqual } from '../json.ts';
import { MANAGED_ENVIRONMENT_KIND } from './managed-environment.store.ts';

export interface ManagedEnvironmentControllerOptions {
  /** With it, a slow sweep enqueues rows whose CR is gone (a delete missed while the backend was down). */
  db?: Kysely<Database>;
  resyncIntervalMs?: number;
  informer: Informer<KubeObject>;
  secrets: Informer<KubeObject>;
  reconcile: Reconciler;
  registry: Registry;
  logger: Logger;
  concurrency: number;
  /** The cached status conditions of a ManagedEnvironment changed (or it went away). */
  onConditionChanged?: (namespace: string) => void;
}

export interface ManagedEnvironmentController extends CrControllerLifecycle {
  readonly queue: WorkQueue;
}

/** Field selector of the Secrets watched (only ManagedEnvironment credentials). */
export const MANAGED_ENVIRONMENT_SECRET_SELECTOR = `type=${SecretType.ManagedEnvironment}`;

function credentialsSecretOf(object: KubeObject): string | undefined {
  const spec = object.spec;
  return isJsonObject(spec) && typeof spec.credentialsSecret === 'string'
    ? spec.credentialsSecret
    : undefined;
}

export function createManagedEnvironmentController(
  options: ManagedEnvironmentControllerOptions,
): ManagedEnvironmentController {
  const { informer, secrets } = options;
  const queue = createWorkQueue({
    name: 'gitopsdeploymentmanagedenvironment',
    reconcile: options.reconcile,
    concurrency: options.concurrency,
    registry: options.registry,
    logger: options.logger,
  });
  /** A Secret changed: every CR of its namespace that references it. */
  const enqueueReferencing = (secret: KubeObject) => {
    const namespace = secret.metadata.namespace;
    if (!namespace) return;
    for (const environment of informer.list(namespace)) {
      if (credentialsSecretOf(environment) === secret.metadata.name) queue.add(objectKey(environment));
    }
  };
  const unsubscribe = [
    informer.onAdd((o) => queue.add(objectKey(o))),
    informer.onUpdate((a, b) => {
      const changed =
        a.metadata.resourceVersion === b.metadata.resourceVersion ||
        a.metadata.generation !== b.metadata.generation ||
        a.metadata.uid !== b.metadata.uid ||
        a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp ||
        !jsonEqual(a.metadata.labels, b.metadata.labels) ||
        !jsonEqual(a.spec, b.spec);
      if (changed) queue.add(objectKey(b));
      const conditions = (o: KubeObject) => (isJsonObject(o.status) ? o.status.conditions : undefined);
      if (b.metadata.namespace && !jsonEqual(conditions(a), conditions(b))) {
        options.onConditionChanged?.(b.metadata.namespace);
      }
    }),
    informer.onDelete((o) => {
      queue.add(objectKey(o));
      if (o.metadata.namespace) options.onConditionChanged?.(o.metadata.namespace);
    }),
    secrets.onAdd(enqueueReferencing),
    secrets.onUpdate((a, b) => {
      if (a.metadata.resourceVersion !== b.metadata.resourceVersion) enqueueReferencing(b);
    }),
    secrets.onDelete(enqueueReferencing),
  ];
  return {
    queue,
    ...crControllerLifecycle({
      kind: MANAGED_ENVIRONMENT_KIND,
      db: options.db,
      informer,
      queue,
      unsubscribe,
      resyncIntervalMs: options.resyncIntervalMs ?? 600_000,
      logger: options.logger,
    }),
  };
}
