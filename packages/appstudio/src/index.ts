/**
 * @gitops/appstudio: the App Studio environment API (appstudio.redhat.com/v1alpha1) on top of the core
 * API. Each kind is a feature of the shared shape; `createAppStudioFeatures` returns them for the backend's
 * feature list (GITOPS_APPSTUDIO, default on). It talks only to the Kubernetes API. README.md says what each
 * kind does and where it deviates from the original.
 */
import { AppStudioKinds, Kinds } from '@gitops/api';
import { ErrorCode, type Feature, TerminalError } from '@gitops/shared';
import { type AppStudioOptions, createAppStudioContext } from './context.ts';
import { createTargetFeature } from './deployment-target/target.feature.ts';
import { createClaimFeature } from './deployment-target-claim/claim.feature.ts';
import {
  createEnvironmentFeature,
  environmentSecretFieldSelector,
  opaqueSecretFieldSelector,
} from './environment/environment.feature.ts';
import { createRenderFeature } from './gitops-repository/render.feature.ts';
import { createPromotionRunFeature } from './promotion-run/promotion-run.feature.ts';
import { createDevSandboxProvisioner } from './provisioners/devsandbox.feature.ts';
import { createNamespaceProvisioner } from './provisioners/namespace.provisioner.ts';
import { registerProvisionedTokenExpiry, tokenTimesProblem } from './provisioners/namespace-token.ts';
import {
  createNamespaceTokenRenewal,
  type NamespaceTokenRenewal,
} from './provisioners/namespace-token-renewal.ts';
import type { Provisioner } from './provisioners/provisioner.ts';
import { createBindingFeature } from './snapshot-environment-binding/binding.feature.ts';

export {
  type AppStudioContext,
  type AppStudioOptions,
  type PushedCommit,
  requireAppStudioApi,
} from './context.ts';
export { environmentOwnerOf } from './environment/environment.watches.ts';
export { RENDER_ANNOTATION } from './gitops-repository/render.ts';
export { gitOpsDeploymentName } from './snapshot-environment-binding/binding.render.ts';

export interface AppStudioFeatures {
  readonly features: readonly Feature[];
  readonly environments: ReturnType<typeof createEnvironmentFeature>;
  readonly bindings: ReturnType<typeof createBindingFeature>;
  readonly promotionRuns: ReturnType<typeof createPromotionRunFeature>;
  readonly renders: ReturnType<typeof createRenderFeature>;
  readonly claims: ReturnType<typeof createClaimFeature>;
  readonly targets: ReturnType<typeof createTargetFeature>;
  /** Renewal of the namespace provisioner's ServiceAccount tokens. */
  readonly namespaceTokens: NamespaceTokenRenewal;
}

/** @throws TerminalError when the namespace provisioner's token times do not fit (renew window ≥ lifetime). */
export function createAppStudioFeatures(options: AppStudioOptions): AppStudioFeatures {
  const ctx = createAppStudioContext(options);
  const tokenProblem = tokenTimesProblem(ctx.namespaceProvisioner);
  if (tokenProblem) throw new TerminalError(ErrorCode.configInvalid, tokenProblem);
  const environments = ctx.kindInformer('Environment');
  const bindings = ctx.kindInformer('SnapshotEnvironmentBinding');
  const managedEnvironments =
    ctx.sharedInformers.GitOpsDeploymentManagedEnvironment ??
    ctx.informer(Kinds.GitOpsDeploymentManagedEnvironment.resource);
  const deployments = ctx.sharedInformers.GitOpsDeployment ?? ctx.informer(Kinds.GitOpsDeployment.resource);
  const applications = ctx.kindInformer('Application', { unsharded: true });
  const secrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: environmentSecretFieldSelector },
  );
  const opaqueSecrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: opaqueSecretFieldSelector },
  );
  const claims = ctx.kindInformer('DeploymentTargetClaim');
  const targets = ctx.kindInformer('DeploymentTarget');
  // Classes are cluster-scoped and shared by every shard.
  const classes = ctx.kindInformer('DeploymentTargetClass', { unsharded: true });

  const provisioners: Provisioner[] = [createNamespaceProvisioner(ctx, ctx.namespaceProvisioner)];
  registerProvisionedTokenExpiry(ctx.registry, { targets, secrets });
  const namespaceTokens = createNamespaceTokenRenewal(
    ctx,
    { targets, secrets, claims },
    ctx.namespaceProvisioner,
  );
  const extraFeatures: Feature[] = [];
  const spaceRequests = ctx.devSandbox ? ctx.informer(AppStudioKinds.SpaceRequest.resource) : undefined;
  if (spaceRequests) {
    const devSandbox = createDevSandboxProvisioner(ctx, {
      spaceRequests,
      claims,
      targets,
      classes,
      allowInsecureSkipTLSVerify: ctx.devSandboxInsecure,
    });
    provisioners.push(devSandbox);
    extraFeatures.push(devSandbox);
  }

  const environmentFeature = createEnvironmentFeature(ctx, {
    environments,
    managedEnvironments,
    secrets,
    opaqueSecrets,
    claims,
    targets,
  });
  const bindingFeature = createBindingFeature(ctx, {
    bindings,
    environments,
    deployments,
    applications,
    claims,
    targets,
  });
  const promotionRuns = ctx.kindInformer('PromotionRun');
  const promotionRunFeature = createPromotionRunFeature(ctx, { promotionRuns, bindings, environments });
  const renderFeature = createRenderFeature(ctx, { bindings, applications, environments, promotionRuns });
  const claimFeature = createClaimFeature(ctx, { claims, targets, classes, environments, provisioners });
  const targetFeature = createTargetFeature(ctx, {
    targets,
    claims,
    classes,
    provisioners,
    spaceRequests,
  });
  return {
    features: [
      environmentFeature,
      bindingFeature,
      promotionRunFeature,
      renderFeature,
      claimFeature,
      targetFeature,
      namespaceTokens,
      ...extraFeatures,
    ],
    promotionRuns: promotionRunFeature,
    renders: renderFeature,
    environments: environmentFeature,
    bindings: bindingFeature,
    claims: claimFeature,
    targets: targetFeature,
    namespaceTokens,
  };
}
