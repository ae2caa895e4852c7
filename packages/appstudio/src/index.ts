/**
 * @gitops/appstudio: the App Studio environment API (appstudio.redhat.com/v1alpha1) on top of the core
 * API. Each kind is a feature of the shared shape; `createAppStudioFeatures` returns them for the backend's
 * feature list (GITOPS_APPSTUDIO, default on). It talks only to the Kubernetes API. README.md says what each
 * kind does and where it deviates from the original.
 */
import { AppStudioKinds, Kinds } from '@gitops/api';
import type { Feature } from '@gitops/shared';
import { type AppStudioOptions, createAppStudioContext } from './context.ts';
import {
  createEnvironmentFeature,
  environmentSecretFieldSelector,
} from './environment/environment.feature.ts';
import { createPromotionRunFeature } from './promotion-run/promotion-run.feature.ts';
import { createBindingFeature } from './snapshot-environment-binding/binding.feature.ts';

export { type AppStudioContext, type AppStudioOptions, requireAppStudioApi } from './context.ts';
export { environmentOwnerOf } from './environment/environment.feature.ts';
export { gitOpsDeploymentName } from './snapshot-environment-binding/binding.render.ts';

export interface AppStudioFeatures {
  readonly features: readonly Feature[];
  readonly environments: ReturnType<typeof createEnvironmentFeature>;
  readonly bindings: ReturnType<typeof createBindingFeature>;
  readonly promotionRuns: ReturnType<typeof createPromotionRunFeature>;
}

export function createAppStudioFeatures(options: AppStudioOptions): AppStudioFeatures {
  const ctx = createAppStudioContext(options);
  const environments = ctx.informer(AppStudioKinds.Environment.resource);
  const bindings = ctx.informer(AppStudioKinds.SnapshotEnvironmentBinding.resource);
  const managedEnvironments = ctx.informer(Kinds.GitOpsDeploymentManagedEnvironment.resource);
  const deployments = ctx.informer(Kinds.GitOpsDeployment.resource);
  const applications = ctx.informer(AppStudioKinds.Application.resource, { unsharded: true });
  const secrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: environmentSecretFieldSelector },
  );
  const environmentFeature = createEnvironmentFeature(ctx, { environments, managedEnvironments, secrets });
  const bindingFeature = createBindingFeature(ctx, { bindings, environments, deployments, applications });
  const promotionRuns = ctx.informer(AppStudioKinds.PromotionRun.resource);
  const promotionRunFeature = createPromotionRunFeature(ctx, { promotionRuns, bindings, environments });
  return {
    features: [environmentFeature, bindingFeature, promotionRunFeature],
    promotionRuns: promotionRunFeature,
    environments: environmentFeature,
    bindings: bindingFeature,
  };
}
