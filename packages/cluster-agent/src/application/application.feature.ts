/**
 * Argo CD Applications and AppProjects as one feature: the `Application` and `AppProject` handlers, fast
 * repair (a change to the fields we own, or a deletion, re-checks the object against its row) and the
 * periodic drift resync (rows, live orphans and AppProjects → resource queue), followed by the deletion
 * guard's sweep (holds no longer needed, old proofs).
 */
import { existingApplicationIds, startDueOperationsOfApplication } from '@gitops/db';
import {
  jsonEqual,
  type KubeObject,
  type Predicate,
  passesCreate,
  passesDelete,
  passesUpdate,
  periodicJob,
} from '@gitops/shared';
import { type AgentFeature, type FeatureContext, keysOfDatabaseId } from '../agent-feature.ts';
import { databaseIdOf } from '../argocd.ts';
import { resyncOnce } from '../resync/drift.resync.ts';
import { type ApplicationReconciler, createApplicationReconciler } from './application.reconciler.ts';
import { deletionBudgetOf, sweepDeletionGuard } from './deletion-guard.ts';
import { ownedFields } from './settled.ts';

export interface ApplicationFeature extends AgentFeature {
  /** The tenant's AppProject, for the features whose rows it lists (repository credentials, environments). */
  readonly reconcileAppProject: ApplicationReconciler['reconcileAppProject'];
}

export function createApplicationFeature(ctx: FeatureContext): ApplicationFeature {
  const { applications, appProjects, config, logger } = ctx;
  const reconciler = createApplicationReconciler(ctx);
  const ownApplies = [reconciler.ownApplies];
  const ownedChanged = (a: KubeObject, b: KubeObject) => !jsonEqual(ownedFields(a), ownedFields(b));

  /** An Application changed by someone else in what we own (or created by someone else): re-check it. */
  const changedByOthers: Predicate = {
    name: 'created or changed in what we own, not by our own apply',
    create: (app) => passesCreate(ownApplies, app),
    // The echo filter keeps state: asked only about a change to what we own.
    update: (old, app) => ownedChanged(old, app) && passesUpdate(ownApplies, old, app),
    // Always passes (a deleted Application is re-created or its row finished); the filter forgets it.
    delete: (app) => passesDelete(ownApplies, app),
  };
  const projectChanged: Predicate = {
    name: 'appeared unexpectedly or changed in what we own',
    // A project that appears unexpectedly (e.g. one created just before it stopped being wanted): look again.
    create: (project) => {
      const tenant = databaseIdOf(project);
      return tenant !== undefined && !reconciler.isProjectSettled(tenant);
    },
    update: (old, project) => ownedChanged(old, project),
  };

  return {
    name: 'application',
    informers: [applications, appProjects],
    // Deletes always wake: a deleted object is re-created or its row finished.
    watches: (resources) =>
      resources
        .watches(applications, keysOfDatabaseId('Application'), { predicates: [changedByOthers] })
        .watches(appProjects, keysOfDatabaseId('AppProject'), { predicates: [projectChanged] }),
    handles: {
      // The row is read with the start of its operations: one statement.
      Application: {
        async begin(id) {
          const { found, read } = await startDueOperationsOfApplication(ctx.db, ctx.engineInstanceId, id);
          return {
            found,
            reconcile: ({ operations, ownerUserIds, signal, logger }) =>
              reconciler.reconcileApplication(id, read, {
                ownerUserIds,
                recomputeProject: operations.length > 0,
                signal,
                logger,
              }),
          };
        },
      },
      AppProject: (id, { signal, logger }) => reconciler.reconcileAppProject(id, { signal, logger }),
    },
    reconcileAppProject: reconciler.reconcileAppProject,
    ...periodicJob(
      'drift-resync',
      config.resyncIntervalMs,
      async (signal) => {
        await resyncOnce(
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
        );
        await sweepDeletionGuard(
          {
            db: ctx.db,
            engineInstanceId: ctx.engineInstanceId,
            namespace: ctx.namespace,
            applications,
            deletionBudget: deletionBudgetOf(config),
            rowExists: (ids) => existingApplicationIds(ctx.db, ctx.engineInstanceId, ids),
          },
          logger,
        );
      },
      { logger, jitter: 0.25 },
    ),
  };
}
