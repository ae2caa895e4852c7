/**
 * Builders for the core kinds, as a user would write them (`kubectl apply`): apiVersion, kind, name and the
 * given spec and metadata, nothing else. Tests that create these objects use them instead of writing the
 * envelope by hand. Tests of invalid objects pass their spec with a cast: the builders add nothing to it.
 */
import { API_GROUP_VERSION, Kind } from '../index.ts';
import type { ObjectMeta } from '../object-meta.ts';
import type {
  GitOpsDeployment,
  GitOpsDeploymentManagedEnvironment,
  GitOpsDeploymentManagedEnvironmentSpec,
  GitOpsDeploymentRepositoryCredential,
  GitOpsDeploymentRepositoryCredentialSpec,
  GitOpsDeploymentSpec,
  GitOpsDeploymentSyncRun,
  GitOpsDeploymentSyncRunSpec,
} from '../types.generated.ts';

/** Metadata besides the name (namespace, labels, finalizers...). */
export type Metadata = Omit<ObjectMeta, 'name'>;

/** An object of `kind` as a user writes it: the API group's version, the kind, the name with `metadata`, `spec`. */
function envelope<K extends Kind, S>(kind: K, name: string, spec: S, metadata: Metadata) {
  return { apiVersion: API_GROUP_VERSION, kind, metadata: { name, ...metadata }, spec };
}

export const gitOpsDeployment = (
  name: string,
  spec: GitOpsDeploymentSpec,
  metadata: Metadata = {},
): GitOpsDeployment => envelope(Kind.GitOpsDeployment, name, spec, metadata);

export const syncRun = (
  name: string,
  spec: GitOpsDeploymentSyncRunSpec,
  metadata: Metadata = {},
): GitOpsDeploymentSyncRun => envelope(Kind.GitOpsDeploymentSyncRun, name, spec, metadata);

/**
 * `allowInsecureSkipTLSVerify` is false unless the spec says otherwise (spelled out, as the API server's
 * default would fill it in; the CRD test shows that default on an object written without the field).
 */
export const managedEnvironment = (
  name: string,
  spec: Omit<GitOpsDeploymentManagedEnvironmentSpec, 'allowInsecureSkipTLSVerify'> &
    Partial<Pick<GitOpsDeploymentManagedEnvironmentSpec, 'allowInsecureSkipTLSVerify'>>,
  metadata: Metadata = {},
): GitOpsDeploymentManagedEnvironment =>
  envelope(
    Kind.GitOpsDeploymentManagedEnvironment,
    name,
    { allowInsecureSkipTLSVerify: false, ...spec },
    metadata,
  );

export const repositoryCredential = (
  name: string,
  spec: GitOpsDeploymentRepositoryCredentialSpec,
  metadata: Metadata = {},
): GitOpsDeploymentRepositoryCredential =>
  envelope(Kind.GitOpsDeploymentRepositoryCredential, name, spec, metadata);
