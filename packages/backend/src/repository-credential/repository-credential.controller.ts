/**
 * Wires the RepositoryCredential reconciler: CR informer events and Secret events (Secrets of type
 * `managed-gitops.redhat.com/repository-credential`, every namespace) → work queue keys of the CRs that
 * reference the Secret in the same namespace; operation state changes → the owner's key; a slow sweep finds
 * rows whose CR is gone. The reconciler's `requeueAfter` re-validates periodically.
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
import { jsonEqual } from '../json.ts';
import { parseRepositoryCredentialSpec } from './repository-credential.reconciler.ts';
import { REPOSITORY_CREDENTIAL_KIND } from './repository-credential.store.ts';

/** The Secrets the controller watches (field selector of the Secret informer). */
export const REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR = `type=${SecretType.RepositoryCredential}`;

export interface RepositoryCredentialControllerOptions {
  db: Kysely<Database>;
  informer: Informer<KubeObject>;
  secrets: Informer<KubeObject>;
  reconcile: Reconciler;
  registry: Registry;
  logger: Logger;
  concurrency: number;
  resyncIntervalMs: number;
}

export interface RepositoryCredentialController extends CrControllerLifecycle {
  readonly queue: WorkQueue;
}

function needsReconcile(a: KubeObject, b: KubeObject): boolean {
  if (a.metadata.resourceVersion === b.metadata.resourceVersion) return true; // periodic relist
  return (
    a.metadata.uid !== b.metadata.uid ||
    a.metadata.generation !== b.metadata.generation ||
    a.metadata.deletionTimestamp !== b.metadata.deletionTimestamp ||
    !jsonEqual(a.spec, b.spec)
  );
}

export function createRepositoryCredentialController(
  options: RepositoryCredentialControllerOptions,
): RepositoryCredentialController {
  const { db, informer, secrets, logger } = options;
  const queue = createWorkQueue({
    name: 'gitopsdeploymentrepositorycredential',
    reconcile: options.reconcile,
    concurrency: options.concurrency,
    registry: options.registry,
    logger,
  });

  /** CRs in the Secret's namespace that reference it (references never cross namespaces). */
  const enqueueUsersOf = (secret: KubeObject) => {
    for (const cr of informer.list()) {
      if (
        cr.metadata.namespace === secret.metadata.namespace &&
        parseRepositoryCredentialSpec(cr.spec).secret === secret.metadata.name
      ) {
        queue.add(objectKey(cr));
      }
    }
  };
  const unsubscribe = [
    informer.onAdd((o) => queue.add(objectKey(o))),
    informer.onUpdate((a, b) => {
      if (needsReconcile(a, b)) queue.add(objectKey(b));
    }),
    informer.onDelete((o) => queue.add(objectKey(o))),
    secrets.onAdd(enqueueUsersOf),
    secrets.onUpdate((a, b) => {
      if (a.metadata.resourceVersion !== b.metadata.resourceVersion) enqueueUsersOf(b);
    }),
    secrets.onDelete(enqueueUsersOf),
  ];
  return {
    queue,
    ...crControllerLifecycle({
      kind: REPOSITORY_CREDENTIAL_KIND,
      db: db,
      informer,
      queue,
      unsubscribe,
      resyncIntervalMs: options.resyncIntervalMs,
      logger: logger,
    }),
  };
}
