/**
 * The App Studio environment API (group appstudio.redhat.com/v1alpha1): kinds, names, condition types,
 * reasons, messages, labels and annotations. The CRD YAML in ../crds/appstudio is the source of truth of
 * the schema; the texts below are the contract (docs/api.md, packages/appstudio/README.md), kept from the
 * original service so users' tools keep working.
 */
import { FieldManager } from './field-managers.ts';
import { describeKind } from './kind.ts';

export const APPSTUDIO_GROUP = 'appstudio.redhat.com';
export const APPSTUDIO_VERSION = 'v1alpha1';
/** The `apiVersion` of every object of this API. */
export const APPSTUDIO_GROUP_VERSION = `${APPSTUDIO_GROUP}/${APPSTUDIO_VERSION}` as const;

const appStudioKind = <K extends string>(kind: K, plural: string) =>
  describeKind({ group: APPSTUDIO_GROUP, version: APPSTUDIO_VERSION, kind, plural });

/** The descriptor of each App Studio kind (Application and Component are another service's; we read them). */
export const AppStudioKinds = {
  Environment: appStudioKind('Environment', 'environments'),
  Snapshot: appStudioKind('Snapshot', 'snapshots'),
  SnapshotEnvironmentBinding: appStudioKind('SnapshotEnvironmentBinding', 'snapshotenvironmentbindings'),
  PromotionRun: appStudioKind('PromotionRun', 'promotionruns'),
  Application: appStudioKind('Application', 'applications'),
  Component: appStudioKind('Component', 'components'),
  DeploymentTarget: appStudioKind('DeploymentTarget', 'deploymenttargets'),
  DeploymentTargetClaim: appStudioKind('DeploymentTargetClaim', 'deploymenttargetclaims'),
  DeploymentTargetClass: describeKind({
    group: APPSTUDIO_GROUP,
    version: APPSTUDIO_VERSION,
    kind: 'DeploymentTargetClass',
    plural: 'deploymenttargetclasses',
    namespaced: false,
  }),
  /** The Dev Sandbox host operator's kind (crds/devsandbox-dependencies for clusters without it). */
  SpaceRequest: describeKind({
    group: 'toolchain.dev.openshift.com',
    version: 'v1alpha1',
    kind: 'SpaceRequest',
    plural: 'spacerequests',
  }),
} as const;

/** Core kinds the App Studio controllers read or write. */
export const CoreKinds = {
  Secret: describeKind({ group: '', version: 'v1', kind: 'Secret', plural: 'secrets' }),
  Namespace: describeKind({
    group: '',
    version: 'v1',
    kind: 'Namespace',
    plural: 'namespaces',
    namespaced: false,
  }),
  ServiceAccount: describeKind({
    group: '',
    version: 'v1',
    kind: 'ServiceAccount',
    plural: 'serviceaccounts',
  }),
  RoleBinding: describeKind({
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    kind: 'RoleBinding',
    plural: 'rolebindings',
  }),
} as const;

/** `spec.deploymentStrategy` of an Environment. */
export const DeploymentStrategy = {
  Manual: 'Manual',
  AppStudioAutomated: 'AppStudioAutomated',
} as const;

/** `spec.unstableConfigurationFields.clusterType` of an Environment. */
export const ClusterType = {
  Kubernetes: 'Kubernetes',
  OpenShift: 'OpenShift',
} as const;

/** `status.phase` of a DeploymentTargetClaim. */
export const DeploymentTargetClaimPhase = {
  Pending: 'Pending',
  Bound: 'Bound',
  Lost: 'Lost',
} as const;

/** `status.phase` of a DeploymentTarget (`Pending` is defined but never set, as in the original). */
export const DeploymentTargetPhase = {
  Pending: 'Pending',
  Available: 'Available',
  Bound: 'Bound',
  Released: 'Released',
  Failed: 'Failed',
} as const;

/** `spec.reclaimPolicy` of a DeploymentTargetClass. */
export const ReclaimPolicy = {
  Delete: 'Delete',
  Retain: 'Retain',
} as const;

/** `spec.provisioner` values acted on. */
export const Provisioner = {
  /** A SpaceRequest for the Dev Sandbox host operator (the original's only provisioner). */
  DevSandbox: 'appstudio.redhat.com/devsandbox',
  /** Beyond the original (appstudio README promise 7): a namespace on the cluster the service runs in. */
  Namespace: 'managed-gitops.redhat.com/namespace',
} as const;

