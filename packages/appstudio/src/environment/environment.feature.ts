/**
 * Environment → `managed-environment-<env>` GitOpsDeploymentManagedEnvironment (README: "Environment"). The
 * wiring: the Environments (`for`), what else wakes them (`environment.watches.ts`), the reconcile's steps
 * (`environment.reconciler.ts`).
 */
import { SecretType } from '@gitops/api';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { createEnvironmentReconciler } from './environment.reconciler.ts';
import {
  type EnvironmentWatchDeps,
  environmentChanged,
  watchEnvironmentSources,
} from './environment.watches.ts';

export type EnvironmentFeatureDeps = EnvironmentWatchDeps;

export function createEnvironmentFeature(
  ctx: AppStudioContext,
  deps: EnvironmentFeatureDeps,
): AppStudioController {
  const builder = newAppStudioController(ctx, 'appstudio-environment').for(deps.environments, {
    predicates: [environmentChanged],
  });
  const reconcile = createEnvironmentReconciler(ctx, deps);
  return watchEnvironmentSources(builder, deps).complete(quietInTerminatingNamespace(reconcile));
}

/** Secrets the Environment controller watches: those of the managed-environment type. */
export const environmentSecretFieldSelector = `type=${SecretType.ManagedEnvironment}`;
/** Opaque Secrets: a target's Secret of a SpaceRequest is one (it gets copied). */
export const opaqueSecretFieldSelector = 'type=Opaque';
