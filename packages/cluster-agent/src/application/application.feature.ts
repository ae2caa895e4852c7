/**
 * Argo CD Applications and AppProjects as one feature: the `Application` and `AppProject` handlers, fast
 * repair (a change to the fields we own, or a deletion, re-checks the object against its row) and the
 * periodic drift resync (rows, live orphans and AppProjects → resource queue).
 */
import { type Periodic, type Predicate, runPeriodically } from '@gitops/shared';
import { type AgentFeature, type FeatureContext, keysOfDatabaseId } from '../agent-feature.ts';
import { databaseIdOf } from '../argocd.ts';
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

  /** An Application changed by someone else in what we own (or created by someone else): re-check it. */
  const changedByOthers: Predicate = {
    name: 'created or changed in what we own, not by our own apply',
    create: (app) => !reconciler.isOwnApply(app),
    // isOwnApply keeps state: asked only about a change to what we own.
    update: (old, app) => ownedState(old) !== ownedState(app) && !reconciler.isOwnApply(app),
  };
  const projectChanged: Predicate = {
    name: 'appeared unexpectedly or changed in what we own',
    // A project that appears unexpectedly (e.g. one created just before it stopped being wanted): look again.
    create: (project) => {
      const tenant = databaseIdOf(project);
      return tenant !== undefined && !reconciler.isProjectSettled(tenant);
    },
    update: (old, project) => ownedState(old) !== ownedState(project),
  };

  let resync: Periodic | undefined;
  return {
    name: 'application',
    informers: [applications, appProjects],
    // Deletes always wake: a deleted object is re-created or its row finished.
    watches: (resources) =>
      resources
        .watches(applications, keysOfDatabaseId('Application'), { predicates: [changedByOthers] })
        .watches(appProjects, keysOfDatabaseId('AppProject'), { predicates: [projectChanged] }),
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
