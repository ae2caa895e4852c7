/**
 * Status path (docs/data-model.md): Application event → projection → written to application_state only
 * when it changed (the table's trigger NOTIFYs the backend). An Application with our label whose row does not
 * exist is handed to the resource queue, which deletes it (orphan cleanup).
 */
import { type Db, writeApplicationStates } from '@gitops/db';
import {
  type Controller,
  createBatcher,
  getOrCreateCounter,
  type Informer,
  ignoreDeletes,
  jsonFingerprint,
  type KubeObject,
  type Logger,
  newController,
  type Registry,
  splitObjectKey,
} from '@gitops/shared';
import { AgentLabel, isUuid } from '../argocd.ts';
import { projectApplicationState, projectCacheLag } from './application-state.projection.ts';

export interface ApplicationStatusControllerOptions {
  db: Db;
  /** This agent's instance: only the Applications it holds are reported (a moved one is the new instance's). */
  engineInstanceId: string;
  logger: Logger;
  registry: Registry;
  concurrency: number;
  applications: Informer<KubeObject>;
  /** Our AppProjects (to tell Argo CD's cache lag from a missing project). */
  appProjects: Pick<Informer<KubeObject>, 'get'>;
  /** An Application whose application row does not exist, or is not held by this instance (moved). */
  onOrphan(applicationId: string): void;
}

export function createApplicationStatusController(
  options: ApplicationStatusControllerOptions,
): Controller<KubeObject> {
  const { db } = options;
  /** States written while others are on their way go together (one statement under a burst). */
  const writing = createBatcher({
    run: (items: Parameters<typeof writeApplicationStates>[1]) =>
      writeApplicationStates(db, items, { engineInstanceId: options.engineInstanceId }),
  });
  /** Last projection stored per application id, so unchanged status costs no database round trip. */
  const stored = new Map<string, string>();
  const writes = getOrCreateCounter(options.registry, {
    name: 'application_state_writes_total',
    help: 'application_state rows written because the projected Argo CD status changed',
    labelNames: [],
  });

  options.applications.onDelete((application) => {
    const id = application.metadata.labels?.[AgentLabel.DatabaseId];
    if (id) stored.delete(id);
  });
  // Every create and update of an Application may change its projection (compared below, before any write).
  return newController('cluster-agent-application-status', options)
    .for(options.applications, { predicates: [ignoreDeletes] })
    .withOptions({ concurrency: options.concurrency })
    .complete(async (key, { logger }) => {
      const { namespace, name } = splitObjectKey(key);
      const application = options.applications.get(namespace, name);
      if (!application) return;
      const id = application.metadata.labels?.[AgentLabel.DatabaseId];
      if (!isUuid(id)) {
        logger.warn('Application with a malformed database-id label ignored');
        return;
      }
      // Argo CD may judge a new tenant's first Application before its cache has the AppProject we created
      // first: that InvalidSpecError is not the user's, so it is not reported while the project is new,
      // and the Application is looked at again when the grace ends (a project still missing then is real).
      let graceMs = 0;
      const projectName = (application.spec as { project?: unknown } | undefined)?.project;
      const project =
        typeof projectName === 'string' && namespace !== undefined
          ? options.appProjects.get(namespace, projectName)
          : undefined;
      const projection = projectApplicationState(application, {
        ignoreCondition: (condition) => {
          const lag = projectCacheLag(
            condition,
            application,
            project && { createdAt: String(project.metadata.creationTimestamp ?? '') || undefined },
            Date.now(),
          );
          graceMs = Math.max(graceMs, lag);
          return lag > 0;
        },
      });
      const requeue = graceMs > 0 ? { requeueAfter: graceMs + 1_000 } : undefined;
      const canonical = jsonFingerprint(projection);
      if (stored.get(id) === canonical) return requeue;
      const result = await writing.submit({ applicationId: id, state: projection });
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
      return requeue;
    });
}
