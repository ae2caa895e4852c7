/**
 * The Argo CD settings the agent depends on, checked once at start and reported (log line + metric), never
 * changed: the agent does not own Argo CD's configuration.
 *
 * Per-resource health: Argo CD 3.x keeps each resource's health out of the Application object (in its
 * cache, `status.resourceHealthSource: appTree`) unless its application controller persists it
 * (`controller.resource.health.persist: "true"` in `argocd-cmd-params-cm`, which Argo CD's manifests pass
 * to the controller as ARGOCD_APPLICATION_CONTROLLER_PERSIST_RESOURCE_HEALTH). Without it no GitOpsDeployment
 * shows `health` in `status.resources`.
 */
import { getObject, getOrCreateGauge, type KubeConfig, type Logger, type Registry } from '@gitops/shared';

export const ARGOCD_CMD_PARAMS_CONFIGMAP = 'argocd-cmd-params-cm';
export const PERSIST_RESOURCE_HEALTH_KEY = 'controller.resource.health.persist';

export type ResourceHealthSetting = 'persisted' | 'not-persisted' | 'unreadable';

/** Reads the setting, logs what it means when it is not as required, and sets the gauge (1 persisted, else 0). */
export async function checkResourceHealthPersisted(
  kc: KubeConfig,
  namespace: string,
  options: { logger: Logger; registry: Registry; signal?: AbortSignal },
): Promise<ResourceHealthSetting> {
  const gauge = getOrCreateGauge(options.registry, {
    name: 'gitops_argocd_resource_health_persisted',
    labelNames: [],
    help: `1 when Argo CD persists resource health in Applications (${ARGOCD_CMD_PARAMS_CONFIGMAP} ${PERSIST_RESOURCE_HEALTH_KEY}: "true"), else 0`,
  });
  let setting: ResourceHealthSetting;
  try {
    const configMap = await getObject(kc, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: ARGOCD_CMD_PARAMS_CONFIGMAP,
      namespace,
    });
    const data = (configMap as { data?: Record<string, unknown> } | undefined)?.data;
    setting =
      String(data?.[PERSIST_RESOURCE_HEALTH_KEY] ?? '').trim() === 'true' ? 'persisted' : 'not-persisted';
  } catch (err) {
    options.logger.warn(
      { err, namespace, configMap: ARGOCD_CMD_PARAMS_CONFIGMAP },
      'cannot read the Argo CD command parameters; per-resource health may be missing from status.resources',
    );
    setting = 'unreadable';
  }
  gauge.set(setting === 'persisted' ? 1 : 0);
  if (setting === 'not-persisted') {
    options.logger.warn(
      { namespace, configMap: ARGOCD_CMD_PARAMS_CONFIGMAP, key: PERSIST_RESOURCE_HEALTH_KEY },
      `Argo CD does not persist resource health in Applications: set ${PERSIST_RESOURCE_HEALTH_KEY}: "true" in ${ARGOCD_CMD_PARAMS_CONFIGMAP} (namespace ${namespace}) and restart its application controller, or status.resources of GitOpsDeployments carries no health`,
    );
  }
  return setting;
}