/** Annotations of claims and targets (values as the original wrote them). */
export const DeploymentTargetAnnotation = {
  /** On a claim, "true" once bound. */
  BindComplete: 'dt.appstudio.redhat.com/bind-complete',
  /** On a claim, "true" when the binder chose the target (auto-match or dynamic provisioning). */
  BoundByController: 'dt.appstudio.redhat.com/bound-by-controller',
  /** On a claim waiting for dynamic provisioning: the claim's class name (the original's value). */
  DTProvisioner: 'provisioner.appstudio.redhat.com/dt-provisioner',
  /** On a provisioned target: the provisioner that created it. */
  ProvisionedBy: 'provisioner.appstudio.redhat.com/provisioned-by',
  /**
   * Beyond the original: on a target the managed-gitops.redhat.com/namespace provisioner made, the uid of the
   * claim it was made for (reclaim compares it with the namespace's label once the claim is gone).
   */
  ProvisionedForClaimUid: 'managed-gitops.redhat.com/provisioned-for-claim-uid',
} as const;

/** Label of a provisioned target: the claim's dt-provisioner annotation. */
export const DT_PROVISIONER_LABEL = DeploymentTargetAnnotation.DTProvisioner;

export const DeploymentTargetFinalizer = {
  Claim: 'binder.appstudio.redhat.com/finalizer',
  Target: 'dt.appstudio.redhat.com/finalizer',
  /** The host operator's finalizer on a SpaceRequest (the reclaimer adds it before deleting one). */
  SpaceRequest: 'finalizer.toolchain.dev.openshift.com',
} as const;

/** Labels of a SpaceRequest created for a claim. */
export const SpaceRequestLabel = {
  Claim: 'appstudio.openshift.io/dtc',
  Target: 'appstudio.openshift.io/dt',
} as const;

export const SPACE_REQUEST_TIER = 'appstudio-env';

/** The single condition type of claims and targets. */
export const DeploymentTargetConditionType = { ErrorOccurred: 'ErrorOccurred' } as const;
export const DeploymentTargetConditionReason = {
  Success: 'Success',
  ErrorOccurred: 'ErrorOccurred',
} as const;

/** Messages of claims and targets (the original's texts; the ones marked "beyond" are new). */
export const DeploymentTargetMessage = {
  doesNotMatch: (target: string, claim: string, namespace: string, reason: string): string =>
    `DeploymentTarget ${target} does not match DeploymentTargetClaim ${claim} in namespace ${namespace}: ${reason}`,
  ClaimRefToAnother:
    "DeploymentTarget already references another DeploymentTargetClaim via DeploymentTarget's .spec.claimRef field",
  ClassMismatch: 'deploymentTargetClassName does not match',
  NotAvailable: 'DeploymentTarget is not in Available phase',
  NoCredentials: 'DeploymentTarget does not have cluster credentials',
  bindingConflict: (claim: string, targetName: string, target: string, claimRef: string, reason: string) =>
    `cannot bind DeploymentTargetClaim ${claim} with target "${targetName}" to DeploymentTarget ${target} with claim ref "${claimRef}": ${reason}`,
  ConflictClaimRef: 'DeploymentTarget has a claimRef to another DeploymentTargetClaim',
  ConflictTargetClaimed: 'DeploymentTargetClaim targets a DeploymentTarget that is already claimed',
  multipleTargets: (claim: string): string =>
    `multiple DeploymentTargets found for a bounded DeploymentTargetClaim ${claim}`,
  lost: (claim: string, namespace: string): string =>
    `DeploymentTarget not found for a bounded DeploymentTargetClaim ${claim} in namespace ${namespace}`,
  processBound: (err: string): string => `failed to process bound DeploymentTargetClaim: ${err}`,
  WantsClaimedTarget: 'DeploymentTargetClaim wants to claim a DeploymentTarget that is already claimed',
  targetDoesNotMatch: (mismatch: string): string =>
    `DeploymentTarget does not match the specified DeploymentTargetClaim: ${mismatch}`,
  provisioning: (err: string): string => `unable to handle provisioning of SpaceRequest: ${err}`,
  classNotFound: (claim: string, className: string): string =>
    `DeploymentTargetClaim ${claim} does not have a matching DeploymentTargetClass ${className}: the resource could not be found on the cluster`,
  ClassOfTargetNotFound: 'unable to locate matching DTClass for DT',
  UnexpectedReclaimPolicy: 'unexpected reclaim policy value on DeploymentTargetClass',
  spaceRequestNotReady: (spaceRequest: string): string =>
    `failed to find ConditionReady for SpaceRequest: ${spaceRequest}`,
  UnexpectedClaimError: 'unexpected internal error occurred in DTC controller',
  UnexpectedTargetError: 'unexpected internal error occurred in DT controller',
  /** Beyond the original (appstudio README promise 6): in-use protection. */
  inUse: (environments: readonly string[]): string =>
    `DeploymentTargetClaim is in use by Environment ${environments.join(', ')}: it is released once no Environment names it`,
  /** Beyond the original (appstudio README promise 6): a Delete claim waits for its target. */
  waitingForTarget: (target: string): string =>
    `waiting for DeploymentTarget ${target} to be deprovisioned (reclaim policy Delete)`,
  /** Beyond the original (appstudio README promise 7): the namespace provisioner. */
  namespaceTaken: (namespace: string): string =>
    `namespace ${namespace} already exists and was not provisioned for this DeploymentTargetClaim`,
} as const;

