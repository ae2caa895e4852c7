/**
 * Watches Operation CRs in the Argo CD namespace and routes each to the resource queue. Operation CRs in other
 * namespaces are never seen (the informer is namespaced); ones whose row does not exist or belongs to another
 * engine instance are ignored; ones whose row is finished are deleted.
 */
import { getOperation } from '@gitops/db';
import {
  type Controller,
  deleteIfExists,
  type Informer,
  ignoreDeletes,
  type KubeObject,
  newController,
  splitObjectKey,
} from '@gitops/shared';
import { isUuid } from '../argocd.ts';
import { type OperationQueueContext, operationCrRef } from './operation.processor.ts';

export interface OperationCrControllerOptions extends OperationQueueContext {
  operations: Informer<KubeObject>;
  enqueueResource(resourceType: string, resourceId: string): void;
}

/** `spec.operationID` of an Operation CR, when it is a uuid. */
export function operationIdOf(operation: KubeObject): string | undefined {
  const id = (operation.spec as { operationID?: unknown } | undefined)?.operationID;
  return isUuid(id) ? id.toLowerCase() : undefined;
}

export function createOperationCrController(options: OperationCrControllerOptions): Controller<KubeObject> {
  const { db, namespace } = options;
  // A deleted CR needs nothing: its operation is finished, or the sweep finds it Waiting.
  return newController('cluster-agent-operation-crs', options)
    .for(options.operations, { predicates: [ignoreDeletes] })
    .withOptions({ concurrency: options.concurrency })
    .complete(async (key, { logger, signal }) => {
      const { namespace: crNamespace, name } = splitObjectKey(key);
      if (crNamespace !== namespace) return;
      const operation = options.operations.get(crNamespace, name);
      if (!operation) return;
      const id = operationIdOf(operation);
      if (!id) {
        logger.warn('Operation CR without a valid spec.operationID ignored');
        return;
      }
      const row = await getOperation(db, id);
      if (!row || row.engine_instance_id !== options.engineInstanceId) {
        logger.debug({ operationId: id }, 'Operation CR ignored: no such operation for this engine instance');
        return;
      }
      if (row.state === 'Completed' || row.state === 'Failed') {
        if (operation.metadata.name === operationCrRef(id, namespace).name) {
          await deleteIfExists(options.kc, operationCrRef(id, namespace), {
            uid: operation.metadata.uid,
            signal,
          });
        }
        return;
      }
      options.enqueueResource(row.resource_type, row.resource_id);
    });
}
