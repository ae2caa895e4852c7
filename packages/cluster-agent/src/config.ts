/**
 * The cluster-agent's configuration: every knob is an environment variable with a default and bounds,
 * validated once at start (docs/contracts/core-pipeline.md, "Configuration").
 */
import { type EncryptionKeys, encryptionKeysVar, optionalEncryptionKeysVar } from '@gitops/db';
import {
  argoCdNamespaceVar,
  type ConfigOf,
  commonConfig,
  databasePreparedStatementsVar,
  databaseSessionAddressVar,
  databaseUrlVar,
  durationVar,
  engineInstanceNameVar,
  intVar,
  loadConfig,
} from '@gitops/shared';

/**
 * `GITOPS_ENCRYPTION_KEYS` (the backend's parser, from @gitops/db). An agent with its own database role needs
 * none (it opens what is sealed for its instance with its own key); one with the backend's role (0.1.0) does.
 * Validated at start when set, so a bad deployment fails at once.
 */
export { type EncryptionKeys, encryptionKeysVar };

export const agentConfigSchema = {
  logLevel: commonConfig.logLevel,
  httpHost: commonConfig.httpHost,
  httpPort: intVar('HTTP_PORT', {
    default: 8081,
    min: 0,
    max: 65535,
    description: 'port of the /healthz, /readyz, /metrics server (0 = any free port)',
  }),
  kubeconfigPath: commonConfig.kubeconfigPath,
  shutdownTimeoutMs: commonConfig.shutdownTimeoutMs,
  databaseUrl: databaseUrlVar,
  databaseSessionAddress: databaseSessionAddressVar,
  databasePreparedStatements: databasePreparedStatementsVar,
  /**
   * Only for an agent with the backend's database role (the 0.1.0 way) or during the upgrade: an agent with its
   * own role opens what is sealed for its instance with its own key (docs/threat-model.md).
   */
  encryptionKeys: optionalEncryptionKeysVar(),
  argoCdNamespace: argoCdNamespaceVar(
    'the Argo CD namespace this agent serves (= engine instance namespace); must exist',
  ),
  engineInstanceName: engineInstanceNameVar('stable identity of the engine_instance row'),
  resyncIntervalMs: durationVar('RESYNC_INTERVAL', {
    default: '10m',
    min: '1s',
    max: '24h',
    description: 'period of the jittered drift resync (DB vs. Argo CD objects) and informer relists',
  }),
  statusProgressIntervalMs: durationVar('GITOPS_STATUS_PROGRESS_INTERVAL', {
    default: '5s',
    min: '0ms',
    max: '10m',
    description:
      "how often at most an Application's status is written to application_state (and so to its GitOpsDeployment) while Argo CD is on its way (a sync running, health Progressing, an automated Application OutOfSync after an earlier sync); a settled state is written at once (0: every such state at once)",
  }),
  // A create waits in Argo CD's queue before its first comparison and sync (about 20 s at 200 creates at once,
  // 110 s at 1,000: docs/performance.md); what it shows meanwhile (nothing compared, OutOfSync) is no news.
  statusQueuedIntervalMs: durationVar('GITOPS_STATUS_QUEUED_INTERVAL', {
    default: '30s',
    min: '0ms',
    max: '10m',
    description:
      "how often at most an Application's status is written to application_state (and so to its GitOpsDeployment) while Argo CD has not acted on it yet (nothing compared, or an automated Application OutOfSync Argo CD never synced); its first sync starts GITOPS_STATUS_PROGRESS_INTERVAL, a settled state is written at once (0: at once)",
  }),
  concurrency: intVar('GITOPS_MAX_CONCURRENT_RECONCILES', {
    default: 16,
    min: 1,
    max: 256,
    description: 'resources reconciled at once (operations + drift repair), and status writes at once',
  }),
  operationMaxAttempts: intVar('OPERATION_MAX_ATTEMPTS', {
    default: 10,
    min: 1,
    max: 1000,
    description: 'attempts of one operation before it is set Failed',
  }),
  operationRetryMaxMs: durationVar('OPERATION_RETRY_MAX_DELAY', {
    default: '5m',
    min: '100ms',
    max: '1h',
    description: 'cap of the exponential backoff between attempts of one operation (starts at 1s)',
  }),
  operationRetentionMs: durationVar('OPERATION_RETENTION', {
    default: '24h',
    min: '1s',
    max: '8760h',
    description: 'finished operation rows are deleted after this long',
  }),
  operationSweepIntervalMs: durationVar('OPERATION_SWEEP_INTERVAL', {
    default: '5s',
    min: '100ms',
    max: '10m',
    description:
      'safety-net sweep of Waiting rows whose Operation CR event was missed and of CRs of finished operations left behind',
  }),
  operationStaleAfterMs: durationVar('OPERATION_STALE_AFTER', {
    default: '2m',
    min: '1s',
    max: '24h',
    description:
      'an In_Progress row not held by this process for this long is retried (all of them at start: agent crashed)',
  }),
  // The deletion budget (docs/deletion-guard.md): within one window, an instance deletes with cascading at
  // most max(MIN, PERCENT % of its Applications), a tenant at most max(TENANT_MIN, TENANT_PERCENT %); a
  // delete beyond either is held until an operator confirms it or it is no longer wanted.
  deletionBudgetWindowMs: durationVar('GITOPS_DELETION_BUDGET_WINDOW', {
    default: '10m',
    min: '1s',
    max: '24h',
    description: 'the window over which the deletion budgets count Applications deleted with cascading',
  }),
  deletionBudgetPercent: intVar('GITOPS_DELETION_BUDGET_PERCENT', {
    default: 10,
    min: 0,
    max: 100,
    description: "share of the instance's Applications it may delete with cascading within one window",
  }),
  deletionBudgetMin: intVar('GITOPS_DELETION_BUDGET_MIN', {
    default: 50,
    min: 0,
    max: 1_000_000,
    description: 'Applications an instance may delete with cascading within one window, whatever its size',
  }),
  tenantDeletionBudgetPercent: intVar('GITOPS_TENANT_DELETION_BUDGET_PERCENT', {
    default: 50,
    min: 0,
    max: 100,
    description: "share of a tenant's Applications the instance may delete with cascading within one window",
  }),
  tenantDeletionBudgetMin: intVar('GITOPS_TENANT_DELETION_BUDGET_MIN', {
    default: 25,
    min: 0,
    max: 1_000_000,
    description:
      "Applications of one tenant deleted with cascading within one window, whatever the tenant's size",
  }),
} as const;

export type AgentConfig = ConfigOf<typeof agentConfigSchema>;

/** Reads and validates the agent's environment. @throws ConfigError listing every bad variable. */
export function loadAgentConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
): AgentConfig {
  return loadConfig(agentConfigSchema, env);
}
