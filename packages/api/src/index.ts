/**
 * @gitops/api: the user-facing API of the GitOps Service (group managed-gitops.redhat.com/v1alpha1).
 * The CRD YAML in ../crds is the source of truth; the types are generated from it; the names, condition
 * types, reasons and messages below are the contract (docs/api.md), kept from the original service.
 */
export {
  appStudioCrdDirectory,
  appStudioDependencyCrdDirectory,
  type CustomResourceDefinitionManifest,
  crdDirectory,
  loadCrds,
} from './crds.ts';
export * from './engine-instance.ts';
export { FieldManager } from './field-managers.ts';
export type { ObjectMeta, OwnerReference } from './object-meta.ts';
export * from './rhoas.ts';
export type * from './types.generated.ts';

import { describeKind } from './kind.ts';

export { controllerReference, describeKind, type KindDescriptor } from './kind.ts';

export const API_GROUP = 'managed-gitops.redhat.com';
export const API_VERSION = 'v1alpha1';
/** The `apiVersion` of every object of this API. */
export const API_GROUP_VERSION = `${API_GROUP}/${API_VERSION}` as const;

/** The kinds of this API. */
export const Kind = {
  GitOpsDeployment: 'GitOpsDeployment',
  GitOpsDeploymentSyncRun: 'GitOpsDeploymentSyncRun',
  GitOpsDeploymentManagedEnvironment: 'GitOpsDeploymentManagedEnvironment',
  GitOpsDeploymentRepositoryCredential: 'GitOpsDeploymentRepositoryCredential',
  Operation: 'Operation',
  GitOpsEngineInstance: 'GitOpsEngineInstance',
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];

/** The resource (plural) name of each kind, as used in API paths. */
export const Plural = {
  GitOpsDeployment: 'gitopsdeployments',
  GitOpsDeploymentSyncRun: 'gitopsdeploymentsyncruns',
  GitOpsDeploymentManagedEnvironment: 'gitopsdeploymentmanagedenvironments',
  GitOpsDeploymentRepositoryCredential: 'gitopsdeploymentrepositorycredentials',
  Operation: 'operations',
  GitOpsEngineInstance: 'gitopsengineinstances',
} as const satisfies Record<Kind, string>;
export type Plural = (typeof Plural)[keyof typeof Plural];

const describeOwnKind = <K extends Kind>(kind: K) =>
  describeKind({ group: API_GROUP, version: API_VERSION, kind, plural: Plural[kind] });

/** The descriptor of each kind of this API (see kind.ts). */
export const Kinds = {
  GitOpsDeployment: describeOwnKind(Kind.GitOpsDeployment),
  GitOpsDeploymentSyncRun: describeOwnKind(Kind.GitOpsDeploymentSyncRun),
  GitOpsDeploymentManagedEnvironment: describeOwnKind(Kind.GitOpsDeploymentManagedEnvironment),
  GitOpsDeploymentRepositoryCredential: describeOwnKind(Kind.GitOpsDeploymentRepositoryCredential),
  Operation: describeOwnKind(Kind.Operation),
  GitOpsEngineInstance: describeKind({
    group: API_GROUP,
    version: API_VERSION,
    kind: Kind.GitOpsEngineInstance,
    plural: Plural.GitOpsEngineInstance,
    namespaced: false,
  }),
} as const satisfies Record<Kind, unknown>;

/**
 * Name of the Operation CR announcing operation row `operationId` (the backend creates it, the
 * cluster-agent reads and deletes it): `operation-<id>`.
 */
export function operationCrName(operationId: string): string {
  return `operation-${operationId}`;
}

/** `spec.type` of a GitOpsDeployment. */
export const GitOpsDeploymentType = {
  Automated: 'automated',
  Manual: 'manual',
} as const;
export type GitOpsDeploymentType = (typeof GitOpsDeploymentType)[keyof typeof GitOpsDeploymentType];

/** The only values accepted in a GitOpsDeployment's `spec.syncPolicy.syncOptions`. */
export const SyncOption = {
  CreateNamespaceTrue: 'CreateNamespace=true',
  CreateNamespaceFalse: 'CreateNamespace=false',
} as const;

