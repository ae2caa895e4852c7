/**
 * The namespace provisioner's ServiceAccount tokens and kubeconfigs (namespace.provisioner.ts provisions,
 * namespace-token-renewal.ts renews): the token times and their check, the kubeconfig written into a
 * target's Secret, the TokenRequest, reading a token back, and the expiry metric.
 */
import { DeploymentTargetAnnotation, Provisioner as ProvisionerName } from '@gitops/api';
import {
  addGaugeCollector,
  formatDuration,
  type KubeConfig,
  type KubeObject,
  type Registry,
  requestServiceAccountToken,
} from '@gitops/shared';
import { annotationOf, credentialsOf, type TargetCr } from '../target-matching.ts';

export const DEPLOYER_SERVICE_ACCOUNT = 'gitops-deployer';
/** GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME / _TOKEN_RENEW_BEFORE / _TOKEN_CHECK_INTERVAL defaults. */
export const DEFAULT_TOKEN_LIFETIME_MS = 8760 * 3_600_000;
export const DEFAULT_TOKEN_RENEW_BEFORE_MS = 720 * 3_600_000;
export const DEFAULT_TOKEN_CHECK_INTERVAL_MS = 3_600_000;
/** The least a TokenRequest may ask for (the API server refuses less). */
export const MIN_TOKEN_LIFETIME_MS = 600_000;
export interface NamespaceProvisionerOptions {
  /** The API server URL the kubeconfig names (default: the service's own). */
  apiURL?: string;
  /** PEM of the API server's CA (default: the service's own; none = the system's roots). */
  caPem?: string;
  /** How long the ServiceAccount token is asked for (default 8760h; at least 10 min). */
  tokenLifetimeMs?: number;
  /** A token expiring within this long is renewed (default 720h; shorter than the lifetime). */
  tokenRenewBeforeMs?: number;
  /** How often the tokens are looked at (default 1h). */
  tokenCheckIntervalMs?: number;
}

/**
 * What is wrong with the token times of `options` (each a sentence naming the variable), or nothing. The
 * backend's config loader reports the same at start (GITOPS_NAMESPACE_PROVISIONER_TOKEN_*).
 */
export function tokenTimesProblem(options: NamespaceProvisionerOptions): string | undefined {
  const lifetime = options.tokenLifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS;
  const renewBefore = options.tokenRenewBeforeMs ?? DEFAULT_TOKEN_RENEW_BEFORE_MS;
  const interval = options.tokenCheckIntervalMs ?? DEFAULT_TOKEN_CHECK_INTERVAL_MS;
  if (!(lifetime >= MIN_TOKEN_LIFETIME_MS))
    return `GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME must be at least 10m (a TokenRequest asks for 600 s or more)`;
  if (!(renewBefore > 0 && renewBefore < lifetime))
    return `GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE (${formatDuration(renewBefore)}) must be shorter than GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME (${formatDuration(lifetime)}), or every token would be renewed at every check`;
  if (!(interval > 0)) return 'GITOPS_NAMESPACE_PROVISIONER_TOKEN_CHECK_INTERVAL must be positive';
  return undefined;
}

/** The kubeconfig (JSON) of a provisioned namespace's ServiceAccount token: provisioning and renewal write it. */
export function deployerKubeconfig(
  cluster: { apiURL: string; caPem?: string },
  namespace: string,
  token: string,
): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'target',
        cluster: {
          server: cluster.apiURL,
          ...(cluster.caPem
            ? { 'certificate-authority-data': Buffer.from(cluster.caPem).toString('base64') }
            : {}),
        },
      },
    ],
    users: [{ name: DEPLOYER_SERVICE_ACCOUNT, user: { token } }],
    contexts: [{ name: 'target', context: { cluster: 'target', user: DEPLOYER_SERVICE_ACCOUNT, namespace } }],
    'current-context': 'target',
  });
}

