/**
 * The delete steps of the ManagedEnvironment reconcile: its rows deleted (the applications that used it
 * announced), and for a CR with createNewServiceAccount the ServiceAccount, ClusterRole and ClusterRoleBinding
 * it created removed from the target cluster before its finalizer goes. Top-level functions over the
 * reconcile's deps (`ManagedEnvironmentSteps`).
 */
import { ManagedEnvironmentEventReason } from '@gitops/api';
import type { ApiCrMappingRow } from '@gitops/db';
import type { Logger, ReconcileContext } from '@gitops/shared';
import { ManagedEnvironmentCr, type ManagedEnvironmentObject } from '../kinds.ts';
import {
  classifyConnectionError,
  parseManagedEnvironmentSpec,
  readTargetCluster,
  type TargetCluster,
  targetKubeConfig,
} from './connection.check.ts';
import {
  environmentEvent,
  getSecret,
  patchFinalizers,
  SERVICE_ACCOUNT_FINALIZER,
} from './managed-environment.connect.ts';
import type { ManagedEnvironmentSteps } from './managed-environment.reconciler.ts';
import {
  deleteMappedEnvironments,
  findEnvironmentMappings,
  storedBearerToken,
} from './managed-environment.store.ts';
import { removeServiceAccount } from './service-account.ts';

/**
 * Deletes the rows of this name whose mappings are `proven` gone: a deletionTimestamp or a live read made after
 * the mappings were read is the proof (`provenGone`), never a cache.
 */
export async function deleteRows(
  deps: Pick<ManagedEnvironmentSteps, 'db' | 'onEnvironmentChanged'>,
  namespace: string,
  name: string,
  proven: (mapping: ApiCrMappingRow) => boolean,
  logger: Logger,
) {
  const deleted = await deps.db.transaction().execute(async (trx) => {
    await ManagedEnvironmentCr.lock(trx, namespace, name);
    const mappings = await findEnvironmentMappings(trx, namespace, name);
    return await deleteMappedEnvironments(trx, mappings.filter(proven));
  });
  for (const d of deleted) {
    logger.info(
      { environment: d.environmentId, applications: d.affectedApplicationIds.length },
      'managed environment deleted from the database',
    );
  }
  if (deleted.length > 0) deps.onEnvironmentChanged?.(namespace);
  return deleted;
}

/** The ServiceAccount we created is removed with the user's credentials (or, failing that, its own token). */
export async function reconcileDeleting(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  context: ReconcileContext,
) {
  const { namespace = '', name, uid = '' } = object.metadata;
  const finalizers = object.metadata.finalizers ?? [];
  if (finalizers.includes(SERVICE_ACCOUNT_FINALIZER)) {
    const problem = await removeCreatedServiceAccount(deps, object, context.signal);
    if (problem === undefined) {
      await environmentEvent(
        deps,
        object,
        'Normal',
        ManagedEnvironmentEventReason.ServiceAccountRemoved,
        'Removed the ServiceAccount, ClusterRole and ClusterRoleBinding created on the cluster',
      );
    } else {
      // Never block the delete forever: say what is left behind.
      context.logger.warn({ problem }, 'could not remove the created ServiceAccount');
      await environmentEvent(
        deps,
        object,
        'Warning',
        ManagedEnvironmentEventReason.ServiceAccountRemovalFailed,
        `Could not remove the ServiceAccount argocd-manager-${uid} (and its ClusterRole/Binding) from the cluster: ${problem}`,
      );
    }
  }
  // Its own rows only: the deletionTimestamp proves this uid is going, not that another of the name is.
  await deleteRows(deps, namespace, name, (m) => m.cr_uid === uid, context.logger);
  if (finalizers.includes(SERVICE_ACCOUNT_FINALIZER)) {
    await patchFinalizers(
      deps,
      object,
      finalizers.filter((f) => f !== SERVICE_ACCOUNT_FINALIZER),
    );
  }
}

/**
 * Removes the ServiceAccount created for this CR, trying each of `removalAttempts` in turn; undefined when
 * removed, else what went wrong last.
 */
async function removeCreatedServiceAccount(
  deps: ManagedEnvironmentSteps,
  object: ManagedEnvironmentObject,
  signal: AbortSignal,
): Promise<string | undefined> {
  const { namespace = '', uid = '' } = object.metadata;
  const parsed = parseManagedEnvironmentSpec(object.spec);
  let problem = 'the credentials are not available';
  if (!parsed.ok) return problem;
  const target = readTargetCluster(
    await getSecret(deps, namespace, parsed.value.credentialsSecret, signal),
    parsed.value,
  );
  const stored = await storedBearerToken(deps.db, deps.sealer, uid);
  for (const attempt of removalAttempts(target.ok ? target.value : undefined, stored)) {
    try {
      await removeServiceAccount(
        targetKubeConfig(attempt.target, attempt.token, parsed.value.allowInsecureSkipTLSVerify),
        uid,
        signal,
      );
      return undefined;
    } catch (err) {
      if (signal.aborted) throw err;
      problem = classifyConnectionError(err, parsed.value.apiURL).message;
    }
  }
  return problem;
}

/**
 * The credentials to remove the ServiceAccount with, in order (pure): the user's, then the stored token of our
 * own (on the user's cluster entry when there is one, else on the stored API URL).
 */
export function removalAttempts(
  target: TargetCluster | undefined,
  stored: { apiUrl: string; token: string } | undefined,
): { target: TargetCluster; token: string }[] {
  const attempts: { target: TargetCluster; token: string }[] = [];
  if (target) attempts.push({ target, token: target.token });
  if (stored) {
    attempts.push({
      target: target ?? { server: stored.apiUrl, caData: undefined, token: stored.token },
      token: stored.token,
    });
  }
  return attempts;
}