/**
 * Every whole-application sync option of Argo CD a tenant may set in `spec.syncPolicy.syncOptions` (the CRD's
 * admission rule lists the same; `crds.test.ts` checks they agree). Options that reach outside the tenant's
 * destination do not exist at this level: the AppProject still decides what a sync may touch.
 */
export const SUPPORTED_SYNC_OPTIONS = [
  'CreateNamespace=true',
  'CreateNamespace=false',
  'ServerSideApply=true',
  'ServerSideApply=false',
  'PruneLast=true',
  'PruneLast=false',
  'ApplyOutOfSyncOnly=true',
  'ApplyOutOfSyncOnly=false',
  'PrunePropagationPolicy=foreground',
  'PrunePropagationPolicy=background',
  'PrunePropagationPolicy=orphan',
  'RespectIgnoreDifferences=true',
  'RespectIgnoreDifferences=false',
  'Replace=true',
  'Replace=false',
  'Validate=true',
  'Validate=false',
  'FailOnSharedResource=true',
  'FailOnSharedResource=false',
] as const;
export type SyncOption = (typeof SUPPORTED_SYNC_OPTIONS)[number];

/** `status.sync.status` of a GitOpsDeployment (and of each resource), as Argo CD reports it. */
export const SyncStatusCode = {
  Synced: 'Synced',
  OutOfSync: 'OutOfSync',
  Unknown: 'Unknown',
} as const;
export type SyncStatusCode = (typeof SyncStatusCode)[keyof typeof SyncStatusCode];

/** `status.health.status` of a GitOpsDeployment (and of each resource), as Argo CD reports it. */
export const HealthStatusCode = {
  Healthy: 'Healthy',
  Progressing: 'Progressing',
  Degraded: 'Degraded',
  Suspended: 'Suspended',
  Missing: 'Missing',
  Unknown: 'Unknown',
} as const;
export type HealthStatusCode = (typeof HealthStatusCode)[keyof typeof HealthStatusCode];

/** `status` of every condition. */
export const ConditionStatus = {
  True: 'True',
  False: 'False',
  Unknown: 'Unknown',
} as const;
export type ConditionStatus = (typeof ConditionStatus)[keyof typeof ConditionStatus];

// ---------------------------------------------------------------------------------------------------
// GitOpsDeployment and GitOpsDeploymentSyncRun conditions

/**
 * Condition types of GitOpsDeployment and GitOpsDeploymentSyncRun set by the backend. Argo CD's own
 * conditions (ComparisonError, SyncError, InvalidSpecError, ...) pass through onto a GitOpsDeployment
 * under their Argo CD type, with reason = type, and {@link resolvedReason} when Argo CD drops them.
 */
export const GitOpsDeploymentConditionType = {
  ErrorOccurred: 'ErrorOccurred',
  /** Argo CD's SyncError; a constant of the original API, one of the pass-through types. */
  SyncError: 'SyncError',
} as const;

/** Reasons of the ErrorOccurred condition of GitOpsDeployment and GitOpsDeploymentSyncRun. */
export const GitOpsDeploymentReason = {
  /** `True`: the last reconcile failed; the message says why. */
  ErrorOccurred: 'ErrorOccurred',
  /** `False` with message "": the next reconcile succeeded. */
  ErrorOccurredResolved: 'ErrorOccurredResolved',
  SyncError: 'SyncError',
} as const;

/** The reason of a condition that was True and no longer applies: `<type>Resolved`. */
export function resolvedReason(conditionType: string): string {
  return `${conditionType}Resolved`;
}

/** User-facing messages of the ErrorOccurred condition of a GitOpsDeployment (keep these texts). */
export const GitOpsDeploymentMessage = {
  /** For internal errors; the details go to the logs, never to the user. */
  UnknownError: 'an unknown error occurred',
  ManagedEnvironmentUnusable:
    'Unable to reconcile the ManagedEnvironment. Verify that the ManagedEnvironment and Secret are correctly defined, and have valid credentials',
  InvalidDestinationNamespace: 'the namespace specified in the destination field is invalid',
} as const;

