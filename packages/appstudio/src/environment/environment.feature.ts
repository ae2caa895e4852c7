/**
 * Environment → `managed-environment-<env>` GitOpsDeploymentManagedEnvironment (README: "Environment").
 *
 * A reconcile, for one Environment:
 * - gone: its ManagedEnvironment is deleted (also when only the legacy ownerReference form names it);
 * - claim and credentials both set: InvalidEnvironment;
 * - a claim: missing → DeploymentTargetClaimNotFound; not Bound → wait (no condition); Bound → the bound
 *   DeploymentTarget's cluster (missing → DeploymentTargetNotFound);
 * - credentials: that cluster; neither: nothing to deploy to, so a ManagedEnvironment we generated earlier
 *   is deleted (a fix: the original left it behind);
 * - the referenced Secret must exist (SecretNotFound; the ManagedEnvironment is left as it is);
 * - then the ManagedEnvironment is applied (controller ownerReference to the Environment) and existing
 *   conditions are resolved. A healthy Environment that never failed has no conditions at all.
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
  EnvironmentTargetMessage,
  Kinds,
  LEGACY_ENVIRONMENT_OWNER_API_VERSION,
  managedEnvironmentName,
  managedEnvironmentSecretName,
  SecretType,
} from '@gitops/api';
import {
  anyOf,
  deleteIfExists,
  deletionStarted,
  generationChanged,
  getObject,
  type Informer,
  jsonEqual,
  KubeApiError,
  type KubeObject,
  type Logger,
  objectKey,
  patchStatus,
  type ReconcileResult,
  relist,
  serverSideApply,
  splitObjectKey,
} from '@gitops/shared';
import { parseConditions, resolved, sameConditions, withError } from '../condition-pair.ts';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import { byClaimOfEnvironment, byCredentialsSecret, byTargetSecret, claimsOfTargetIn } from '../indexes.ts';
import { type AppStudioCr, type Json, ownerReferences, record, specOf, strings, text } from '../objects.ts';
import {
  boundTargetOf,
  type ClaimCr,
  claimNameOfEnvironment,
  credentialsOf,
  isBound,
  type TargetCr,
} from '../target-matching.ts';

const Environment = AppStudioKinds.Environment;
const ManagedEnvironment = Kinds.GitOpsDeploymentManagedEnvironment;

/** While a claim or a Secret is missing, look again this often (their kinds are not all watched). */
const RECHECK_MS = 30_000;

/** The Environment a ManagedEnvironment belongs to: a controller ownerReference, or the original's legacy form. */
export function environmentOwnerOf(managedEnvironment: KubeObject): string | undefined {
  for (const ref of ownerReferences(managedEnvironment)) {
    if (ref.kind !== Environment.kind) continue;
    if (ref.apiVersion === Environment.apiVersion || ref.apiVersion === LEGACY_ENVIRONMENT_OWNER_API_VERSION)
      return ref.name;
  }
  return undefined;
}

export interface ManagedEnvironmentSpec {
  apiURL: string;
  credentialsSecret: string;
  allowInsecureSkipTLSVerify: boolean;
  namespaces?: string[];
  clusterResources: boolean;
}

type Desired =
  | { kind: 'error'; reason: string; message: string; requeueAfter?: number }
  | { kind: 'wait' }
  | { kind: 'none' }
  /** `viaClaim`: the Secret is the target's, copied when it is not of the managed-environment type. */
  | { kind: 'cluster'; spec: ManagedEnvironmentSpec; viaClaim?: boolean };

type EnvironmentCr = AppStudioCr<'Environment'>;

export interface EnvironmentFeatureDeps {
  environments: Informer<EnvironmentCr>;
  managedEnvironments: Informer<KubeObject>;
  /** Secrets of type managed-gitops.redhat.com/managed-environment (all namespaces). */
  secrets: Informer<KubeObject>;
  /** Opaque Secrets (all namespaces): a target's Secret made by a SpaceRequest is one. */
  opaqueSecrets: Informer<KubeObject>;
  claims: Informer<ClaimCr>;
  targets: Informer<TargetCr>;
}

