/**
 * Status path (docs/data-model.md): Application event → projection → written to application_state only
 * when it changed (the table's trigger NOTIFYs the backend). A state Argo CD is on its way from (on-the-way.ts)
 * waits for the settled one, which is written at once: up to GITOPS_STATUS_QUEUED_INTERVAL while Argo CD has
 * not acted on the Application yet, up to GITOPS_STATUS_PROGRESS_INTERVAL while a sync runs, counted from the
 * first state of that stage not written; what follows within it replaces it. A create's five or six states so
 * cost one write, one NOTIFY, one read of the backend and one status write, not one each (issue 34).
 * An Application with our label whose row does not exist is handed to the resource queue, which deletes it
 * (orphan cleanup).
 */
import { type Db, writeApplicationStates } from '@gitops/db';
import {
  type Controller,
  createBatcher,
  getOrCreateCounter,
  type Informer,
  ignoreDeletes,
  jsonField,
  jsonFingerprint,
  type KubeObject,
  type Logger,
  newController,
  type Registry,
  splitObjectKey,
} from '@gitops/shared';
import { AgentLabel, isUuid } from '../argocd.ts';
import { projectApplicationState, projectCacheLag } from './application-state.projection.ts';
import { isAutomated, type OnTheWay, onTheWay } from './on-the-way.ts';

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
  /** How long a state of each stage on the way may wait for the settled one (0: written at once). */
  intervalsMs: Record<OnTheWay, number>;
}

/** What a debug line says of a written state: its sync, health and operation phase. */
const summaryOf = (projection: unknown) => ({
  sync: jsonField(projection, 'sync', 'status'),
  health: jsonField(projection, 'health', 'status'),
  phase: jsonField(projection, 'operationState', 'phase'),
});

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

  /**
   * When each application's first state of its current stage on the way was put off; written by the end of
   * that stage's interval. A new stage starts its own interval: a sync that starts after a long wait in Argo
   * CD's queue is not written at once for having waited.
   */
  const putOff = new Map<string, { stage: OnTheWay; since: number }>();

  options.applications.onDelete((application) => {
    const id = application.metadata.labels?.[AgentLabel.DatabaseId];
    if (id) {
      stored.delete(id);
      putOff.delete(id);
    }
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
      if (stored.get(id) === canonical) {
        putOff.delete(id);
        return requeue;
      }
      const stage = onTheWay(projection, isAutomated(application));
      if (stage !== undefined && options.intervalsMs[stage] > 0) {
        const held = putOff.get(id);
        const since = held?.stage === stage ? held.since : performance.now();
        putOff.set(id, { stage, since });
        const wait = since + options.intervalsMs[stage] - performance.now();
        if (wait > 0) return { requeueAfter: Math.min(wait, requeue?.requeueAfter ?? wait) };
      }
      putOff.delete(id);
      const result = await writing.submit({ applicationId: id, state: projection });
      if (result === 'application-missing') {
        stored.delete(id);
        options.onOrphan(id);
        return;
      }
      stored.set(id, canonical);
      if (result === 'changed') {
        writes.inc();
        logger.debug({ applicationId: id, ...summaryOf(projection) }, 'application_state written');
      }
      return requeue;
    });
}