/** Messages of an Environment's DeploymentTargetNotFound reason (the original's three texts). */
export const EnvironmentTargetMessage = {
  Missing: 'DeploymentTargetClaim references a DeploymentTarget that does not exist',
  Unreadable: 'Unable to find the DeploymentTarget for DeploymentTargetClaim',
  NotFound: 'DeploymentTarget not found for DeploymentTargetClaim',
} as const;

// ---------------------------------------------------------------------------------------------------
// Generated names

/** The ManagedEnvironment generated for an Environment. */
export const managedEnvironmentName = (environment: string): string => `managed-environment-${environment}`;
/** The Secret copy generated for an Environment whose target's Secret is not of the managed-environment type. */
export const managedEnvironmentSecretName = (environment: string): string =>
  `managed-environment-secret-${environment}`;

// ---------------------------------------------------------------------------------------------------
// Conditions: Environment (status.conditions) and SnapshotEnvironmentBinding (status.bindingConditions)
// use the same pair, always written together and in this order: ErrorOccurred, then Reconciled.

export const AppStudioConditionType = {
  ErrorOccurred: 'ErrorOccurred',
  Reconciled: 'Reconciled',
} as const;

/** The reason of ErrorOccurred while it is True. */
export const ErrorOccurredReason = 'ErrorOccurred';

/** Reasons of an Environment's Reconciled condition (False); resolved ones are `<reason>Resolved`. */
export const EnvironmentReason = {
  InvalidEnvironment: 'InvalidEnvironment',
  DeploymentTargetClaimNotFound: 'DeploymentTargetClaimNotFound',
  DeploymentTargetNotFound: 'DeploymentTargetNotFound',
  SecretNotFound: 'SecretNotFound',
} as const;

/** User-facing messages of an Environment's conditions (keep these texts). */
export const EnvironmentMessage = {
  BothTargets:
    'Environment is invalid since it cannot have both DeploymentTargetClaim and credentials configuration set',
  ClaimNotFound: 'DeploymentTargetClaim not found while generating the desired Environment resource',
  secretNotFound: (secret: string): string =>
    `the secret ${secret} referenced by the Environment resource was not found`,
  /** Beyond the original (which retried silently): the API server refused the generated ManagedEnvironment. */
  managedEnvironmentRejected: (name: string, detail: string): string =>
    `the ManagedEnvironment ${name} cannot be generated from this Environment: ${detail}`,
} as const;

/** Reasons of a binding's Reconciled condition. */
export const BindingReason = {
  GitOpsRepoNotReady: 'GitOpsRepoNotReady',
  Reconciled: 'Reconciled',
  WaitingForComponentStatus: 'WaitingForComponentStatus',
  DuplicateComponents: 'DuplicateComponents',
  ErrorGeneratingGitOpsDeployment: 'ErrorGeneratingGitOpsDeployment',
  /** Beyond the original: the Environment the binding names does not exist (appstudio README promise 3). */
  EnvironmentNotFound: 'EnvironmentNotFound',
  /** Beyond the original: another binding already deploys this application to this environment (appstudio README promise 1). */
  DuplicateBinding: 'DuplicateBinding',
} as const;

