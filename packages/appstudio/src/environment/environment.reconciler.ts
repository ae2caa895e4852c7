/**
 * The Environment's reconcile as named steps (README: "Environment"), for one Environment:
 * - gone: its ManagedEnvironment is deleted (also when only the legacy ownerReference form names it:
 *   `deleteGenerated`);
 * - `desiredOf`: claim and credentials both set: InvalidEnvironment; a claim: missing →
 *   DeploymentTargetClaimNotFound; not Bound → wait (no condition); Bound → the bound DeploymentTarget's
 *   cluster (missing → DeploymentTargetNotFound); credentials: that cluster; neither: nothing to deploy to,
 *   so a ManagedEnvironment we generated earlier is deleted (a fix: the original left it behind);
 * - `deployToCluster`: the referenced Secret must exist (SecretNotFound; the ManagedEnvironment is left as it
 *   is), a target's Secret of another type is copied (`applySecretCopy`), then the ManagedEnvironment is
 *   applied (`applyManagedEnvironment`, controller ownerReference to the Environment);
 * - existing conditions are resolved. A healthy Environment that never failed has no conditions at all.
 * Every step takes a `deps` object (the context's client, recorder and clock, and the caches it reads).
 */
import {
  APPSTUDIO_FIELD_MANAGER,
  AppStudioKinds,
  AppStudioLabel,
  CoreKinds,
  controllerReference,
  EnvironmentEventReason,
  EnvironmentMessage,
  EnvironmentReason,
  Kinds,
  managedEnvironmentName,
  managedEnvironmentSecretName,
  SecretType,
} from '@gitops/api';
import {
  deleteIfExists,
  getObject,
  type Informer,
  KubeApiError,
  type KubeObject,
  type Logger,
  patchStatus,
  type ReconcileResult,
  type Reconciler,
  serverSideApply,
  splitObjectKey,
} from '@gitops/shared';
import { parseConditions, resolved, sameConditions, withError } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import { requeueIn, type StepContext, stepContext } from '../controller.ts';
import { type EnvironmentCr, record } from '../objects.ts';
import type { ClaimCr, TargetCr } from '../target-matching.ts';
import {
  type Desired,
  desiredOf,
  ENVIRONMENT_RECHECK_MS,
  type EnvironmentError,
  isSecretCopyOf,
  type ManagedEnvironmentSpec,
  managedEnvironmentAction,
} from './environment.render.ts';
import { environmentOwnerOf } from './environment.watches.ts';

const Environment = AppStudioKinds.Environment;
const ManagedEnvironment = Kinds.GitOpsDeploymentManagedEnvironment;

type Cache<T extends KubeObject> = Pick<Informer<T>, 'get' | 'list'>;

/** What the steps use: the context's client, recorder, clock and shard labels, and the caches they read. */
export interface EnvironmentReconcilerDeps extends StepContext {
  environments: Cache<EnvironmentCr>;
  managedEnvironments: Cache<KubeObject>;
  secrets: Cache<KubeObject>;
  opaqueSecrets: Cache<KubeObject>;
  claims: Cache<ClaimCr>;
  targets: Cache<TargetCr>;
}

/** Deletes `managed-environment-<name>` if it belongs to the Environment `name` (never someone else's). */
export async function deleteGenerated(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'events' | 'managedEnvironments'>,
  namespace: string,
  name: string,
  env: EnvironmentCr | undefined,
  logger: Logger,
): Promise<void> {
  const generatedName = managedEnvironmentName(name);
  const existing = deps.managedEnvironments.get(namespace, generatedName);
  if (!existing || environmentOwnerOf(existing) !== name) return;
  if (
    await deleteIfExists(
      deps.kc,
      { ...ManagedEnvironment, namespace, name: generatedName },
      { uid: existing.metadata.uid },
    )
  ) {
    logger.info({ managedEnvironment: generatedName }, 'ManagedEnvironment deleted');
    if (env)
      await deps.events.event(
        env,
        'Normal',
        EnvironmentEventReason.ManagedEnvironmentDeleted,
        `ManagedEnvironment ${generatedName} deleted: the Environment no longer targets a cluster`,
      );
  }
}

/** Writes the Environment's conditions when they differ from its own. */
async function writeConditions(
  deps: Pick<EnvironmentReconcilerDeps, 'kc'>,
  env: EnvironmentCr,
  next: ReturnType<typeof parseConditions>,
): Promise<void> {
  if (sameConditions(parseConditions(env.status?.conditions), next)) return;
  await patchStatus(
    deps.kc,
    { ...Environment, namespace: env.metadata.namespace, name: env.metadata.name },
    { metadata: { resourceVersion: env.metadata.resourceVersion }, status: { conditions: next } },
    { fieldManager: APPSTUDIO_FIELD_MANAGER },
  );
}

