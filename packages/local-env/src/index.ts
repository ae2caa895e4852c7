export {
  type ArgoCd,
  type ArgoCdOptions,
  argoCdBuildVersion,
  builtArgoCdBinary,
  endpointFromKubeconfig,
  ensureArgoCdBinary,
  prepareArgoCdNamespace,
  removeArgoCdWorkDir,
  startArgoCd,
} from './argocd.ts';
export {
  ARGOCD_MODULE,
  ARGOCD_VERSION,
  argoCdCrdFiles,
  argoCdModuleDir,
  ensureControlPlaneBinaries,
  ensureNodeBinaries,
} from './binaries.ts';
export {
  type CloudServicesApi,
  type CloudServicesRoute,
  type CloudServicesSeed,
  defaultSeedFile,
  type Fault,
  loadCloudServicesSeed,
  type RecordedRequest,
  type SeedKafka,
  type SeedRegistry,
  type ServiceAccountRecord,
  SSO_REALM_PATH,
  startCloudServicesApi,
  TOKEN_PATH,
} from './cloud-services.ts';
export {
  type ControlPlane,
  type ControlPlaneOptions,
  startControlPlane,
  TEST_USER,
} from './control-plane.ts';
export { crdDocuments, installCrds } from './crds.ts';
export { createGitRepo, type Files, GIT_ENV, type GitRepo, manifest } from './git-repo.ts';
export { type GitServer, startGitServer } from './git-server.ts';
export { type GitSshServer, generateSshKey, startGitSshServer } from './git-ssh-server.ts';
export { type HelmRepository, helmCommand, startHelmRepository } from './helm-repository.ts';
export { type KubeEndpoint, type KubeResponse, kubeRequest } from './kube-request.ts';
export {
  type Cluster,
  type ClusterOptions,
  type KubeNode,
  nodeSupport,
  startCluster,
} from './node.ts';
export { CLUSTER_API_PORT, NODE_GATEWAY, NODE_NAME, NODE_SUBNET, PAUSE_IMAGE } from './node-config.ts';
export { DOCKER_REGISTRY_BINARY, type OciRegistry, startOciRegistry } from './oci-registry.ts';
export { cacheDir, repoRoot } from './paths.ts';
export {
  findPgBouncerBinary,
  type PgBouncer,
  type PgBouncerOptions,
  type PgBouncerServer,
  startPgBouncer,
} from './pgbouncer.ts';
export { selfSignedCertificate } from './pki.ts';
export { freePort, hostAddress } from './ports.ts';
export { type PostgresOptions, type PostgresServer, startPostgres } from './postgres.ts';
export {
  type ManagedProcess,
  SERVICE_NODE_FLAGS,
  type StartOptions,
  startProcess,
  waitFor,
} from './process.ts';
export { startTcpProxy, type TcpProxy, type TcpProxyMode } from './tcp-proxy.ts';
