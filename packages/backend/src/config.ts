/**
 * The backend's configuration: environment variables of docs/contracts/core-pipeline.md, loaded with the
 * shared config helpers (defaults, bounds, every bad variable reported at once).
 */
import type { SealingKey } from '@gitops/db';
import {
  boolVar,
  type ConfigOf,
  commonConfig,
  databaseUrlVar,
  durationVar,
  type EnvVar,
  loadConfig,
  stringVar,
} from '@gitops/shared';
import { z } from 'zod';

/** DNS-1123 label: namespace names. */
const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** `id=<base64 32 bytes>[,id2=...]`; the first key is the active one. */
export interface EncryptionKeys {
  keys: SealingKey[];
  activeKeyId: string;
}

/** Parses `GITOPS_ENCRYPTION_KEYS`; returns an error reason that never contains key material. */
export function parseEncryptionKeys(raw: string): { value: EncryptionKeys } | { error: string } {
  const keys: SealingKey[] = [];
  for (const [index, entry] of raw.split(',').entries()) {
    const trimmed = entry.trim();
    const equals = trimmed.indexOf('=');
    if (equals <= 0) return { error: `entry ${index + 1} must look like id=<base64 of 32 bytes>` };
    const id = trimmed.slice(0, equals);
    const key = Buffer.from(trimmed.slice(equals + 1), 'base64');
    if (key.length !== 32) return { error: `key ${JSON.stringify(id)} must be 32 bytes, base64 encoded` };
    if (keys.some((k) => k.id === id)) return { error: `key id ${JSON.stringify(id)} is given twice` };
    keys.push({ id, key });
  }
  const first = keys[0];
  if (!first) return { error: 'is required' };
  return { value: { keys, activeKeyId: first.id } };
}

function encryptionKeysVar(name: string): EnvVar<EncryptionKeys> {
  const schema = z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const result = raw === undefined ? { error: 'is required' } : parseEncryptionKeys(raw);
      if ('error' in result) {
        ctx.addIssue({ code: 'custom', message: result.error });
        return z.NEVER;
      }
      return result.value;
    });
  return {
    name,
    schema,
    secret: true,
    description: 'sealing keys id=<base64 32 bytes>[,id2=...]; the first is active',
  };
}

/** Label that assigns a GitOpsDeployment to one backend shard (see {@link shardSelector}). */
export const BACKEND_SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';

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
  maxConcurrentReconciles: commonConfig.maxConcurrentReconciles,
  databaseUrl: databaseUrlVar,
  argoCdNamespace: stringVar('ARGOCD_NAMESPACE', {
    default: 'gitops-service-argocd',
    maxLength: 63,
    pattern: dns1123Label,
    description: 'the Argo CD namespace of the engine instance (Operation CRs go there)',
  }),
  engineInstanceName: stringVar('ENGINE_INSTANCE_NAME', {
    default: 'default',
    maxLength: 253,
    pattern: /^\S+$/,
    description: 'stable engine_instance identity (row engine_instance.name)',
  }),
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
} as const;

export type BackendConfig = ConfigOf<typeof backendConfigSchema>;

/** Reads and validates the backend's configuration. @throws ConfigError listing every bad variable. */
export function loadBackendConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
): BackendConfig {
  return loadConfig(backendConfigSchema, env);
}