export function createEnvironmentFeature(
  ctx: AppStudioContext,
  deps: EnvironmentFeatureDeps,
): AppStudioController {
  const { kc, events } = ctx;

  async function desiredOf(env: EnvironmentCr): Promise<Desired> {
    const namespace = env.metadata.namespace ?? '';
    const claimName = claimNameOfEnvironment(env);
    const unstable = env.spec?.unstableConfigurationFields;
    if (claimName && unstable !== undefined)
      return {
        kind: 'error',
        reason: EnvironmentReason.InvalidEnvironment,
        message: EnvironmentMessage.BothTargets,
      };
    if (claimName) {
      const claim = deps.claims.get(namespace, claimName);
      if (!claim)
        return {
          kind: 'error',
          reason: EnvironmentReason.DeploymentTargetClaimNotFound,
          message: EnvironmentMessage.ClaimNotFound,
          requeueAfter: RECHECK_MS,
        };
      if (!isBound(claim)) return { kind: 'wait' };
      const bound = boundTargetOf(claim, deps.targets.list(namespace));
      if (bound.kind !== 'found')
        return {
          kind: 'error',
          reason: EnvironmentReason.DeploymentTargetNotFound,
          message:
            bound.kind === 'missing'
              ? EnvironmentTargetMessage.Missing
              : bound.kind === 'error'
                ? EnvironmentTargetMessage.Unreadable
                : EnvironmentTargetMessage.NotFound,
        };
      const target = credentialsOf(bound.target);
      return {
        kind: 'cluster',
        viaClaim: true,
        spec: {
          apiURL: target.apiURL,
          credentialsSecret: target.clusterCredentialsSecret,
          allowInsecureSkipTLSVerify: target.allowInsecureSkipTLSVerify,
          ...(target.defaultNamespace ? { namespaces: [target.defaultNamespace] } : {}),
          clusterResources: false,
        },
      };
    }
    if (unstable !== undefined) {
      const credentials = unstable.kubernetesCredentials;
      const namespaces = credentials?.namespaces ?? [];
      return {
        kind: 'cluster',
        spec: {
          apiURL: credentials?.apiURL ?? '',
          credentialsSecret: credentials?.clusterCredentialsSecret ?? '',
          allowInsecureSkipTLSVerify: credentials?.allowInsecureSkipTLSVerify === true,
          ...(namespaces.length > 0 ? { namespaces } : {}),
          clusterResources: credentials?.clusterResources === true,
        },
      };
    }
    return { kind: 'none' };
  }

  /** Deletes `managed-environment-<name>` if it belongs to the Environment `name` (never someone else's). */
  async function deleteGenerated(
    namespace: string,
    name: string,
    env: EnvironmentCr | undefined,
    logger: Logger,
  ) {
    const generatedName = managedEnvironmentName(name);
    const existing = deps.managedEnvironments.get(namespace, generatedName);
    if (!existing || environmentOwnerOf(existing) !== name) return;
    if (
      await deleteIfExists(
        kc,
        { ...ManagedEnvironment, namespace, name: generatedName },
        { uid: existing.metadata.uid },
      )
    ) {
      logger.info({ managedEnvironment: generatedName }, 'ManagedEnvironment deleted');
      if (env)
        await events.event(
          env,
          'Normal',
          EnvironmentEventReason.ManagedEnvironmentDeleted,
          `ManagedEnvironment ${generatedName} deleted: the Environment no longer targets a cluster`,
        );
    }
  }

  async function writeConditions(
    env: EnvironmentCr,
    next: ReturnType<typeof parseConditions>,
  ): Promise<void> {
    const current = parseConditions(env.status?.conditions);
    if (sameConditions(current, next)) return;
    await patchStatus(
      kc,
      { ...Environment, namespace: env.metadata.namespace, name: env.metadata.name },
      { metadata: { resourceVersion: env.metadata.resourceVersion }, status: { conditions: next } },
      { fieldManager: APPSTUDIO_FIELD_MANAGER },
    );
  }

  async function reconcile(
    key: string,
    { logger }: { logger: Logger },
  ): Promise<ReconcileResult | undefined> {
    const { namespace = '', name } = splitObjectKey(key);
    const env = deps.environments.get(namespace, name);
    if (!env || env.metadata.deletionTimestamp) {
      await deleteGenerated(namespace, name, undefined, logger);
      return undefined;
    }
    const now = ctx.now();
    const conditions = parseConditions(env.status?.conditions);
    const fail = async (reason: string, message: string, requeueAfter?: number) => {
      const next = withError(conditions, reason, message, now);
      if (!sameConditions(conditions, next)) {
        await writeConditions(env, next);
        await events.event(env, 'Warning', EnvironmentEventReason.ErrorOccurred, message);
      }
      return requeueAfter === undefined ? undefined : { requeueAfter };
    };

    const desired = await desiredOf(env);
    if (desired.kind === 'error') return fail(desired.reason, desired.message, desired.requeueAfter);
    if (desired.kind === 'wait') return undefined; // the claim's events bring us back
    if (desired.kind === 'none') {
      await deleteGenerated(namespace, name, env, logger);
    } else {
      const secretName = desired.spec.credentialsSecret;
      // Secrets of the managed-environment and Opaque types are cached; any other type is read (the core
      // controller reports a wrong type on the ManagedEnvironment, as in the original).
      const secret = secretName
        ? (deps.secrets.get(namespace, secretName) ??
          deps.opaqueSecrets.get(namespace, secretName) ??
          (await getObject(kc, { ...CoreKinds.Secret, namespace, name: secretName })))
        : undefined;
      if (!secret) {
        await deleteSecretCopy(env, logger);
        return fail(
          EnvironmentReason.SecretNotFound,
          EnvironmentMessage.secretNotFound(secretName),
          RECHECK_MS,
        );
      }
      if (desired.viaClaim && secret.type !== SecretType.ManagedEnvironment) {
        await applySecretCopy(env, secret);
        desired.spec.credentialsSecret = managedEnvironmentSecretName(name);
      }
      const applied = await applyManagedEnvironment(env, desired.spec, logger);
      if (applied === 'foreign') return undefined;
      // Admission refused what this Environment asks for (e.g. an apiURL the Environment's own rule lets
      // through but a ManagedEnvironment's does not): the user's to fix, so a condition and no retry.
      if (typeof applied === 'object')
        return fail(
          EnvironmentReason.InvalidEnvironment,
          EnvironmentMessage.managedEnvironmentRejected(managedEnvironmentName(name), applied.rejected),
        );
    }
    const next = resolved(conditions, now);
    if (!sameConditions(conditions, next)) {
      await writeConditions(env, next);
      await events.event(
        env,
        'Normal',
        EnvironmentEventReason.ErrorOccurredResolved,
        'the Environment is reconciled',
      );
    }
    return undefined;
  }

  /** `managed-environment-secret-<env>`: the target's Secret data under the managed-environment type. */
  async function applySecretCopy(env: EnvironmentCr, source: KubeObject): Promise<void> {
    const namespace = env.metadata.namespace ?? '';
    const name = managedEnvironmentSecretName(env.metadata.name);
    const existing = deps.secrets.get(namespace, name);
    const data = record(source.data);
    if (
      existing &&
      jsonEqual(record(existing.data), data) &&
      existing.metadata.labels?.[AppStudioLabel.EnvironmentSecret] === env.metadata.name
    )
      return;
    await serverSideApply(
      kc,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name,
          namespace,
          labels: { ...ctx.shardLabels, [AppStudioLabel.EnvironmentSecret]: env.metadata.name },
          ownerReferences: [controllerReference(Environment, env, { blockOwnerDeletion: true })],
        },
        type: SecretType.ManagedEnvironment,
        data,
      },
      { fieldManager: APPSTUDIO_FIELD_MANAGER, force: true },
    );
  }

  /** Deletes the Secret copy of the Environment, if we made one. */
  async function deleteSecretCopy(env: EnvironmentCr, logger: Logger): Promise<void> {
    const namespace = env.metadata.namespace ?? '';
    const name = managedEnvironmentSecretName(env.metadata.name);
    const existing = deps.secrets.get(namespace, name);
    if (!existing || existing.metadata.labels?.[AppStudioLabel.EnvironmentSecret] !== env.metadata.name)
      return;
    if (await deleteIfExists(kc, { ...CoreKinds.Secret, namespace, name }, { uid: existing.metadata.uid }))
      logger.info({ secret: name }, "Secret copy deleted: the target's Secret is gone");
  }

  /** Server-side applies the ManagedEnvironment; 'foreign' when an object of that name belongs to someone else. */
  async function applyManagedEnvironment(env: EnvironmentCr, spec: ManagedEnvironmentSpec, logger: Logger) {
    const namespace = env.metadata.namespace ?? '';
    const name = managedEnvironmentName(env.metadata.name);
    const existing = deps.managedEnvironments.get(namespace, name);
    if (existing) {
      const controller = ownerReferences(existing).find((r) => r.controller);
      const ours = environmentOwnerOf(existing) === env.metadata.name;
      if (controller && !ours) {
        logger.warn(
          { managedEnvironment: name },
          'a ManagedEnvironment of that name is controlled by another object; left alone',
        );
        return 'foreign' as const;
      }
      if (
        jsonEqual(normalisedSpec(specOf(existing)), normalisedSpec(spec as unknown as Json)) &&
        hasOurOwnerReference(existing, env)
      )
        return 'unchanged' as const;
    }
    const object: KubeObject = {
      apiVersion: ManagedEnvironment.apiVersion,
      kind: ManagedEnvironment.kind,
      metadata: {
        name,
        namespace,
        labels: { ...ctx.shardLabels },
        ownerReferences: [controllerReference(Environment, env, { blockOwnerDeletion: true })],
      },
      spec: { ...spec },
    };
    let live: KubeObject;
    try {
      live = await serverSideApply(kc, object, { fieldManager: APPSTUDIO_FIELD_MANAGER, force: true });
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 422)
        return { rejected: err.statusMessage.slice(0, 1024) };
      throw err;
    }
    if (existing && live.metadata.resourceVersion === existing.metadata.resourceVersion)
      return 'unchanged' as const;
    await events.event(
      env,
      'Normal',
      existing
        ? EnvironmentEventReason.ManagedEnvironmentUpdated
        : EnvironmentEventReason.ManagedEnvironmentCreated,
      `ManagedEnvironment ${name} ${existing ? 'updated' : 'created'}`,
    );
    return existing ? ('updated' as const) : ('created' as const);
  }

  const environmentsOfClaim = byClaimOfEnvironment(deps.environments);
  const environmentsWithSecret = byCredentialsSecret(deps.environments);
  const targetsWithSecret = byTargetSecret(deps.targets);
  const claimsOfTarget = claimsOfTargetIn(deps.claims);
  const environmentsOfTarget = (target: TargetCr) =>
    claimsOfTarget(target).flatMap((claim) =>
      environmentsOfClaim(claim.metadata.namespace, claim.metadata.name),
    );
  /**
   * The Environments a Secret may be built into: named by their credentials, by a target bound to their
   * claim, or by the Secret's environment label (a copy of a target's Secret).
   */
  const environmentsOfSecret = (secret: KubeObject) => {
    const { namespace, name, labels } = secret.metadata;
    const labelled = labels?.[AppStudioLabel.EnvironmentSecret];
    const copiedFor = labelled ? deps.environments.get(namespace, labelled) : undefined;
    return [
      ...environmentsWithSecret(namespace, name),
      ...targetsWithSecret(namespace, name).flatMap(environmentsOfTarget),
      ...(copiedFor ? [copiedFor] : []),
    ].map(objectKey);
  };
  const specOrRelist = { predicates: [anyOf(relist, generationChanged)] };

  return (
    newAppStudioController(ctx, 'appstudio-environment')
      // Our own status writes change only status; everything else (spec, deletion, a relist) is looked at.
      .for(deps.environments, { predicates: [anyOf(relist, generationChanged, deletionStarted)] })
      .watches(
        deps.managedEnvironments,
        (me) => {
          const owner = environmentOwnerOf(me);
          return owner ? [`${me.metadata.namespace}/${owner}`] : [];
        },
        specOrRelist,
      )
      .watches(deps.secrets, environmentsOfSecret)
      .watches(deps.opaqueSecrets, environmentsOfSecret)
      .watches(deps.claims, (claim) =>
        environmentsOfClaim(claim.metadata.namespace, claim.metadata.name).map(objectKey),
      )
      .watches<TargetCr>(deps.targets, (target) => environmentsOfTarget(target).map(objectKey), specOrRelist)
      .complete(quietInTerminatingNamespace(reconcile))
  );
}

function hasOurOwnerReference(existing: KubeObject, env: KubeObject): boolean {
  return ownerReferences(existing).some(
    (r) =>
      r.apiVersion === Environment.apiVersion &&
      r.kind === Environment.kind &&
      r.uid === env.metadata.uid &&
      r.controller,
  );
}

/** The ManagedEnvironment spec fields we set, with absent and empty treated alike. */
function normalisedSpec(spec: Json): Json {
  return {
    apiURL: text(spec.apiURL),
    credentialsSecret: text(spec.credentialsSecret),
    allowInsecureSkipTLSVerify: spec.allowInsecureSkipTLSVerify === true,
    namespaces: strings(spec.namespaces),
    clusterResources: spec.clusterResources === true,
  };
}

/** Secrets the Environment controller watches: those of the managed-environment type. */
export const environmentSecretFieldSelector = `type=${SecretType.ManagedEnvironment}`;
/** Opaque Secrets: a target's Secret of a SpaceRequest is one (it gets copied). */
export const opaqueSecretFieldSelector = 'type=Opaque';
