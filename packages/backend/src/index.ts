/** @gitops/backend: buildBackend for tests and the e2e fixture; main.ts is the process. */
export { type Backend, type BuildBackendOptions, buildBackend } from './app.ts';
export {
  BACKEND_SHARD_LABEL,
  type BackendConfig,
  backendConfigSchema,
  loadBackendConfig,
  parseEncryptionKeys,
  shardSelector,
} from './config.ts';
export {
  desiredApplicationSpec,
  parseGitOpsDeploymentSpec,
} from './gitops-deployment/desired-application.ts';
export { operationCr, operationCrName } from './relay/operation-relay.ts';
export { RESOURCES_LIMIT, RESOURCES_TRUNCATED_CONDITION } from './status/deployment-status.ts';
