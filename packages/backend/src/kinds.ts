/**
 * The custom-resource kinds the backend reconciles, each described once: its API descriptor (group,
 * version, kind, plural), its key in the database (`api_cr_mapping.cr_kind`, `operation.owner_kind`), how
 * to lock one name across replicas, how to address and type an object of it, and which informer updates
 * need a reconcile (its predicate, composed of @gitops/shared's named ones). Controllers, reconcilers and
 * stores take the descriptor; none re-derives these. Objects of a kind are read as its generated type
 * (`@gitops/api`), parsed once with the descriptor's `parse` (kindParser) at the informer and at a live read.
 */
import {
  FieldManager,
  type GitOpsDeployment,
  type GitOpsDeploymentManagedEnvironment,
  type GitOpsDeploymentRepositoryCredential,
  type GitOpsDeploymentSyncRun,
  type KindDescriptor,
  Kinds,
} from '@gitops/api';
import {
  type CrKind,
  type Database,
  insertOperation,
  lockCrName,
  type OperationOwnerCr,
  type OperationResourceType,
  type OperationRow,
} from '@gitops/db';
import {
  anyOf,
  deletionStarted,
  finalizersChanged,
  generationChanged,
  type KubeObject,
  kindParser,
  labelsChanged,
  type ObjectRef,
  type Predicate,
  refOfKind,
  relist,
  specChanged,
  type TypeMeta,
  uidChanged,
  withTypeMeta,
} from '@gitops/shared';
import type { Transaction } from 'kysely';

/** The field manager of every server-side apply and status patch the backend makes. */
export const BACKEND_FIELD_MANAGER = FieldManager.Backend;

/** An object of a core kind as the API server returns it: its generated type, with a name. */
export type GitOpsDeploymentObject = GitOpsDeployment & KubeObject;
export type SyncRunObject = GitOpsDeploymentSyncRun & KubeObject;
export type ManagedEnvironmentObject = GitOpsDeploymentManagedEnvironment & KubeObject;
export type RepositoryCredentialObject = GitOpsDeploymentRepositoryCredential & KubeObject;

export interface CrKindDescriptor<K extends CrKind = CrKind, T extends KubeObject = KubeObject>
  extends KindDescriptor<K> {
  /**
   * Types an object of this kind read from the API server (kindParser): the informer's `parse` hook and a live
   * read's. @throws for one without a name, without a spec, or whose spec or status is not an object.
   */
  parse(raw: unknown): T;
  /** What the rows of an object of this kind are announced to an engine instance as (`operation.resource_type`). */
  readonly resourceType: OperationResourceType;
  /**
   * Announces a change of the row `row.resourceId`, which the object `owner` of this kind made, to the engine
   * instance `row.engineInstanceId` (insertOperation, in `trx`): the operation, owned by `owner`.
   */
  announce(
    trx: Transaction<Database>,
    owner: Omit<OperationOwnerCr, 'kind'>,
    row: AnnouncedRow,
  ): Promise<OperationRow>;
  /** Serialises reconciles of one CR name across backend replicas until `trx` ends. */
  lock(trx: Transaction<Database>, namespace: string, name: string): Promise<void>;
  /** The reference of an object of this kind (cached objects may lack apiVersion/kind). */
  ref(object: KubeObject): ObjectRef;
  /** The object with apiVersion/kind set (Events need them). */
  withTypeMeta(object: KubeObject): KubeObject;
  /**
   * Which informer updates need a reconcile: a periodic relist does (the resync), and so does a change of
   * what the reconcile reads; a status write (ours or anyone's) does not. Creates and deletes always do.
   */
  readonly predicate: Predicate;
}

/** A tenant's row whose change an operation announces, and the engine instance it is announced to. */
export interface AnnouncedRow {
  engineInstanceId: string;
  resourceId: string;
  /** The tenant (cluster_user id). */
  ownerUserId: string;
}

/** Besides spec, uid, generation and deletion, which metadata the reconcile reads. */
interface ReconcileInputs {
  labels?: boolean;
  finalizers?: boolean;
}

/**
 * kindParser, and a spec required: every CRD of these kinds requires one (so does its generated type), so an
 * object without one is refused like a malformed one (left out of the cache, logged) rather than read.
 */
function parserWithSpec<T extends KubeObject>(type: TypeMeta): (raw: unknown) => T {
  const parse = kindParser<T>(type);
  return (raw) => {
    const object = parse(raw);
    if (object.spec === undefined) throw new Error('spec is missing');
    return object;
  };
}

function describeCrKind<T extends KubeObject, K extends CrKind>(
  type: KindDescriptor<K>,
  resourceType: OperationResourceType,
  inputs: ReconcileInputs = {},
): CrKindDescriptor<K, T> {
  return {
    ...type,
    parse: parserWithSpec<T>(type),
    resourceType,
    announce: async (trx, owner, row) =>
      (await insertOperation(trx, { ...row, resourceType, ownerCr: { kind: type.kind, ...owner } }))
        .operation,
    lock: (trx, namespace, name) => lockCrName(trx, { kind: type.kind, namespace, name }),
    ref: (object) => refOfKind(type, object),
    withTypeMeta: (object) => withTypeMeta(type, object),
    predicate: anyOf(
      relist,
      uidChanged,
      generationChanged,
      deletionStarted,
      specChanged,
      ...(inputs.finalizers === true ? [finalizersChanged] : []),
      ...(inputs.labels === true ? [labelsChanged] : []),
    ),
  };
}

/**
 * GitOpsDeployment: labels (the shard) and finalizers (the user's deletion finalizer) matter too.
 * The shard rule, the same for every kind: an object labelled for another backend shard (seen by a live read
 * when this shard's cache lacks it; `kube-reads.ts` answers `null`) is never treated as gone. Its rows are that
 * shard's, which finds them by the object's uid (a relabel moves an object between shards that way); deleting
 * them would stop its status and, with several shards on one database, make each shard's orphan sweep delete
 * the others' rows.
 */
export const GitOpsDeploymentCr = describeCrKind<GitOpsDeploymentObject, 'GitOpsDeployment'>(
  Kinds.GitOpsDeployment,
  'Application',
  { labels: true, finalizers: true },
);
export const SyncRunCr = describeCrKind<SyncRunObject, 'GitOpsDeploymentSyncRun'>(
  Kinds.GitOpsDeploymentSyncRun,
  'SyncOperation',
);
/** ManagedEnvironment: labels (the shard) matter too. */
export const ManagedEnvironmentCr = describeCrKind<
  ManagedEnvironmentObject,
  'GitOpsDeploymentManagedEnvironment'
>(Kinds.GitOpsDeploymentManagedEnvironment, 'ManagedEnvironment', { labels: true });
export const RepositoryCredentialCr = describeCrKind<
  RepositoryCredentialObject,
  'GitOpsDeploymentRepositoryCredential'
>(Kinds.GitOpsDeploymentRepositoryCredential, 'RepositoryCredentials');
