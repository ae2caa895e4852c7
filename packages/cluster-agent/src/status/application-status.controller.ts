/**
 * Status path (docs/data-model.md): Application event → projection → written to application_state only
 * when it changed (the table's trigger NOTIFYs the backend). An Application with our label whose row does not
 * exist is handed to the resource queue, which deletes it (orphan cleanup).
 */
import { type Db, writeApplicationState } from '@gitops/db';
import {
  createWorkQueue,
  getOrCreateCounter,
  type Informer,
  type KubeObject,
  type Logger,
  objectKey,
  type Registry,
  splitObjectKey,
  type WorkQueue,
} from '@gitops/shared';
import { AgentLabel, isUuid } from '../argocd.ts';
import { canonicalJson, projectApplicationState } from './application-state.projection.ts';

export interface ApplicationStatusControllerOptions {
  db: Db;
  logger: Logger;
  registry: Registry;
  concurrency: number;
  applications: Informer<KubeObject>;
  /** An Application whose application row does not exist. */
  onOrphan(applicationId: string): void;
}

export function createApplicationStatusController(options: ApplicationStatusControllerOptions): WorkQueue {
  const { db } = options;
  /** Last projection stored per application id, so unchanged status costs no database round trip. */
  const stored = new Map<string, string>();
  const writes = getOrCreateCounter(options.registry, {
    name: 'application_state_writes_total',
    help: 'application_state rows written because the projected Argo CD status changed',
    labelNames: [],
  });

  const queue = createWorkQueue({
    name: 'cluster-agent-application-status',
    concurrency: options.concurrency,
    registry: options.registry,
    logger: options.logger,
    async reconcile(key, { logger }) {
      const { namespace, name } = splitObjectKey(key);
      const application = options.applications.get(namespace, name);
      if (!application) return;
      const id = application.metadata.labels?.[AgentLabel.DatabaseId];
      if (!isUuid(id)) {
        logger.warn('Application with a malformed database-id label ignored');
        return;
      }
      const projection = projectApplicationState(application);
      const canonical = canonicalJson(projection);
      if (stored.get(id) === canonical) return;
      const result = await writeApplicationState(db, id, projection);
      if (result === 'application-missing') {
        stored.delete(id);
        options.onOrphan(id);
        return;
      }
      stored.set(id, canonical);
      if (result === 'changed') {
        writes.inc();
        logger.debug({ applicationId: id }, 'application_state written');
      }
    },
  });

  options.applications.onAdd((application) => queue.add(objectKey(application)));
  options.applications.onUpdate((_old, application) => queue.add(objectKey(application)));
  options.applications.onDelete((application) => {
    const id = application.metadata.labels?.[AgentLabel.DatabaseId];
    if (id) stored.delete(id);
  });
  return queue;
}