/** A TokenRequest for the `gitops-deployer` ServiceAccount of `namespace`, asked for `lifetimeMs`. */
export async function requestDeployerToken(
  kc: KubeConfig,
  namespace: string,
  lifetimeMs: number,
  signal?: AbortSignal,
): Promise<string> {
  return await requestServiceAccountToken(
    kc,
    { namespace, name: DEPLOYER_SERVICE_ACCOUNT },
    Math.round(lifetimeMs / 1000),
    signal,
  );
}

/** The token of the kubeconfig in a provisioned kubeconfig Secret (its `data`), or undefined. */
export function tokenOfKubeconfigSecret(secret: KubeObject | undefined): string | undefined {
  const data = (secret as { data?: Record<string, string> } | undefined)?.data?.kubeconfig;
  if (!data) return undefined;
  try {
    const token = (
      JSON.parse(Buffer.from(data, 'base64').toString()) as { users?: { user?: { token?: unknown } }[] }
    ).users?.[0]?.user?.token;
    return typeof token === 'string' ? token : undefined;
  } catch {
    return undefined;
  }
}

/** The API server URL and CA the provisioner's kubeconfigs name: configured, or the service's own. */
export function provisionedCluster(
  kc: KubeConfig,
  options: NamespaceProvisionerOptions,
): { apiURL: string; caPem?: string } {
  const own = ownCluster(kc);
  const caPem = options.caPem ?? own.caPem;
  return { apiURL: options.apiURL || own.apiURL, ...(caPem ? { caPem } : {}) };
}

/** The API server URL and CA of the service's own kubeconfig. */
export function ownCluster(kc: KubeConfig): { apiURL: string; caPem?: string } {
  const cluster = kc.getCurrentCluster();
  const caPem = cluster?.caData ? Buffer.from(cluster.caData, 'base64').toString() : undefined;
  return { apiURL: cluster?.server ?? 'https://kubernetes.default.svc', ...(caPem ? { caPem } : {}) };
}

/** The `exp` (seconds since the epoch) of a JWT, or undefined when it has none or is no JWT. */
export function jwtExpiry(token: string): number | undefined {
  try {
    const payload: unknown = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString());
    const exp = payload && typeof payload === 'object' ? (payload as { exp?: unknown }).exp : undefined;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `gitops_namespace_provisioner_token_expiry_timestamp_seconds{deployment_target_namespace, deployment_target}`:
 * when the token in the kubeconfig Secret of each DeploymentTarget this provisioner made expires (the JWT's
 * `exp`), computed from the informers' caches when /metrics is scraped, so it survives restarts and costs nothing
 * between scrapes. Not `namespace`: the Prometheus Operator gives every series of a ServiceMonitor's target the
 * label `namespace` (the Service's), which would rename ours to `exported_namespace`.
 */
export function registerProvisionedTokenExpiry(
  registry: Registry,
  caches: {
    targets: { list(): TargetCr[] };
    secrets: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  },
): void {
  addGaugeCollector(
    registry,
    {
      name: 'gitops_namespace_provisioner_token_expiry_timestamp_seconds',
      help: "Expiry time (Unix seconds) of the ServiceAccount token in each namespace-provisioned DeploymentTarget's kubeconfig Secret",
      labelNames: ['deployment_target_namespace', 'deployment_target'],
    },
    (gauge) => {
      gauge.reset();
      for (const target of caches.targets.list()) {
        if (annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) !== ProvisionerName.Namespace)
          continue;
        const { clusterCredentialsSecret } = credentialsOf(target);
        const token = tokenOfKubeconfigSecret(
          caches.secrets.get(target.metadata.namespace, clusterCredentialsSecret),
        );
        const exp = token === undefined ? undefined : jwtExpiry(token);
        if (exp !== undefined)
          gauge.set(
            {
              deployment_target_namespace: target.metadata.namespace ?? '',
              deployment_target: target.metadata.name,
            },
            exp,
          );
      }
    },
  );
}
