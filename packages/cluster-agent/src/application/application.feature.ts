/**
 * Argo CD Applications and AppProjects as one feature: the `Application` and `AppProject` handlers, fast
 * repair (a change to the fields we own, or a deletion, re-checks the object against its row) and the
 * periodic drift resync (rows, live orphans and AppProjects → resource queue).
 */
import { type KubeObject, type Periodic, runPeriodically } from '@gitops/shared';
import type { AgentFeature, FeatureContext } from '../agent-feature.ts';
import { AgentLabel, isUuid } from '../argocd.ts';
import { resyncOnce } from '../resync/drift.resync.ts';
import {
  type ApplicationReconciler,
  createApplicationReconciler,
  ownedState,
} from './application.reconciler.ts';

export interface ApplicationFeature extends AgentFeature {
  /** The tenant's AppProject, for the features whose rows it lists (repository credentials, environments). */
  readonly reconcileAppProject: ApplicationReconciler['reconcileAppProject'];
}

export function createApplicationFeature(ctx: FeatureContext): ApplicationFeature {
  const { applications, appProjects, config, logger } = ctx;
  const reconciler = createApplicationReconciler(ctx);

  const applicationKey = (app: KubeObject) => {
    const id = app.metadata.labels?.[AgentLabel.DatabaseId];
    if (isUuid(id)) ctx.enqueue('Application', id);
  };
  applications.onAdd((app) => {
    if (!reconciler.isOwnApply(app)) applicationKey(app);
  });
  applications.onUpdate((old, app) => {
    if (ownedState(old) !== ownedState(app) && !reconciler.isOwnApply(app)) applicationKey(app);
  });
  applications.onDelete(applicationKey);
  const projectKey = (project: KubeObject) => {
    const tenant = project.metadata.labels?.[AgentLabel.DatabaseId];
    if (isUuid(tenant)) ctx.enqueue('AppProject', tenant);
  };
  // A project that appears unexpectedly (e.g. one created just before it stopped being wanted): look again.
  appProjects.onAdd((project) => {
    const tenant = project.metadata.labels?.[AgentLabel.DatabaseId];
    if (isUuid(tenant) && !reconciler.isProjectSettled(tenant)) projectKey(project);
  });
  appProjects.onUpdate((old, project) => {
    if (ownedState(old) !== ownedState(project)) projectKey(project);
  });
  appProjects.onDelete(projectKey);

  let resync: Periodic | undefined;
  return {
    name: 'application',
    informers: [applications, appProjects],
    handles: {
      Application: (id, { operations, ownerUserIds, signal, logger }) =>
        reconciler.reconcileApplication(id, {
          ownerUserIds,
          recomputeProject: operations.length > 0,
          signal,
          logger,
        }),
      AppProject: (id, { signal, logger }) => reconciler.reconcileAppProject(id, { signal, logger }),
    },
    reconcileAppProject: reconciler.reconcileAppProject,
    start() {
      resync = runPeriodically(
        'drift-resync',
        config.resyncIntervalMs,
        (signal) =>
          resyncOnce(
            {
              db: ctx.db,
              logger,
              namespace: ctx.namespace,
              engineInstanceId: ctx.engineInstanceId,
              applications,
              appProjects,
              enqueueResource: ctx.enqueue,
              isSettled: reconciler.isSettled,
              isProjectSettled: reconciler.isProjectSettled,
            },
            signal,
          ),
        { logger, jitter: 0.25 },
      );
    },
    async stop() {
      await resync?.stop();
    },
  };
}
