/**
 * The RHOAS operator's configuration. The base URLs keep the original operator's environment variable
 * names (CLOUD_SERVICES_API, CLOUD_SERVICES_SSO, MAS_AUTH_URL, MAS_AUTH_REALM) and defaults; the rest
 * follows the shared conventions (docs/CONVENTIONS.md).
 */
import { FieldManager } from '@gitops/api';
import {
  type ConfigOf,
  commonConfig,
  durationVar,
  loadConfig,
  optionalStringVar,
  stringVar,
  urlVar,
} from '@gitops/shared';

const httpUrl = { protocols: ['http:', 'https:'] as const };

export const rhoasOperatorConfigSchema = {
  logLevel: commonConfig.logLevel,
  httpHost: commonConfig.httpHost,
  httpPort: commonConfig.httpPort,
  kubeconfigPath: commonConfig.kubeconfigPath,
  shutdownTimeoutMs: commonConfig.shutdownTimeoutMs,
  resyncSeconds: commonConfig.resyncSeconds,
  maxConcurrentReconciles: commonConfig.maxConcurrentReconciles,
  apiUrl: urlVar('CLOUD_SERVICES_API', {
    ...httpUrl,
    default: 'https://api.openshift.com',
    description: 'base URL of the Kafka and Service Registry management APIs',
  }),
  ssoUrl: urlVar('CLOUD_SERVICES_SSO', {
    ...httpUrl,
    default: 'https://sso.redhat.com/auth/realms/redhat-external',
    description: 'SSO realm URL; the offline token is exchanged at <it>/protocol/openid-connect/token',
  }),
  masAuthUrl: urlVar('MAS_AUTH_URL', {
    ...httpUrl,
    default: 'https://identity.api.openshift.com/auth',
    description: 'builds the oauthTokenUrl of a ServiceRegistryConnection (with MAS_AUTH_REALM)',
  }),
  masAuthRealm: stringVar('MAS_AUTH_REALM', {
    default: 'rhoas',
    maxLength: 255,
    pattern: /^[^/\s?#]+$/,
    description: 'realm of the oauthTokenUrl of a ServiceRegistryConnection',
  }),
  requestTimeoutMs: durationVar('RHOAS_REQUEST_TIMEOUT', {
    default: '30s',
    min: '100ms',
    max: '5m',
    description: 'timeout of each call to the SSO and the management APIs (headers and body)',
  }),
  retryInitialMs: durationVar('RHOAS_RETRY_INITIAL', {
    default: '1s',
    min: '10ms',
    max: '1m',
    description: 'first delay before a transient failure (network, 5xx, 429) is retried; doubles each time',
  }),
  retryMaxMs: durationVar('RHOAS_RETRY_MAX', {
    default: '5m',
    min: '100ms',
    max: '1h',
    description: 'cap of the retry delay of transient failures',
  }),
  watchNamespace: optionalStringVar('RHOAS_WATCH_NAMESPACE', {
    description: 'serve only this namespace (default: every namespace)',
  }),
  fieldManager: stringVar('RHOAS_FIELD_MANAGER', {
    default: FieldManager.RhoasOperator,
    maxLength: 128,
    pattern: /^[a-z0-9-]+$/,
    description: 'field manager of its writes',
  }),
};

export type RhoasOperatorConfig = ConfigOf<typeof rhoasOperatorConfigSchema>;

export function loadRhoasOperatorConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
): RhoasOperatorConfig {
  return loadConfig(rhoasOperatorConfigSchema, env);
}

/** The SRC `oauthTokenUrl`: `<MAS_AUTH_URL>/realms/<MAS_AUTH_REALM>/protocol/openid-connect/token`. */
export function oauthTokenUrl(config: Pick<RhoasOperatorConfig, 'masAuthUrl' | 'masAuthRealm'>): string {
  return `${config.masAuthUrl.replace(/\/+$/, '')}/realms/${config.masAuthRealm}/protocol/openid-connect/token`;
}