/**
 * The Secret `name` of the Environment's namespace. Secrets of the managed-environment and Opaque types are
 * cached; any other type is read (the core controller reports a wrong type on the ManagedEnvironment, as in
 * the original).
 */
async function secretNamed(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'secrets' | 'opaqueSecrets'>,
  namespace: string,
  name: string,
): Promise<KubeObject | undefined> {
  if (!name) return undefined;
  return (
    deps.secrets.get(namespace, name) ??
    deps.opaqueSecrets.get(namespace, name) ??
    (await getObject(deps.kc, { ...CoreKinds.Secret, namespace, name }))
  );
}

/** `managed-environment-secret-<env>`: the target's Secret data under the managed-environment type. */
export async function applySecretCopy(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'shardLabels' | 'secrets'>,
  env: EnvironmentCr,
  source: KubeObject,
): Promise<void> {
  const namespace = env.metadata.namespace ?? '';
  const name = managedEnvironmentSecretName(env.metadata.name);
  const data = record(source.data);
  if (isSecretCopyOf(deps.secrets.get(namespace, name), env, data)) return;
  await serverSideApply(
    deps.kc,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace,
        labels: { ...deps.shardLabels, [AppStudioLabel.EnvironmentSecret]: env.metadata.name },
        ownerReferences: [controllerReference(Environment, env, { blockOwnerDeletion: true })],
      },
      type: SecretType.ManagedEnvironment,
      data,
    },
    { fieldManager: APPSTUDIO_FIELD_MANAGER, force: true },
  );
}

/** Deletes the Secret copy of the Environment, if we made one. */
export async function deleteSecretCopy(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'secrets'>,
  env: EnvironmentCr,
  logger: Logger,
): Promise<void> {
  const namespace = env.metadata.namespace ?? '';
  const name = managedEnvironmentSecretName(env.metadata.name);
  const existing = deps.secrets.get(namespace, name);
  if (!existing || existing.metadata.labels?.[AppStudioLabel.EnvironmentSecret] !== env.metadata.name) return;
  if (await deleteIfExists(deps.kc, { ...CoreKinds.Secret, namespace, name }, { uid: existing.metadata.uid }))
    logger.info({ secret: name }, "Secret copy deleted: the target's Secret is gone");
}

/**
 * Server-side applies the ManagedEnvironment; 'foreign' when an object of that name belongs to someone else,
 * `{ rejected }` when admission refuses it.
 */
export async function applyManagedEnvironment(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'events' | 'shardLabels' | 'managedEnvironments'>,
  env: EnvironmentCr,
  spec: ManagedEnvironmentSpec,
  logger: Logger,
): Promise<'foreign' | 'unchanged' | 'created' | 'updated' | { rejected: string }> {
  const namespace = env.metadata.namespace ?? '';
  const name = managedEnvironmentName(env.metadata.name);
  const existing = deps.managedEnvironments.get(namespace, name);
  const action = managedEnvironmentAction(existing, env, spec);
  if (action === 'foreign')
    logger.warn(
      { managedEnvironment: name },
      'a ManagedEnvironment of that name is controlled by another object; left alone',
    );
  if (action !== 'apply') return action;
  const object: KubeObject = {
    apiVersion: ManagedEnvironment.apiVersion,
    kind: ManagedEnvironment.kind,
    metadata: {
      name,
      namespace,
      labels: { ...deps.shardLabels },
      ownerReferences: [controllerReference(Environment, env, { blockOwnerDeletion: true })],
    },
    spec: { ...spec },
  };
  let live: KubeObject;
  try {
    live = await serverSideApply(deps.kc, object, { fieldManager: APPSTUDIO_FIELD_MANAGER, force: true });
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 422)
      return { rejected: err.statusMessage.slice(0, 1024) };
    throw err;
  }
  if (existing && live.metadata.resourceVersion === existing.metadata.resourceVersion) return 'unchanged';
  await deps.events.event(
    env,
    'Normal',
    existing
      ? EnvironmentEventReason.ManagedEnvironmentUpdated
      : EnvironmentEventReason.ManagedEnvironmentCreated,
    `ManagedEnvironment ${name} ${existing ? 'updated' : 'created'}`,
  );
  return existing ? 'updated' : 'created';
}

