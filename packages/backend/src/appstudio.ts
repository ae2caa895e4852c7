/**
 * The App Studio environment API (packages/appstudio) inside the backend (GITOPS_APPSTUDIO, default on):
 * Kubernetes objects only, on the backend's shard, sharing its GitOpsDeployment and ManagedEnvironment caches
 * (one watch of each, not two). Its start step checks that the App Studio CRDs are installed. After the render
 * pushed a commit, the applications that follow the branch are refreshed through the database
 * (gitops-deployment/application-refresh.ts): the one thing it writes there.
 */
import { readFileSync } from 'node:fs';
import { createAppStudioFeatures, requireAppStudioApi } from '@gitops/appstudio';
import { createEventRecorder, type Feature, type Informer, type StartStep } from '@gitops/shared';
import type { BackendContext } from './backend-feature.ts';
import { BACKEND_SHARD_LABEL } from './config.ts';
import { refreshApplicationsOfBranch } from './gitops-deployment/application-refresh.ts';
import type { GitOpsDeploymentObject, ManagedEnvironmentObject } from './kinds.ts';

export function createAppStudio(
  ctx: BackendContext,
  shared: {
    deployments: Informer<GitOpsDeploymentObject>;
    managedEnvironments: Informer<ManagedEnvironmentObject>;
  },
): { steps: StartStep[]; features: readonly Feature[] } {
  const { config, kc, logger } = ctx;
  if (!config.appStudioEnabled) return { steps: [], features: [] };
  const appStudio = createAppStudioFeatures({
    kc,
    registry: ctx.registry,
    logger: logger.child({ component: 'appstudio' }),
    events: createEventRecorder(kc, { component: 'gitops-appstudio', logger }),
    labelSelector: ctx.selector.text,
    shardLabels: config.backendShard ? { [BACKEND_SHARD_LABEL]: config.backendShard } : {},
    sharedInformers: {
      GitOpsDeployment: shared.deployments,
      GitOpsDeploymentManagedEnvironment: shared.managedEnvironments,
    },
    resyncIntervalMs: config.resyncIntervalMs,
    concurrency: config.maxConcurrentReconciles,
    promotionTimeoutMs: config.promotionTimeoutMs,
    renderGitTimeoutMs: config.renderGitTimeoutMs,
    sshKnownHostsFile: config.sshKnownHostsFile,
    onPushed: async (push) => {
      const refreshed = await refreshApplicationsOfBranch(ctx.db, push);
      logger.debug(
        { commit: push.commit, refreshed },
        'Argo CD asked to refresh the applications of a pushed branch',
      );
    },
    devSandbox: config.appStudioDevSandbox,
    devSandboxInsecure: config.devSandboxInsecure,
    namespaceProvisioner: {
      apiURL: config.namespaceProvisionerApiUrl || undefined,
      caPem: config.namespaceProvisionerCaFile
        ? readFileSync(config.namespaceProvisionerCaFile, 'utf8')
        : undefined,
      tokenLifetimeMs: config.namespaceProvisionerTokenLifetimeMs,
      tokenRenewBeforeMs: config.namespaceProvisionerTokenRenewBeforeMs,
      tokenCheckIntervalMs: config.namespaceProvisionerTokenCheckIntervalMs,
    },
  });
  return {
    steps: [
      {
        what: 'App Studio API check',
        run: () => requireAppStudioApi(kc, { devSandbox: config.appStudioDevSandbox }),
      },
    ],
    features: appStudio.features,
  };
}
