/**
 * SnapshotEnvironmentBinding → one GitOpsDeployment per `status.components[]` entry (README:
 * "SnapshotEnvironmentBinding"). The wiring: the bindings (`for`), what else wakes them
 * (`binding.watches.ts`), the reconcile's steps (`binding.reconciler.ts`).
 */
import { AppStudioKinds } from '@gitops/api';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { createBindingReconciler } from './binding.reconciler.ts';
import { type BindingWatchDeps, bindingChanged, watchBindingSources } from './binding.watches.ts';

export type BindingFeatureDeps = BindingWatchDeps;

export function createBindingFeature(ctx: AppStudioContext, deps: BindingFeatureDeps): AppStudioController {
  const builder = newAppStudioController(ctx, 'appstudio-binding')
    // Our own status writes change only gitopsDeployments and the conditions we set.
    .for(deps.bindings, { type: AppStudioKinds.SnapshotEnvironmentBinding, predicates: [bindingChanged] });
  const reconcile = createBindingReconciler(ctx, deps);
  return watchBindingSources(builder, deps).complete(quietInTerminatingNamespace(reconcile));
}
