/**
 * GitOpsDeployment reconciler (level-based): the key is `namespace/name`; the object comes from the
 * informer cache. A live deployment gets its application row (+ tenant, Workspace environment, mapping
 * and announcing operation) in one transaction; a deleted one loses its rows, announced the same way.
 * The user finalizer is removed once the delete operation is Completed: completion is an event
 * (NOTIFY → re-enqueue), never a wait. ErrorOccurred is owned here; Events tell the story.
 * The steps are top-level functions over a `deps` object (`GitOpsDeploymentSteps`), so a test calls one with
 * plain objects: this file the live path (create/update), `gitops-deployment.deletion.ts` the deletion path,
 * `gitops-deployment.conditions.ts` ErrorOccurred and the states it shows.
 */
import { GitOpsDeploymentMessage } from '@gitops/api';
import { type ApiCrMappingRow, type ClusterCredentialsInput, isDeletedCr } from '@gitops/db';
import type {
  Informer,
  KubeObject,
  Logger,
  ReconcileContext,
  ReconcileResult,
  Reconciler,
} from '@gitops/shared';
import type { JsonObject } from '../json.ts';
import { GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';
import {
  currentObjectReader,
  readLiveUid,
  readTenantNamespace,
  type TenantNamespace,
} from '../kube-reads.ts';
import type { EnvironmentResolver } from '../managed-environment/environment.resolver.ts';
import { PLACEMENT_RECHECK_MS, PlacementRefusedError } from '../placement.ts';
import {
  type CurrentObjectRead,
  type LiveUidRead,
  provenGone,
  provenGoneOfName,
  reconcileCurrentObject,
} from '../reconcile-current.ts';
import type { CrReconcilerOptions } from '../reconciler-options.ts';
import { type WorkspaceAccess, WorkspaceAccessNeededError } from '../workspace-access/workspace-access.ts';
import {
  type ApplyResult,
  applyDesiredApplication,
  createNewApplication,
  type DeploymentIdentity,
  deleteMappedApplications,
  findDeploymentMappings,
  type MappedDeletes,
  RELEASE_WAIT_MS,
  unchangedApplication,
} from './application.store.ts';
import type { DeploymentApplications } from './deployment-applications.ts';
import {
  desiredApplicationSpec,
  destinationProblem,
  parseGitOpsDeploymentSpec,
} from './desired-application.ts';
import {
  DeploymentErrorMessage,
  reportOperationOutcome,
  writeErrorOccurred,
} from './gitops-deployment.conditions.ts';
import { reconcileDeleting, reconcileGone, recordDeletes } from './gitops-deployment.deletion.ts';

export interface GitOpsDeploymentReconcilerOptions extends CrReconcilerOptions<GitOpsDeploymentObject> {
  /** The identity of the cluster tenants' namespaces live on (the backend's own; read after start). */
  tenantClusterIdentity: () => string;
  /** Resolves `spec.destination.environment` (a ManagedEnvironment in the same namespace); unset: never usable. */
  resolveEnvironment?: EnvironmentResolver;
  /**
   * How long after a failed Application delete (the agent exhausted its attempts) the delete is announced
   * again while the user finalizer waits for it (GITOPS_OPERATION_RETRY_INTERVAL). Default 1 minute.
   */
  operationRetryMs?: number;
  /** Credentials for a tenant's namespace when its instance runs on another cluster; unset: never provisioned. */
  workspaceAccess?: WorkspaceAccess;
  /** See GITOPS_ENGINE_INSTANCE_AWAY_AFTER; unset: never reported. */
  engineInstanceAwayAfterMs?: number;
  /** Kept up to date with the uids whose ErrorOccurred=True this reconciler wrote (the feature reads it). */
  errorReported?: Set<string>;
  /** Told the application row of each deployment it writes or finds (the status path reads it). */
  applications?: Pick<DeploymentApplications, 'remember'>;
  /** The namespaces (`namespaceIdentity`): a new deployment's tenant found without a read; unset: read. */
  namespaces?: Pick<Informer<KubeObject>, 'get'>;
}

/** What the steps use: the options with their defaults, and the live read of the current object. */
export interface GitOpsDeploymentSteps
  extends Pick<
    GitOpsDeploymentReconcilerOptions,
    | 'db'
    | 'kc'
    | 'events'
    | 'tenantClusterIdentity'
    | 'resolveEnvironment'
    | 'workspaceAccess'
    | 'engineInstanceAwayAfterMs'
    | 'errorReported'
    | 'applications'
    | 'namespaces'
  > {
  now: () => Date;
  /** `operationRetryMs` or its default. */
  deleteRetryMs: number;
  currentObject: CurrentObjectRead<GitOpsDeploymentObject>;
  /** The uid of the GitOpsDeployment of this name now, read live (`readLiveUid`): undefined when there is none. */
  liveUid: LiveUidRead;
}

/** Creates the reconcile function of the GitOpsDeployment work queue. */
export function createGitOpsDeploymentReconciler(options: GitOpsDeploymentReconcilerOptions): Reconciler {
  const { informer, ...rest } = options;
  const deps: GitOpsDeploymentSteps = {
    ...rest,
    now: options.now ?? (() => new Date()),
    deleteRetryMs: options.operationRetryMs ?? 60_000,
    currentObject: currentObjectReader(options.kc, informer, GitOpsDeploymentCr, options.selector),
    liveUid: (namespace, name, signal) =>
      readLiveUid(options.kc, GitOpsDeploymentCr, { namespace, name }, signal),
  };
  // Another shard's deployment is left alone: its rows are that shard's (kinds.ts).
  return (key, context) =>
    reconcileCurrentObject(deps, key, context, reconcileGitOpsDeployment, writeErrorOccurred);
}

/** One reconcile of a GitOpsDeployment (its key `namespace/name`): gone, being deleted, or live. */
export async function reconcileGitOpsDeployment(
  deps: GitOpsDeploymentSteps,
  object: GitOpsDeploymentObject | undefined,
  namespace: string,
  name: string,
  context: ReconcileContext,
): Promise<ReconcileResult | undefined> {
  if (!object) return await reconcileGone(deps, namespace, name, context);
  else if (object.metadata.deletionTimestamp) return await reconcileDeleting(deps, object, context.logger);
  else return await reconcileLive(deps, object, context);
}

/**
 * Rows of earlier incarnations of the deployment (a delete and re-create under the same name): they go once a
 * live read proves them gone (`provenGone`); those waiting for a move's release before they can go make the
 * reconcile look again later.
 */
export function staleRowsOf(
  deps: Pick<GitOpsDeploymentSteps, 'db' | 'events' | 'liveUid'>,
  object: GitOpsDeploymentObject,
) {
  const { namespace = '', name, uid = '' } = object.metadata;
  let waiting = 0;
  return {
    async deleteNow(signal: AbortSignal) {
      const { gone } = await provenGoneOfName(deps, findDeploymentMappings, { namespace, name }, signal, uid);
      if (gone.size === 0) return;
      const { deleted, waitingForRelease } = await deps.db.transaction().execute(async (trx) => {
        await GitOpsDeploymentCr.lock(trx, namespace, name);
        const mappings = await findDeploymentMappings(trx, namespace, name, { exceptUid: uid });
        return await deleteMappedApplications(
          trx,
          mappings.filter((m) => gone.has(m.id)),
        );
      });
      waiting += waitingForRelease;
      await recordDeletes(deps, object, deleted);
    },
    /** Rows the transaction already deleted with the application's change. */
    async deleted(stale: MappedDeletes) {
      waiting += stale.waitingForRelease;
      await recordDeletes(deps, object, stale.deleted);
    },
    later: (): ReconcileResult | undefined => (waiting > 0 ? { requeueAfter: RELEASE_WAIT_MS } : undefined),
  };
}

/** The desired application of a live deployment: its spec and environment, or why there is none. */
export async function desiredOf(
  deps: Pick<GitOpsDeploymentSteps, 'resolveEnvironment'>,
  object: GitOpsDeploymentObject,
  logger: Logger,
): Promise<
  { ok: true; spec: JsonObject; managedEnvironmentId: string | undefined } | { ok: false; message: string }
> {
  const namespace = object.metadata.namespace ?? '';
  const parsed = parseGitOpsDeploymentSpec(object.spec);
  if (!parsed.ok) {
    logger.warn({ problem: parsed.problem }, 'malformed GitOpsDeployment');
    return { ok: false, message: DeploymentErrorMessage.invalidSpec(parsed.problem) };
  }
  const environmentName = parsed.spec.destination?.environment;
  let managedEnvironmentId: string | undefined;
  if (environmentName) {
    // Missing or not connected: the application row is kept as it is (the agent renders an empty
    // destination once the environment row is gone); the user sees the documented error.
    const resolved = (await deps.resolveEnvironment?.(namespace, environmentName)) ?? { ok: false };
    if (!resolved.ok) return { ok: false, message: GitOpsDeploymentMessage.ManagedEnvironmentUnusable };
    managedEnvironmentId = resolved.managedEnvironmentId;
  }
  const destinationNamespace = environmentName ? parsed.spec.destination?.namespace || namespace : namespace;
  const problem = destinationProblem(parsed.spec, destinationNamespace);
  if (problem) {
    logger.warn({ problem }, 'GitOpsDeployment reaching outside its destination');
    return { ok: false, message: DeploymentErrorMessage.invalidSpec(problem) };
  }
  const spec = desiredApplicationSpec(parsed.spec, destinationNamespace);
  return { ok: true, spec, managedEnvironmentId };
}

/** What the locked transaction writes: the deployment, its tenant, the desired application. */
export interface ApplyInput {
  deployment: DeploymentIdentity;
  tenant: TenantNamespace;
  spec: JsonObject;
  managedEnvironmentId: string | undefined;
  workspaceCredentials?: ClusterCredentialsInput;
}

/** The object a reconcile holds is not its name's current one (its cache is behind): nothing was written. */
export interface CacheBehind {
  behind: string;
}

/** Whether `generation` (of the object a reconcile holds) is older than the one its row was written from. */
function isOlderGeneration(generation: number | undefined, written: number | null | undefined): boolean {
  return generation !== undefined && written != null && generation < written;
}

/** What the locked transaction did, or why it wrote nothing (applyLocked). */
type Locked = { stale: MappedDeletes; result: ApplyResult } | CacheBehind | { unproven: ApiCrMappingRow[] };

/**
 * The locked transaction: the name's lock, its mappings, the rows of earlier incarnations deleted, the
 * application created or updated with its operation. A refused placement or a tenant that needs workspace
 * credentials first is the answer, not an error; so are, with nothing written, a deployment recorded as deleted
 * (`CacheBehind`), an object of an older generation than its row was written from (the same), and mappings of
 * other incarnations not in `othersGone` (`unproven`: provenGone decides).
 */
function applyLocked(
  deps: Pick<GitOpsDeploymentSteps, 'db' | 'tenantClusterIdentity'>,
  input: ApplyInput,
  othersGone: ReadonlySet<string>,
) {
  const { deployment, tenant, workspaceCredentials } = input;
  const { namespace, name, uid } = deployment;
  return deps.db
    .transaction()
    .execute(async (trx): Promise<Locked> => {
      await GitOpsDeploymentCr.lock(trx, namespace, name);
      const mappings = await findDeploymentMappings(trx, namespace, name);
      const own = mappings.find((m) => m.cr_uid === uid);
      // Its own mapping proves it is not recorded as deleted (the record replaces the mapping): only a create asks.
      if (!own && (await isDeletedCr(trx, uid))) return { behind: 'it was deleted' };
      if (isOlderGeneration(deployment.generation, own?.cr_generation))
        return { behind: `its row was written from a newer generation (${own?.cr_generation})` };
      const others = mappings.filter((m) => m.cr_uid !== uid);
      const unproven = others.filter((m) => !othersGone.has(m.id));
      if (unproven.length > 0) return { unproven };
      const stale = await deleteMappedApplications(trx, others);
      const result = await applyDesiredApplication(
        trx,
        {
          deployment,
          namespaceUid: tenant.uid,
          requestedEngineInstance: tenant.engineInstance,
          spec: input.spec,
          managedEnvironmentId: input.managedEnvironmentId,
          tenantClusterIdentity: deps.tenantClusterIdentity(),
          ...(workspaceCredentials ? { workspaceCredentials } : {}),
        },
        mappings.find((m) => m.cr_uid === uid),
      );
      return { stale, result };
    })
    .catch((err: unknown) => {
      if (err instanceof PlacementRefusedError || err instanceof WorkspaceAccessNeededError) return err;
      throw err;
    });
}

/** How many times the locked transaction finds mappings of other incarnations to prove gone before it fails. */
const PROOF_ROUNDS = 3;

/**
 * The locked transaction. Mappings of other incarnations it found are proven gone first by a live read (API
 * calls, so outside the transaction; `provenGone`): when that read finds another uid than the object's, the
 * object is not the current one (`CacheBehind`). When the tenant's instance runs on another cluster,
 * credentials for its namespace first, then the same transaction again with them.
 */
async function applyWithWorkspaceAccess(
  deps: Pick<GitOpsDeploymentSteps, 'db' | 'tenantClusterIdentity' | 'workspaceAccess' | 'liveUid'>,
  input: ApplyInput,
  { logger, signal }: ReconcileContext,
) {
  const othersGone = new Set<string>();
  let workspaceCredentials: ClusterCredentialsInput | undefined;
  for (let round = 0; ; round++) {
    const applied = await applyLocked(
      deps,
      workspaceCredentials ? { ...input, workspaceCredentials } : input,
      othersGone,
    );
    if (applied instanceof WorkspaceAccessNeededError) {
      if (!deps.workspaceAccess || workspaceCredentials) throw applied;
      logger.info({ engineInstance: applied.instance }, 'provisioning workspace access for another cluster');
      workspaceCredentials = await deps.workspaceAccess.provision(input.deployment.namespace, signal);
    } else if ('unproven' in applied) {
      if (round >= PROOF_ROUNDS)
        throw new Error('other incarnations of the GitOpsDeployment kept appearing while it was written');
      const { liveUid, gone } = await provenGone(deps, applied.unproven, input.deployment, signal);
      if (liveUid !== input.deployment.uid)
        return { behind: 'the name holds another incarnation now' } satisfies CacheBehind;
      for (const id of gone) othersGone.add(id);
    } else return applied;
  }
}

/**
 * A created or updated application: said in the log. Not an Event: the status says it when Argo CD has
 * acted on it, and as an Event it was one API write per change that nobody acts on (issue 34).
 */
export function announceChange(result: ApplyResult, logger: Logger) {
  if (result.change === 'none') return;
  logger.info(
    { application: result.application.id, operation: result.operation.id, change: result.change },
    `application ${result.change}`,
  );
}

/** A live deployment: its application created, updated or found unchanged, and ErrorOccurred to match. */
export async function reconcileLive(
  deps: GitOpsDeploymentSteps,
  object: GitOpsDeploymentObject,
  context: ReconcileContext,
): Promise<ReconcileResult | undefined> {
  const { logger, signal } = context;
  const { namespace = '', name, uid = '' } = object.metadata;
  const { generation } = object.metadata;
  const deployment = { namespace, name, uid, ...(generation === undefined ? {} : { generation }) };
  const stale = staleRowsOf(deps, object);
  const desired = await desiredOf(deps, object, logger);
  if (!desired.ok) {
    await stale.deleteNow(signal);
    await writeErrorOccurred(deps, object, { status: 'error', message: desired.message }, logger);
    return stale.later();
  }
  const { spec, managedEnvironmentId } = desired;

  // An object without any status yet is almost always new (nothing has reported on it), so the look for an
  // unchanged row outside a transaction is skipped: the transaction reads the mappings and decides alone.
  const existingMappings =
    object.status === undefined ? [] : await findDeploymentMappings(deps.db, namespace, name);
  const ownMapping = existingMappings.find((m) => m.cr_uid === uid);
  // Most reconciles change nothing (an operation finished, a resync): two reads instead of a transaction.
  const unchanged =
    ownMapping && existingMappings.length === 1
      ? await unchangedApplication(deps.db, ownMapping, { spec, managedEnvironmentId })
      : undefined;
  if (unchanged) {
    deps.applications?.remember(uid, unchanged.id, `${namespace}/${name}`);
    await reportOperationOutcome(deps, object, uid, unchanged.id, logger);
    return;
  }
  const isNew = !ownMapping && object.status === undefined;
  // A new object: its application in one statement when nothing needs the transaction (usually). That path
  // needs only the namespace's uid and takes only a placed tenant, so a cache answers (ours, else the API
  // server's).
  const createdAtOnce = isNew
    ? await createNewApplication(deps.db, {
        deployment,
        namespaceUid: (
          await readTenantNamespace(deps.kc, namespace, signal, { fromCache: true, cache: deps.namespaces })
        ).uid,
        spec,
        managedEnvironmentId,
        tenantClusterIdentity: deps.tenantClusterIdentity(),
      })
    : undefined;
  const applied = createdAtOnce
    ? { stale: { deleted: [], waitingForRelease: 0 }, result: createdAtOnce }
    : await applyWithWorkspaceAccess(
        deps,
        {
          deployment,
          // The namespace's label matters only when the tenant is placed, i.e. for a new application: read
          // from etcd.
          tenant: ownMapping
            ? { uid: ownMapping.cr_namespace_uid, engineInstance: undefined }
            : await readTenantNamespace(deps.kc, namespace, signal),
          spec,
          managedEnvironmentId,
        },
        context,
      );
  if ('behind' in applied) {
    // Its delete or the name's next incarnation is on its way to this replica's cache: that event reconciles.
    logger.info(
      { why: applied.behind },
      'GitOpsDeployment not written: this replica has not seen its change yet',
    );
    return;
  }
  if (applied instanceof PlacementRefusedError) {
    logger.warn({ refusal: applied.refusal }, 'the tenant has no engine instance');
    await writeErrorOccurred(deps, object, { status: 'error', message: applied.message }, logger);
    // The instance may be registered or uncordoned, or the label fixed, without any event of ours.
    return { requeueAfter: PLACEMENT_RECHECK_MS };
  }
  const { result } = applied;
  deps.applications?.remember(uid, result.application.id, `${namespace}/${name}`);
  await stale.deleted(applied.stale);
  announceChange(result, logger);
  // A change just queued an operation: one is pending, so there is nothing to read to know it.
  if (result.change === 'none')
    await reportOperationOutcome(deps, object, uid, result.application.id, logger);
  else await writeErrorOccurred(deps, object, { status: 'ok' }, logger);
  return stale.later();
}
