/**
 * What the agent made of the operations a custom resource announced, and announcing one again after the
 * agent gave up on it. Shared by the reconcilers that report or retry the agent's work (GitOpsDeployment,
 * ManagedEnvironment).
 */
import { type Database, insertOperation, listOperationsOfOwner, type OperationRow } from '@gitops/db';
import type { Kysely, Transaction } from 'kysely';
import type { CrKindDescriptor } from './kinds.ts';

export interface OperationsOutcome {
  /** Some operation is still Waiting or In_Progress. */
  pending: boolean;
  /** The operation that finished last (the newest word from the agent), if any. */
  lastFinished: OperationRow | undefined;
  /** The Waiting operation created first (the longest wait), if any. */
  oldestWaiting: OperationRow | undefined;
}

/**
 * The operations on the rows of an object of `kind` (its `resourceType`) owned by the object `ownerUid`
 * (optionally for one resource). The agent serialises work per resource, so the operation that finished last
 * is the newest outcome. With `resourceId` the query uses the (resource_type, resource_id) index; without it
 * (a deleting CR whose rows are gone) it filters on the owner alone.
 */
export async function operationsOutcome(
  db: Kysely<Database>,
  kind: Pick<CrKindDescriptor, 'kind' | 'resourceType'>,
  ownerUid: string,
  resourceId?: string,
): Promise<OperationsOutcome> {
  const operations = await listOperationsOfOwner(
    db,
    { kind: kind.kind, uid: ownerUid },
    kind.resourceType,
    resourceId,
  );
  let lastFinished: OperationRow | undefined;
  let oldestWaiting: OperationRow | undefined;
  for (const operation of operations) {
    if (operation.state === 'Waiting' && (!oldestWaiting || operation.created_at < oldestWaiting.created_at))
      oldestWaiting = operation;
    if (operation.finished_at === null) continue;
    if (
      !lastFinished ||
      operation.finished_at > lastFinished.finished_at! ||
      (operation.finished_at.getTime() === lastFinished.finished_at!.getTime() &&
        operation.updated_at > lastFinished.updated_at)
    ) {
      lastFinished = operation;
    }
  }
  return {
    pending: operations.some((o) => o.state === 'Waiting' || o.state === 'In_Progress'),
    lastFinished,
    oldestWaiting,
  };
}

/** Milliseconds until an operation that Failed may be announced again (0: now). */
export function retryDueIn(failed: OperationRow, retryAfterMs: number, now: Date): number {
  const waited = now.getTime() - (failed.finished_at ?? failed.updated_at).getTime();
  return Math.max(0, retryAfterMs - waited);
}

/** Announces the resource of a Failed operation again, to the same engine instance, owned by the same CR. */
export async function reannounceFailedOperation(trx: Transaction<Database>, failed: OperationRow) {
  return await insertOperation(trx, {
    engineInstanceId: failed.engine_instance_id,
    resourceType: failed.resource_type,
    resourceId: failed.resource_id,
    ownerUserId: failed.owner_user_id,
    ownerCr:
      failed.owner_kind && failed.owner_namespace && failed.owner_name && failed.owner_uid
        ? {
            kind: failed.owner_kind,
            namespace: failed.owner_namespace,
            name: failed.owner_name,
            uid: failed.owner_uid,
          }
        : null,
  });
}