/**
 * The ManagedEnvironment of a cluster the Environment targets, with its Secret (copied when it is a target's
 * of another type): undefined when done, 'foreign' when it is someone else's, else the error to report.
 */
export async function deployToCluster(
  deps: EnvironmentReconcilerDeps,
  env: EnvironmentCr,
  desired: Extract<Desired, { kind: 'cluster' }>,
  logger: Logger,
): Promise<EnvironmentError | 'foreign' | undefined> {
  const namespace = env.metadata.namespace ?? '';
  const name = env.metadata.name;
  const secretName = desired.spec.credentialsSecret;
  const secret = await secretNamed(deps, namespace, secretName);
  if (!secret) {
    await deleteSecretCopy(deps, env, logger);
    return {
      reason: EnvironmentReason.SecretNotFound,
      message: EnvironmentMessage.secretNotFound(secretName),
      requeueAfter: ENVIRONMENT_RECHECK_MS,
    };
  }
  const spec = { ...desired.spec };
  if (desired.viaClaim && secret.type !== SecretType.ManagedEnvironment) {
    await applySecretCopy(deps, env, secret);
    spec.credentialsSecret = managedEnvironmentSecretName(name);
  }
  const applied = await applyManagedEnvironment(deps, env, spec, logger);
  if (applied === 'foreign') return 'foreign';
  // Admission refused what this Environment asks for (e.g. an apiURL the Environment's own rule lets through
  // but a ManagedEnvironment's does not): the user's to fix, so a condition and no retry.
  if (typeof applied === 'object')
    return {
      reason: EnvironmentReason.InvalidEnvironment,
      message: EnvironmentMessage.managedEnvironmentRejected(managedEnvironmentName(name), applied.rejected),
    };
  return undefined;
}

/** The error condition set (with a Warning Event when it changed); the requeue the error asks for. */
async function reportError(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'events'>,
  env: EnvironmentCr,
  now: Date,
  error: EnvironmentError,
): Promise<ReconcileResult | undefined> {
  const conditions = parseConditions(env.status?.conditions);
  const next = withError(conditions, error.reason, error.message, now);
  if (!sameConditions(conditions, next)) {
    await writeConditions(deps, env, next);
    await deps.events.event(env, 'Warning', EnvironmentEventReason.ErrorOccurred, error.message);
  }
  return requeueIn(error.requeueAfter);
}

/** Existing conditions resolved (with a Normal Event when they changed). */
async function resolveConditions(
  deps: Pick<EnvironmentReconcilerDeps, 'kc' | 'events'>,
  env: EnvironmentCr,
  now: Date,
): Promise<void> {
  const conditions = parseConditions(env.status?.conditions);
  const next = resolved(conditions, now);
  if (sameConditions(conditions, next)) return;
  await writeConditions(deps, env, next);
  await deps.events.event(
    env,
    'Normal',
    EnvironmentEventReason.ErrorOccurredResolved,
    'the Environment is reconciled',
  );
}

/** One reconcile of the Environment `key`. */
export async function reconcileEnvironment(
  deps: EnvironmentReconcilerDeps,
  key: string,
  logger: Logger,
): Promise<ReconcileResult | undefined> {
  const { namespace = '', name } = splitObjectKey(key);
  const env = deps.environments.get(namespace, name);
  if (!env || env.metadata.deletionTimestamp) {
    await deleteGenerated(deps, namespace, name, undefined, logger);
    return undefined;
  }
  const now = deps.now();
  const desired = desiredOf(deps, env);
  if (desired.kind === 'error') return reportError(deps, env, now, desired);
  if (desired.kind === 'wait') return undefined; // the claim's events bring us back
  if (desired.kind === 'none') {
    await deleteGenerated(deps, namespace, name, env, logger);
  } else {
    const error = await deployToCluster(deps, env, desired, logger);
    if (error === 'foreign') return undefined;
    if (error) return reportError(deps, env, now, error);
  }
  await resolveConditions(deps, env, now);
  return undefined;
}

/** The Environment reconciler over the context and the feature's informers. */
export function createEnvironmentReconciler(
  ctx: AppStudioContext,
  caches: Omit<EnvironmentReconcilerDeps, 'kc' | 'events' | 'now' | 'shardLabels'>,
): Reconciler {
  const deps: EnvironmentReconcilerDeps = { ...stepContext(ctx), ...caches };
  return (key, { logger }) => reconcileEnvironment(deps, key, logger);
}
