/**
 * The backend's configuration: environment variables of docs/contracts/core-pipeline.md, loaded with the
 * shared config helpers (defaults, bounds, every bad variable reported at once).
 */
import { Label } from '@gitops/api';
import { type EncryptionKeys, encryptionKeysVar, parseEncryptionKeys } from '@gitops/db';
import {
  argoCdNamespaceVar,
  boolVar,
  ConfigError,
  type ConfigOf,
  commonConfig,
  databasePreparedStatementsVar,
  databaseSessionAddressVar,
  databaseUrlVar,
  durationVar,
  engineInstanceNameVar,
  formatDuration,
  intVar,
  loadConfig,
  stringVar,
} from '@gitops/shared';

/** `GITOPS_ENCRYPTION_KEYS`: parsed by the one definition both processes share (@gitops/db). */
export { type EncryptionKeys, parseEncryptionKeys };

/** Label that assigns a GitOpsDeployment to one backend shard (see {@link shardSelector}). */
export const BACKEND_SHARD_LABEL = Label.BackendShard;

/**
 * The GitOpsDeployments a backend serves: with `GITOPS_BACKEND_SHARD=x` only those labelled
 * `managed-gitops.redhat.com/backend-shard: x`; without it only those without that label. So sharded
 * backends (and tests, which shard per test file) never serve each other's objects, and an unsharded
 * installation serves everything users create.
 */
export function shardSelector(shard: string | undefined): string {
  return shard ? `${BACKEND_SHARD_LABEL}=${shard}` : `!${BACKEND_SHARD_LABEL}`;
}

