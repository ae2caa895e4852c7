/**
 * The RHOAS operator's API (group rhoas.redhat.com/v1alpha1): four namespaced kinds that connect a
 * namespace to managed Kafka and Service Registry. The CRD YAML in ../crds/rhoas is the source of truth;
 * the names, condition types, reasons and messages below are the contract the original operator had (its
 * spellings included, e.g. `AcccesTokenSecretValid`). See packages/rhoas-operator/README.md.
 *
 * The types are written by hand (not generated): the generator covers the GitOps API in ../crds only, and
 * these kinds check their required fields in the operator (so the types say every field may be missing).
 */
import { fileURLToPath } from 'node:url';
import { type CustomResourceDefinitionManifest, loadCrds } from './crds.ts';
import { describeKind } from './kind.ts';

export const RHOAS_API_GROUP = 'rhoas.redhat.com';
export const RHOAS_API_VERSION = 'v1alpha1';
export const RHOAS_API_GROUP_VERSION = `${RHOAS_API_GROUP}/${RHOAS_API_VERSION}` as const;

/** Absolute path of `packages/api/crds/rhoas` (a separate set: installing it never needs the GitOps CRDs). */
export const rhoasCrdDirectory: string = fileURLToPath(new URL('../crds/rhoas', import.meta.url));

/** Reads and parses the RHOAS CRDs (files in name order; `loadCrds` of that folder). */
export function loadRhoasCrds(): Promise<CustomResourceDefinitionManifest[]> {
  return loadCrds(rhoasCrdDirectory);
}

export const RhoasKind = {
  CloudServicesRequest: 'CloudServicesRequest',
  CloudServiceAccountRequest: 'CloudServiceAccountRequest',
  KafkaConnection: 'KafkaConnection',
  ServiceRegistryConnection: 'ServiceRegistryConnection',
} as const;
export type RhoasKind = (typeof RhoasKind)[keyof typeof RhoasKind];

export const RhoasPlural = {
  CloudServicesRequest: 'cloudservicesrequests',
  CloudServiceAccountRequest: 'cloudserviceaccountrequests',
  KafkaConnection: 'kafkaconnections',
  ServiceRegistryConnection: 'serviceregistryconnections',
} as const satisfies Record<RhoasKind, string>;

export const RhoasShortName = {
  CloudServicesRequest: 'cscr',
  CloudServiceAccountRequest: 'csar',
  KafkaConnection: 'akc',
  ServiceRegistryConnection: 'src',
} as const satisfies Record<RhoasKind, string>;

const describe = <K extends RhoasKind>(kind: K) =>
  describeKind({ group: RHOAS_API_GROUP, version: RHOAS_API_VERSION, kind, plural: RhoasPlural[kind] });

export const RhoasKinds = {
  CloudServicesRequest: describe(RhoasKind.CloudServicesRequest),
  CloudServiceAccountRequest: describe(RhoasKind.CloudServiceAccountRequest),
  KafkaConnection: describe(RhoasKind.KafkaConnection),
  ServiceRegistryConnection: describe(RhoasKind.ServiceRegistryConnection),
} as const;

/** Event reasons (CamelCase, as Kubernetes wants them; the condition's reason is in the message). */
export const RhoasEventReason = { Finished: 'Finished', Failed: 'ProcessingFailed' } as const;

/** Condition types (the original's spelling of `AcccesTokenSecretValid` is kept: clients test for it). */
export const RhoasConditionType = {
  AccessTokenSecretValid: 'AcccesTokenSecretValid',
  UserKafkasUpToDate: 'UserKafkasUpToDate',
  ServiceRegistriesUpToDate: 'ServiceRegistriesUpToDate',
  ServiceAccountCreated: 'ServiceAccountCreated',
  ServiceAccountSecretCreated: 'ServiceAccountSecretCreated',
  FoundKafkaById: 'FoundKafkaById',
  FoundServiceRegistryById: 'FoundServiceRegistryById',
  Finished: 'Finished',
} as const;
export type RhoasConditionType = (typeof RhoasConditionType)[keyof typeof RhoasConditionType];