export const EnvironmentEventReason = {
  ManagedEnvironmentCreated: 'ManagedEnvironmentCreated',
  ManagedEnvironmentUpdated: 'ManagedEnvironmentUpdated',
  ManagedEnvironmentDeleted: 'ManagedEnvironmentDeleted',
  ManagedEnvironmentNotOwned: 'ManagedEnvironmentNotOwned',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

export const RenderEventReason = {
  GitOpsRepositoryRendered: 'GitOpsRepositoryRendered',
  GitOpsRepositoryRenderFailed: 'GitOpsRepositoryRenderFailed',
  GitOpsRepositoryManagedElsewhere: 'GitOpsRepositoryManagedElsewhere',
} as const;

export const ClaimEventReason = {
  Bound: 'Bound',
  Lost: 'Lost',
  Released: 'Released',
  Provisioning: 'Provisioning',
  ErrorOccurred: 'ErrorOccurred',
} as const;

/** Reasons of the Events about a binding. */
export const BindingEventReason = {
  GitOpsDeploymentCreated: 'GitOpsDeploymentCreated',
  GitOpsDeploymentUpdated: 'GitOpsDeploymentUpdated',
  GitOpsDeploymentDeleted: 'GitOpsDeploymentDeleted',
  ApplicationNotFound: 'ApplicationNotFound',
  ErrorOccurred: 'ErrorOccurred',
  ErrorOccurredResolved: 'ErrorOccurredResolved',
} as const;

/** User-facing messages of a binding's conditions (keep these texts). */
export const BindingMessage = {
  gitOpsRepoNotReady: (binding: string): string =>
    `Cannot Reconcile Binding '${binding}', since GitOps Repo Conditions status is false.`,
  // "SnapshotEventBinding" is the original's text.
  waitingForComponentStatus: (binding: string): string =>
    `SnapshotEventBinding Component status is required to generate GitOps deployment, waiting for the Application Service controller to finish reconciling binding '${binding}'`,
  duplicateComponent: (component: string): string =>
    `duplicate component keys found in status field in ${component}`,
  ClaimNotFound: 'DeploymentTargetClaim referenced by Environment does not exist.',
  DeploymentTargetNotFound: 'unable to locate DeploymentTarget the references DeploymentTargetClaim',
  MissingTargetNamespace: 'Environment is missing a TargetNamespace field',
  UnknownError: 'an unknown error occurred',
  /** Beyond the original (which said UnknownError): which value cannot label the generated deployments. */
  invalidLabelValue: (what: string, value: string): string =>
    `${what} ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value)} cannot be a label value of the generated GitOpsDeployments (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)`,
  environmentNotFound: (environment: string): string =>
    `Environment '${environment}' referenced by the binding does not exist`,
  duplicateBinding: (application: string, environment: string, existing: string): string =>
    `invalid SnapshotEnvironmentBinding: duplicate combination of Application (${application}) and Environment (${environment}). Duplicated by: ${existing}`,
} as const;

/** The single condition of `status.componentDeploymentConditions`. */
export const ComponentDeploymentConditionType = {
  AllComponentsDeployed: 'AllComponentsDeployed',
} as const;

export const ComponentDeploymentReason = {
  CommitsSynced: 'CommitsSynced',
  CommitsUnsynced: 'CommitsUnsynced',
  ErrorOccurred: 'ErrorOccurred',
} as const;

export const componentsDeployedMessage = (synced: number, total: number): string =>
  `${synced} of ${total} components deployed`;

// ---------------------------------------------------------------------------------------------------
// PromotionRun

export const PromotionRunState = {
  Active: 'Active',
  Waiting: 'Waiting',
  Complete: 'Complete',
} as const;

export const PromotionRunResult = {
  Success: 'Success',
  Failure: 'Failure',
} as const;

/** Reasons of the Events about a PromotionRun. */
export const PromotionEventReason = {
  PromotionStarted: 'PromotionStarted',
  PromotionWaiting: 'PromotionWaiting',
  EnvironmentPromoted: 'EnvironmentPromoted',
  PromotionSucceeded: 'PromotionSucceeded',
  PromotionFailed: 'PromotionFailed',
  BindingGenerated: 'BindingGenerated',
  ErrorOccurred: 'ErrorOccurred',
} as const;

/** User-facing messages of a PromotionRun (keep these texts). */
export const PromotionRunMessage = {
  AllSyncedHealthy: 'All GitOpsDeployments are Synced/Healthy',
  InvalidTarget: 'Target Environment has invalid value.',
  WaitingForDeployments:
    'Waiting for the environment binding to create all of the expected GitOpsDeployments.',
  waitingFor: (deployments: readonly string[]): string =>
    `Waiting for following GitOpsDeployments to be Synced/Healthy: ${deployments.join(', ')}`,
  timedOut: (limit: string): string => `Promotion Failed. Could not be completed in ${limit}.`,
  snapshotNotFound: (snapshot: string, binding: string): string =>
    `Snapshot: ${snapshot} referred in Binding: ${binding} does not exist.`,
  bindingChanged: (oldBinding: string, newBinding: string): string =>
    `The binding changed after the PromotionRun first start. The .spec fields of the PromotionRun are immutable, and should not be changed after being created. old-binding: ${oldBinding}, new-binding: ${newBinding}`,
  /** Beyond the original (appstudio README promise 4): which run this one waits for. */
  waitingForRun: (run: string, application: string): string =>
    `Waiting for PromotionRun '${run}' of application '${application}' to complete`,
  /** Beyond the original (appstudio README promise 4): it only logged this. */
  noComponents: (application: string): string =>
    `no Component of application '${application}' exists, so no binding can be generated`,
  /** Beyond the original (issue 23): this service renders the GitOps repository, and that failed. */
  gitOpsRepositoryFailed: (binding: string, message: string): string =>
    `the GitOps repository of binding ${binding} could not be rendered: ${message}`,
} as const;

/** `status.environmentStatus[].status` ("In Progress" with a space, as in the original). */
export const PromotionEnvironmentStatus = {
  Success: 'Success',
  InProgress: 'In Progress',
  Failed: 'Failed',
} as const;

// ---------------------------------------------------------------------------------------------------
// Labels, annotations, Secret types

export const AppStudioLabel = {
  /** Identity labels of a generated GitOpsDeployment (values: the binding's application, component, environment). */
  Application: 'appstudio.openshift.io/application',
  Component: 'appstudio.openshift.io/component',
  Environment: 'appstudio.openshift.io/environment',
  /** On a copied managed-environment Secret: the Environment it belongs to. */
  EnvironmentSecret: 'appstudio.openshift.io/environment-secret',
  /** Labels of a binding generated by a PromotionRun. */
  BindingApplication: 'appstudio.application',
  BindingEnvironment: 'appstudio.environment',
  /**
   * Beyond the original (appstudio README promise 7): on a namespace provisioned by managed-gitops.redhat.com/namespace, the
   * uid of the claim it was provisioned for. Only namespaces carrying it are ever deleted on reclaim.
   */
  ProvisionedForClaim: 'managed-gitops.redhat.com/provisioned-for-claim',
} as const;

/**
 * Beyond the original: on a namespace provisioned by managed-gitops.redhat.com/namespace, `<namespace>/<name>`
 * of the claim it was provisioned for (the service writes it with the namespace; namespaces made before it
 * existed have none). Two claims can derive the same namespace name (`a-b`/`c` and `a`/`b-c`): this says which.
 */
export const PROVISIONED_FOR_CLAIM_REF_ANNOTATION = 'managed-gitops.redhat.com/provisioned-for-claim-ref';

/** Binding labels whose key contains this text are copied onto its GitOpsDeployments (as the original did). */
export const COPIED_LABEL_MARKER = 'appstudio.openshift.io';

/** The original's ownerReference apiVersion for a ManagedEnvironment's Environment (a wrong group; still recognised). */
export const LEGACY_ENVIRONMENT_OWNER_API_VERSION = 'managed-gitops.redhat.com/v1alpha1';

/** The field manager of every write of the App Studio controllers. */
export const APPSTUDIO_FIELD_MANAGER = FieldManager.AppStudio;