/** Why a tenant's objects have no Argo CD instance (ErrorOccurred / condition messages; nothing is placed). */
export const PlacementMessage = {
  unknownInstance: (instance: string): string =>
    `the namespace label ${Label.EngineInstance} names the Argo CD instance '${instance}', which is not registered: no agent of that name has started`,
  instanceCordoned: (instance: string): string =>
    `the namespace label ${Label.EngineInstance} names the Argo CD instance '${instance}', which is cordoned and takes no new tenants`,
  noSchedulableInstance:
    'no Argo CD instance takes new tenants: every registered instance is cordoned (or none is registered)',
  instanceAway: (instance: string, minutes: number): string =>
    `no agent of the Argo CD instance '${instance}' has taken this change for ${minutes} minute${minutes === 1 ? '' : 's'}: it waits, and is applied when an agent of the instance is back`,
} as const;

/** Event reasons on GitOpsDeploymentRepositoryCredentials. */
export const RepositoryCredentialEventReason = {
  RepositoryCredentialCreated: 'RepositoryCredentialCreated',
  RepositoryCredentialUpdated: 'RepositoryCredentialUpdated',
  RepositoryCredentialDeleted: 'RepositoryCredentialDeleted',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

/** Event reasons on GitOpsDeployments (kubectl describe). */
export const DeploymentEventReason = {
  ApplicationDeleted: 'ApplicationDeleted',
  FinalizerRemoved: 'FinalizerRemoved',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

/** Event reasons on SyncRuns (kubectl describe). */
export const SyncRunEventReason = {
  SyncRequested: 'SyncRequested',
  /** status.phase became Running, Succeeded, Failed or Terminated (in this order below). */
  SyncStarted: 'SyncStarted',
  SyncSucceeded: 'SyncSucceeded',
  SyncFailed: 'SyncFailed',
  SyncTerminated: 'SyncTerminated',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

/** Event reasons of the status path (a sync's start and success are in the status only). */
export const SyncEventReason = {
  SyncFailed: 'SyncFailed',
} as const;

/** Event reasons on GitOpsDeploymentManagedEnvironments. */
export const ManagedEnvironmentEventReason = {
  ConnectionSucceeded: 'ConnectionInitializationSucceeded',
  ConnectionFailed: 'ConnectionInitializationFailed',
  EnvironmentUpdated: 'ManagedEnvironmentUpdated',
  ServiceAccountRemoved: 'ServiceAccountRemoved',
  ServiceAccountRemovalFailed: 'ServiceAccountRemovalFailed',
  AgentOperationFailed: 'AgentOperationFailed',
} as const;

/** Reasons of the Events on a tenant's namespace when its label asks for another engine instance. */
export const TenantMoveEventReason = {
  Moved: 'EngineInstanceChanged',
  MoveRefused: 'EngineInstanceChangeRefused',
} as const;

/** Messages of those Events. */
export const TenantMoveMessage = {
  moved: (from: string, to: string, applications: number): string =>
    `the tenant moves from the Argo CD instance '${from}' to '${to}' with ${applications} application${applications === 1 ? '' : 's'}; deployed resources stay in place and '${to}' takes them over`,
  targetUnknown: (instance: string, current: string): string =>
    `the namespace label ${Label.EngineInstance} names the Argo CD instance '${instance}', which is not registered: the tenant stays on '${current}'`,
  targetCordoned: (instance: string, current: string): string =>
    `the namespace label ${Label.EngineInstance} names the Argo CD instance '${instance}', which is cordoned and takes no new tenants: the tenant stays on '${current}'`,
} as const;

/** Condition types of a GitOpsDeploymentSyncRun (a single condition). */
export const SyncRunConditionType = {
  ErrorOccurred: 'ErrorOccurred',
} as const;

/** Reasons of a GitOpsDeploymentSyncRun's condition; success is ErrorOccurred/False with reason "". */
export const SyncRunReason = {
  ErrorOccurred: 'ErrorOccurred',
} as const;

/** User-facing messages of a GitOpsDeploymentSyncRun's ErrorOccurred condition (keep these texts). */
export const SyncRunMessage = {
  parentNotFound: (gitopsDeploymentName: string): string =>
    `Unable to retrieve GitOpsDeployment '${gitopsDeploymentName}' referenced by the GitOpsDeploymentSyncRun`,
  parentIsAutomated: (syncRunName: string): string =>
    `invalid GitOpsDeploymentSyncRun '${syncRunName}'. Syncing a GitOpsDeployment with Automated sync policy is not allowed`,
} as const;

// ---------------------------------------------------------------------------------------------------
// GitOpsDeploymentManagedEnvironment conditions (standard metav1.Condition)

export const ManagedEnvironmentConditionType = {
  ConnectionInitializationSucceeded: 'ConnectionInitializationSucceeded',
} as const;

/** Reasons of ConnectionInitializationSucceeded: `Succeeded` when True, any other when False/Unknown. */
export const ManagedEnvironmentReason = {
  Succeeded: 'Succeeded',
  InvalidSecretType: 'InvalidSecretType',
  MissingKubeConfigField: 'MissingKubeConfigField',
  UnableToParseKubeconfigData: 'UnableToParseKubeconfigData',
  UnableToLocateContext: 'UnableToLocateContext',
  UnableToCreateClient: 'UnableToCreateClient',
  UnableToInstallServiceAccount: 'UnableToInstallServiceAccount',
  UnableToValidateClusterCredentials: 'UnableToValidateClusterCredentials',
  SecretNotFound: 'SecretNotFound',
  InvalidNamespaceList: 'InvalidNamespaceList',
  UnsupportedAPIURL: 'UnsupportedAPIURL',
  /** The tenant cannot be placed on an engine instance (namespace label: unknown or cordoned instance). */
  NoEngineInstance: 'NoEngineInstance',
  /** Internal errors (details in the logs); the original service's reason for the same case. */
  UnknownError: 'UnknownError',
} as const;
export type ManagedEnvironmentReason =
  (typeof ManagedEnvironmentReason)[keyof typeof ManagedEnvironmentReason];

/** User-facing messages of ConnectionInitializationSucceeded (keep these texts). */
export const ManagedEnvironmentMessage = {
  invalidSecretType: (secretType: string): string => `invalid secret type: ${secretType}`,
  MissingKubeConfigField: 'missing kubeconfig field in Secret',
  unableToLocateContext: (apiURL: string): string =>
    `the kubeconfig did not have a cluster entry that matched the API URL '${apiURL}'`,
  Forbidden:
    'Provided service account does not have permission to access resources in the cluster. Verify that the service account has the correct Role and RoleBinding.',
} as const;

// ---------------------------------------------------------------------------------------------------
// GitOpsDeploymentRepositoryCredential conditions (standard metav1.Condition; three, in this order)

export const RepositoryCredentialConditionType = {
  ErrorOccurred: 'ErrorOccurred',
  ValidRepositoryURL: 'ValidRepositoryURL',
  ValidRepositoryCredential: 'ValidRepositoryCredential',
} as const;

/** The order in which a RepositoryCredential's three conditions are always written. */
export const repositoryCredentialConditionOrder = [
  RepositoryCredentialConditionType.ErrorOccurred,
  RepositoryCredentialConditionType.ValidRepositoryURL,
  RepositoryCredentialConditionType.ValidRepositoryCredential,
] as const;

/** Reasons of a RepositoryCredential's conditions (a failure reason is carried by all three). */
export const RepositoryCredentialReason = {
  /** ErrorOccurred False and ValidRepositoryCredential True. */
  RepositoryCredentialUpToDate: 'RepositoryCredentialUpToDate',
  /** ValidRepositoryURL True. */
  ValidRepositoryUrl: 'ValidRepositoryUrl',
  SecretNotSpecified: 'SecretNotSpecified',
  SecretNotFound: 'SecretNotFound',
  SecretInvalidType: 'SecretInvalidType',
  /** The repository does not exist (or cannot be reached). */
  InvalidRepositoryUrl: 'InvalidRepositoryUrl',
  /** The repository exists but the credentials were rejected; ValidRepositoryURL stays True. */
  InvalidCredentials: 'InvalidCredentials',
  /** The original service's reason for internal errors. */
  ErrorOccurred: 'ErrorOccurred',
} as const;
export type RepositoryCredentialReason =
  (typeof RepositoryCredentialReason)[keyof typeof RepositoryCredentialReason];

/** User-facing messages of a valid RepositoryCredential (keep these texts). */
export const RepositoryCredentialMessage = {
  Valid: 'RepositoryCredentials are Valid',
  repositoryExists: (repository: string): string => `Repository ${repository} exists`,
} as const;

// ---------------------------------------------------------------------------------------------------
// Secrets, labels, annotations and finalizers

/** `type` of the user Secrets our CRs reference. */
export const SecretType = {
  ManagedEnvironment: 'managed-gitops.redhat.com/managed-environment',
  RepositoryCredential: 'managed-gitops.redhat.com/repository-credential',
  /**
   * Kubernetes' default type (a Secret written without `type`): also accepted for a RepositoryCredential,
   * since the public API document shows its Secret without one.
   */
  Opaque: 'Opaque',
} as const;

/** Keys in those Secrets. */
export const SecretKey = {
  /** ManagedEnvironment Secret: a standard kubeconfig. */
  Kubeconfig: 'kubeconfig',
  /** RepositoryCredential Secret: username/password, or sshPrivateKey. */
  Username: 'username',
  Password: 'password',
  SshPrivateKey: 'sshPrivateKey',
} as const;

export const Label = {
  /** On every Argo CD object we own: the id of the database row it was produced from. */
  DatabaseId: 'managed-gitops.redhat.com/database-id',
  /**
   * On an Operation CR: its operation id, so the agent deletes the CRs of many finished operations with one
   * DELETECOLLECTION request (label selector `in (...)`).
   */
  OperationId: 'managed-gitops.redhat.com/operation-id',
  /**
   * On a tenant's namespace: the engine instance (Argo CD) its objects go to, by name. Read when the tenant is
   * first placed; changing it later moves the tenant there (removing it moves nothing).
   */
  EngineInstance: 'managed-gitops.redhat.com/engine-instance',
  /** Argo CD's label that marks a Secret as a cluster or repository Secret (values: {@link ArgoCDSecretType}). */
  ArgoCDSecretType: 'argocd.argoproj.io/secret-type',
  /**
   * Which backend shard serves an object (`GITOPS_BACKEND_SHARD`); objects without it are served by backends
   * without a shard. Stamped on every object the backend and App Studio generate.
   */
  BackendShard: 'managed-gitops.redhat.com/backend-shard',
} as const;

/**
 * The labels of what the service makes for itself outside Argo CD: ServiceAccounts and their RBAC, the
 * agent's key Secret.
 */
export const MANAGED_BY_LABELS = { 'app.kubernetes.io/managed-by': 'gitops-service' } as const;

/** Values of the `argocd.argoproj.io/secret-type` label. */
export const ArgoCDSecretType = {
  Cluster: 'cluster',
  Repository: 'repository',
} as const;

export const Annotation = {
  /** Setting it on an Application makes Argo CD refresh it ("normal" or "hard"). */
  ArgoCDRefresh: 'argocd.argoproj.io/refresh',
} as const;

export const Finalizer = {
  /** Optional user finalizer on a GitOpsDeployment: keep it until Argo CD has deleted every deployed resource. */
  GitOpsDeploymentResources: 'resources-finalizer.managed-gitops.redhat.com',
  /** Argo CD's cascading-delete finalizer, set on an Application before deleting it. */
  ArgoCDResources: 'resources-finalizer.argocd.argoproj.io',
} as const;

// ---------------------------------------------------------------------------------------------------
// The App Studio environment API (appstudio.redhat.com)

/**
 * The App Studio kinds' generated types, as `AppStudio.Environment`, `AppStudio.Application`, ...: in a
 * namespace, because `Application` and `Component` here are App Studio's, not Argo CD's or ours.
 */
export type * as AppStudio from './appstudio.generated.ts';
export * from './appstudio.ts';