export const backendConfigSchema = {
  logLevel: commonConfig.logLevel,
  httpHost: commonConfig.httpHost,
  httpPort: commonConfig.httpPort,
  kubeconfigPath: commonConfig.kubeconfigPath,
  shutdownTimeoutMs: commonConfig.shutdownTimeoutMs,
  // Higher than the common 4: under a burst of creates, more reconciles in flight let PostgreSQL, etcd and the
  // agent's writes share round trips (docs/performance.md, "Fourth round"): +15 % throughput, -12 % CPU per
  // deployment at 1,000.
  maxConcurrentReconciles: intVar('GITOPS_MAX_CONCURRENT_RECONCILES', {
    default: 16,
    min: 1,
    max: 256,
    description: 'concurrent reconciles per controller',
  }),
  databaseUrl: databaseUrlVar,
  databaseSessionAddress: databaseSessionAddressVar,
  databasePreparedStatements: databasePreparedStatementsVar,
  argoCdNamespace: argoCdNamespaceVar(
    'the Argo CD namespace of the engine instance (Operation CRs go there)',
  ),
  engineInstanceName: engineInstanceNameVar('stable engine_instance identity (row engine_instance.name)'),
  encryptionKeys: encryptionKeysVar('GITOPS_ENCRYPTION_KEYS'),
  resyncIntervalMs: durationVar('RESYNC_INTERVAL', {
    default: '10m',
    min: '1s',
    max: '24h',
    description: 'slow jittered safety-net resync of every GitOpsDeployment and of orphaned rows',
  }),
  relayEnabled: boolVar('GITOPS_RELAY_ENABLED', {
    default: true,
    description: 'false = never create Operation CRs (reproduces a crash between commit and CR)',
  }),
  relaySweepIntervalMs: durationVar('GITOPS_RELAY_SWEEP_INTERVAL', {
    default: '5s',
    min: '100ms',
    max: '10m',
    description: 'safety-net sweep of undelivered operations (NOTIFY wakes the relay at once)',
  }),
  engineInstanceAwayAfterMs: durationVar('GITOPS_ENGINE_INSTANCE_AWAY_AFTER', {
    default: '2m',
    min: '1s',
    max: '24h',
    description:
      "how long a GitOpsDeployment's change may wait for its engine instance while no agent of it listens before ErrorOccurred says the instance is away",
  }),
  tenantClusterApiUrl: stringVar('GITOPS_TENANT_CLUSTER_API_URL', {
    default: '',
    maxLength: 2048,
    pattern: /^(https:\/\/\S+)?$/,
    description:
      "how an Argo CD on another cluster reaches this cluster's API server, for tenants placed on its engine instance (a namespace-scoped token); empty = the URL the backend uses (in a Pod that is https://kubernetes.default.svc, which no other cluster can reach: set it there)",
  }),
  tenantClusterCaFile: stringVar('GITOPS_TENANT_CLUSTER_CA_FILE', {
    default: '',
    maxLength: 4096,
    description:
      "PEM file of that API server's CA; empty = the CA of the backend's own kubeconfig (in a Pod: the service account CA)",
  }),
  workspaceTokenRenewAfterMs: durationVar('GITOPS_WORKSPACE_TOKEN_RENEW_AFTER', {
    default: '720h',
    min: '1s',
    max: '4380h',
    description:
      'age after which the token of a tenant on an instance of another cluster is renewed (it is asked for a year; the API server may cap it lower: keep this below that cap)',
  }),
  // Off by default: measured at 200 (docs/performance.md, "On top of Argo CD alone"), 300 ms saved 0.4–0.7 of
  // 5.5–5.9 status writes per change (Argo CD's states come seconds apart) while the status lag's p99 grew.
  statusCoalesceMs: durationVar('GITOPS_STATUS_COALESCE_WINDOW', {
    default: '0ms',
    min: '0ms',
    max: '10s',
    description:
      "how long a GitOpsDeployment's status write waits after the first change Argo CD reports, so the states Argo CD passes through meanwhile become one write (0: write each at once)",
  }),
  engineInstanceStatusIntervalMs: durationVar('GITOPS_ENGINE_INSTANCE_STATUS_INTERVAL', {
    default: '15s',
    min: '1s',
    max: '10m',
    description:
      'how often the backend reads every engine instance (one query) to keep the GitOpsEngineInstance objects current (agents come and go without a notification)',
  }),
  operationRetryMs: durationVar('GITOPS_OPERATION_RETRY_INTERVAL', {
    default: '1m',
    min: '1s',
    max: '24h',
    description:
      'after the agent gave up on an operation, how long after the failure it is announced again (an Application delete the user finalizer waits for, a ManagedEnvironment)',
  }),
  backendShard: stringVar('GITOPS_BACKEND_SHARD', {
    default: '',
    maxLength: 63,
    pattern: /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/,
    description: `serve only GitOpsDeployments labelled ${BACKEND_SHARD_LABEL}=<value>; unset = those without the label`,
  }),
  appStudioEnabled: boolVar('GITOPS_APPSTUDIO', {
    default: true,
    description:
      'run the App Studio environment API controllers (Environment, SnapshotEnvironmentBinding, PromotionRun; packages/appstudio)',
  }),
  promotionTimeoutMs: durationVar('GITOPS_PROMOTION_TIMEOUT', {
    default: '10m',
    min: '10s',
    max: '24h',
    description:
      'how long a PromotionRun waits (for a binding, for its deployments) before it ends in Failure',
  }),
  renderGitTimeoutMs: durationVar('GITOPS_RENDER_GIT_TIMEOUT', {
    default: '2m',
    min: '10s',
    max: '30m',
    description:
      'the limit of one git command (fetch, push) of the GitOps repository render; past it the repository counts as unreachable and is tried again with backoff. A slow server fetching the whole history of a large repository must fit',
  }),
  sshKnownHostsFile: stringVar('GITOPS_SSH_KNOWN_HOSTS_FILE', {
    default: '',
    maxLength: 4096,
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
    pattern: /^[^\u0000-\u001f\u007f]*$/,
    description:
      'an OpenSSH known_hosts file (e.g. the ssh_known_hosts key of argocd-ssh-known-hosts-cm, mounted) that the SSH host keys of the GitOps repositories the service renders must match (StrictHostKeyChecking=yes; read at every connection); empty: a host key is accepted on first use, with a warning at start',
  }),
  appStudioDevSandbox: boolVar('GITOPS_APPSTUDIO_DEVSANDBOX', {
    default: false,
    description:
      'run the appstudio.redhat.com/devsandbox provisioner (needs the SpaceRequest CRD: the Dev Sandbox host operator, or manifests/components/devsandbox-dependencies)',
  }),
  devSandboxInsecure: boolVar('DEV_ONLY_IGNORE_SELFSIGNED_CERT_IN_DEPLOYMENT_TARGET', {
    default: false,
    description: 'DeploymentTargets made from SpaceRequests skip TLS verification (development only)',
  }),
  namespaceProvisionerApiUrl: stringVar('GITOPS_NAMESPACE_PROVISIONER_API_URL', {
    default: '',
    maxLength: 2048,
    pattern: /^(https?:\/\/\S+)?$/,
    description:
      'API server URL in the kubeconfigs of the managed-gitops.redhat.com/namespace provisioner; empty = the one the backend uses (in a Pod: https://kubernetes.default.svc)',
  }),
  namespaceProvisionerCaFile: stringVar('GITOPS_NAMESPACE_PROVISIONER_CA_FILE', {
    default: '',
    maxLength: 4096,
    description:
      "PEM file of that API server's CA; empty = the one the backend uses (in a Pod: the service account CA)",
  }),
  namespaceProvisionerTokenLifetimeMs: durationVar('GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME', {
    default: '8760h',
    min: '10m',
    max: '8760h',
    description:
      "how long the ServiceAccount token in a namespace-provisioned DeploymentTarget's kubeconfig is asked for (the API server may cap it: --service-account-max-token-expiration)",
  }),
  namespaceProvisionerTokenRenewBeforeMs: durationVar('GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE', {
    default: '720h',
    min: '1m',
    max: '8760h',
    description:
      'such a token expiring within this long (or whose expiry cannot be read) is renewed in its Secret; shorter than GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME',
  }),
  namespaceProvisionerTokenCheckIntervalMs: durationVar('GITOPS_NAMESPACE_PROVISIONER_TOKEN_CHECK_INTERVAL', {
    default: '1h',
    min: '1s',
    max: '24h',
    description: 'how often those tokens are looked at (also at start), from the informer caches',
  }),
} as const;

export type BackendConfig = ConfigOf<typeof backendConfigSchema>;

/** Reads and validates the backend's configuration. @throws ConfigError listing every bad variable. */
export function loadBackendConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
): BackendConfig {
  const config = loadConfig(backendConfigSchema, env);
  // Variables that must fit together (each alone is valid). @gitops/appstudio checks the same (tokenTimesProblem).
  const lifetime = config.namespaceProvisionerTokenLifetimeMs;
  const renewBefore = config.namespaceProvisionerTokenRenewBeforeMs;
  if (renewBefore >= lifetime)
    throw new ConfigError([
      {
        name: 'GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE',
        message: `GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE (${formatDuration(renewBefore)}) must be shorter than GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME (${formatDuration(lifetime)}), or every token would be renewed at every check`,
      },
    ]);
  return config;
}
