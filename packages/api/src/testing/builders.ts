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

export function gitOpsDeployment(
  name: string,
  spec: GitOpsDeploymentSpec,
  metadata: Metadata = {},
): GitOpsDeployment {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: Kind.GitOpsDeployment,
    metadata: { name, ...metadata },
    spec,
  };
}

export function syncRun(
  name: string,
  spec: GitOpsDeploymentSyncRunSpec,
  metadata: Metadata = {},
): GitOpsDeploymentSyncRun {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: Kind.GitOpsDeploymentSyncRun,
    metadata: { name, ...metadata },
    spec,
  };
}

/**
 * `allowInsecureSkipTLSVerify` is false unless the spec says otherwise (spelled out, as the API server's
 * default would fill it in; the CRD test shows that default on an object written without the field).
 */
export function managedEnvironment(
  name: string,
  spec: Omit<GitOpsDeploymentManagedEnvironmentSpec, 'allowInsecureSkipTLSVerify'> &
    Partial<Pick<GitOpsDeploymentManagedEnvironmentSpec, 'allowInsecureSkipTLSVerify'>>,
  metadata: Metadata = {},
): GitOpsDeploymentManagedEnvironment {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: Kind.GitOpsDeploymentManagedEnvironment,
    metadata: { name, ...metadata },
    spec: { allowInsecureSkipTLSVerify: false, ...spec },
  };
}

export function repositoryCredential(
  name: string,
  spec: GitOpsDeploymentRepositoryCredentialSpec,
  metadata: Metadata = {},
): GitOpsDeploymentRepositoryCredential {
  return {
    apiVersion: API_GROUP_VERSION,
    kind: Kind.GitOpsDeploymentRepositoryCredential,
    metadata: { name, ...metadata },
    spec,
  };
}