const C = RhoasConditionType;
/** Each kind's conditions, in the original's list order. */
export const RhoasConditionsOf = {
  CloudServicesRequest: [
    C.AccessTokenSecretValid,
    C.ServiceRegistriesUpToDate,
    C.Finished,
    C.UserKafkasUpToDate,
  ],
  CloudServiceAccountRequest: [
    C.AccessTokenSecretValid,
    C.ServiceAccountCreated,
    C.ServiceAccountSecretCreated,
    C.Finished,
  ],
  KafkaConnection: [C.AccessTokenSecretValid, C.FoundKafkaById, C.Finished],
  ServiceRegistryConnection: [C.AccessTokenSecretValid, C.FoundServiceRegistryById, C.Finished],
} as const satisfies Record<RhoasKind, readonly RhoasConditionType[]>;

/** Condition reasons: stable names instead of the original's Java exception class names (README table). */
export const RhoasReason = {
  /** A required spec field is missing or not a string. */
  InvalidUserInput: 'InvalidUserInput',
  /** The token Secret does not exist. */
  SecretNotFound: 'SecretNotFound',
  /** The token Secret exists but has no usable `value`. */
  InvalidTokenSecret: 'InvalidTokenSecret',
  /** The SSO or API endpoint could not be reached, or did not answer in time. */
  ConnectionError: 'ConnectionError',
  /** An API answered with a body that is not the JSON it promises. */
  MalformedResponse: 'MalformedResponse',
  /** A management API answered with an error status (the message says which). */
  ApiException: 'ApiException',
  /** The service-account Secret could not be written. */
  SecretWriteFailed: 'SecretWriteFailed',
  /** The service-account Secret exists and belongs to something else. */
  SecretConflict: 'SecretConflict',
  /** The servicebinding.io binding Secret could not be written. */
  BindingSecretFailed: 'BindingSecretFailed',
  /** The API server refused or failed a read the processing needs (retried with backoff). */
  KubernetesError: 'KubernetesError',
} as const;
/** The SSO exchange failed with HTTP status n: reason `Http Error Code <n>` (the original's wording). */
export const httpErrorCodeReason = (status: number) => `Http Error Code ${status}`;

export const RhoasMessage = {
  created: 'Created',
  missingArgument: (field: string) => `Missing argument ${field} in CR, ${field} should not be null`,
  invalidArgument: (field: string, why: string) => `Invalid argument ${field} in CR: ${why}`,
  missingTokenSecret: (name: string) => `Missing Offline Token Secret ${name}`,
  tokenSecretWithoutValue: (name: string) => `Secret ${name} has no key "value" with an offline token`,
  exchangeFailed: (body: string) => `Exchange token failed with error ${body}`,
  secretConflict: (name: string) =>
    `Secret ${name} exists and is not owned by this CloudServiceAccountRequest; no service account was created`,
} as const;

/** Labels the operator adds to KafkaConnection and ServiceRegistryConnection (when `component` is absent). */
export const RhoasLabel = {
  component: 'app.kubernetes.io/component',
  componentValue: 'external-service',
  managedBy: 'app.kubernetes.io/managed-by',
  managedByValue: 'rhoas',
} as const;

/** Keys of the service-account Secret (CloudServiceAccountRequest output, connection input). */
export const ServiceAccountSecretKey = { clientId: 'client-id', clientSecret: 'client-secret' } as const;
/** Key of the token Secret that holds the offline token. */
export const TOKEN_SECRET_KEY = 'value';

export type {
  CloudServiceAccountRequest,
  CloudServicesRequest,
  KafkaConnection,
  /** A condition of the four kinds (the same shape in each CRD). */
  RhoasCondition,
  RhoasObject,
  ServiceRegistryConnection,
} from './rhoas.generated.ts';

export interface UserKafka {
  id: string;
  name: string;
  owner: string;
  bootstrapServerHost: string;
  status: string;
  createdAt: string;
  updatedAt: string;
  provider: string;
  region: string;
}

export interface ServiceRegistryItem {
  id: string;
  name: string;
  registryUrl: string;
  registryStatus: string;
  lastUpdated: string;
}
