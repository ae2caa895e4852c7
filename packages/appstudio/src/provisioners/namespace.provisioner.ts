/**
 * The `managed-gitops.redhat.com/namespace` provisioner (beyond the original, appstudio README promise 7; README:
 * "Provisioners"): a Pending claim of such a class gets, on the cluster the service runs in,
 * - a namespace `<claim namespace>-<claim>` (over 63 characters: its first 54, `-`, 8 hex of the SHA-256 of
 *   the full name), labelled `managed-gitops.redhat.com/provisioned-for-claim=<claim uid>` and annotated
 *   `managed-gitops.redhat.com/provisioned-for-claim-ref=<claim namespace>/<claim>`;
 * - a ServiceAccount `gitops-deployer` there, bound to the ClusterRole `admin` in that namespace only;
 * - a Secret `<claim>-dt-kubeconfig` (type managed-gitops.redhat.com/managed-environment) in the claim's
 *   namespace with a kubeconfig for that ServiceAccount (a TokenRequest token, asked for
 *   GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME, default 1 year; namespace-token-renewal.ts renews it);
 * - the DeploymentTarget `<claim>-dt` (claimRef = the claim, Available, annotated
 *   `managed-gitops.redhat.com/provisioned-for-claim-uid=<claim uid>`), which the binder then binds.
 * The kubeconfig's API server URL and CA come from configuration (GITOPS_NAMESPACE_PROVISIONER_API_URL,
 * GITOPS_NAMESPACE_PROVISIONER_CA_FILE), by default those the service itself uses.
 *
 * Reclaim (Delete) deletes the namespace, and then the Secret, only for a target that is provably this
 * provisioner's (`ownedNamespaceOf`): the target passes `claimOfProvisionedTarget` (the check token renewal
 * uses) and the namespace is `provisionedForClaim` that claim, the claim's uid taken from the target's
 * provisioned-for-claim-uid annotation when the namespace names the claim (the claim is often gone by now), else
 * from the claim itself while it exists. Anything else (a target a user wrote, one made before the annotations
 * whose claim is gone, one whose name collides with another claim's namespace) is done at once with nothing
 * deleted, and says so in the log. Reclaim is done when the namespace is gone.
 */
import { createHash } from 'node:crypto';
import {
  AppStudioKinds,
  AppStudioLabel,
  CoreKinds,
  DeploymentTargetAnnotation,
  DeploymentTargetMessage,
  DeploymentTargetPhase,
  PROVISIONED_FOR_CLAIM_REF_ANNOTATION,
  Provisioner as ProvisionerName,
  SecretType,
} from '@gitops/api';
import {
  addGaugeCollector,
  collectionPath,
  deleteIfExists,
  formatDuration,
  getObject,
  HttpMethod,
  isAlreadyExists,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  type Registry,
} from '@gitops/shared';
import {
  annotationOf,
  type ClaimCr,
  type ClassCr,
  claimRefOf,
  classNameOf,
  credentialsOf,
  type TargetCr,
} from '../target-matching.ts';
import { createObject, setPhase } from '../writes.ts';
import {
  DEPROVISION_TIMEOUT_MS,
  type Deprovisioned,
  type Provisioner,
  provisionedTargetLabels,
} from './provisioner.ts';

const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;
export const DEPLOYER_SERVICE_ACCOUNT = 'gitops-deployer';
/** GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME / _TOKEN_RENEW_BEFORE / _TOKEN_CHECK_INTERVAL defaults. */
export const DEFAULT_TOKEN_LIFETIME_MS = 8760 * 3_600_000;
export const DEFAULT_TOKEN_RENEW_BEFORE_MS = 720 * 3_600_000;
export const DEFAULT_TOKEN_CHECK_INTERVAL_MS = 3_600_000;
/** The least a TokenRequest may ask for (the API server refuses less). */
export const MIN_TOKEN_LIFETIME_MS = 600_000;
/** Namespace deletion has no watch here: look again this often. */
const NAMESPACE_RECHECK_MS = 2_000;

export interface NamespaceProvisionerOptions {
  /** The API server URL the kubeconfig names (default: the service's own). */
  apiURL?: string;
  /** PEM of the API server's CA (default: the service's own; none = the system's roots). */
  caPem?: string;
  /** How long the ServiceAccount token is asked for (default 8760h; at least 10 min). */
  tokenLifetimeMs?: number;
  /** A token expiring within this long is renewed (default 720h; shorter than the lifetime). */
  tokenRenewBeforeMs?: number;
  /** How often the tokens are looked at (default 1h). */
  tokenCheckIntervalMs?: number;
}

/**
 * What is wrong with the token times of `options` (each a sentence naming the variable), or nothing. The
 * backend's config loader reports the same at start (GITOPS_NAMESPACE_PROVISIONER_TOKEN_*).
 */
export function tokenTimesProblem(options: NamespaceProvisionerOptions): string | undefined {
  const lifetime = options.tokenLifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS;
  const renewBefore = options.tokenRenewBeforeMs ?? DEFAULT_TOKEN_RENEW_BEFORE_MS;
  const interval = options.tokenCheckIntervalMs ?? DEFAULT_TOKEN_CHECK_INTERVAL_MS;
  if (!(lifetime >= MIN_TOKEN_LIFETIME_MS))
    return `GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME must be at least 10m (a TokenRequest asks for 600 s or more)`;
  if (!(renewBefore > 0 && renewBefore < lifetime))
    return `GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE (${formatDuration(renewBefore)}) must be shorter than GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME (${formatDuration(lifetime)}), or every token would be renewed at every check`;
  if (!(interval > 0)) return 'GITOPS_NAMESPACE_PROVISIONER_TOKEN_CHECK_INTERVAL must be positive';
  return undefined;
}

/** The kubeconfig (JSON) of a provisioned namespace's ServiceAccount token: provisioning and renewal write it. */
export function deployerKubeconfig(
  cluster: { apiURL: string; caPem?: string },
  namespace: string,
  token: string,
): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'target',
        cluster: {
          server: cluster.apiURL,
          ...(cluster.caPem
            ? { 'certificate-authority-data': Buffer.from(cluster.caPem).toString('base64') }
            : {}),
        },
      },
    ],
    users: [{ name: DEPLOYER_SERVICE_ACCOUNT, user: { token } }],
    contexts: [{ name: 'target', context: { cluster: 'target', user: DEPLOYER_SERVICE_ACCOUNT, namespace } }],
    'current-context': 'target',
  });
}

/** A TokenRequest for the `gitops-deployer` ServiceAccount of `namespace`, asked for `lifetimeMs`. */
export async function requestDeployerToken(
  kc: KubeConfig,
  namespace: string,
  lifetimeMs: number,
  signal?: AbortSignal,
): Promise<string> {
  const answer = (await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${DEPLOYER_SERVICE_ACCOUNT}/token`,
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: Math.round(lifetimeMs / 1000) },
    },
    signal,
  })) as { status?: { token?: string } };
  const token = answer.status?.token;
  if (!token)
    throw new Error(`the TokenRequest of ${namespace}/${DEPLOYER_SERVICE_ACCOUNT} returned no token`);
  return token;
}

/** The token of the kubeconfig in a provisioned kubeconfig Secret (its `data`), or undefined. */
export function tokenOfKubeconfigSecret(secret: KubeObject | undefined): string | undefined {
  const data = (secret as { data?: Record<string, string> } | undefined)?.data?.kubeconfig;
  if (!data) return undefined;
  try {
    const token = (
      JSON.parse(Buffer.from(data, 'base64').toString()) as { users?: { user?: { token?: unknown } }[] }
    ).users?.[0]?.user?.token;
    return typeof token === 'string' ? token : undefined;
  } catch {
    return undefined;
  }
}

export const provisionedNamespaceName = (namespace: string, claim: string): string => {
  const full = `${namespace}-${claim}`;
  if (full.length <= 63) return full;
  return `${full.slice(0, 54).replace(/-+$/, '')}-${createHash('sha256').update(full).digest('hex').slice(0, 8)}`;
};
export const kubeconfigSecretName = (claim: string): string => `${claim}-dt-kubeconfig`;

/**
 * The claim name when `target` is, by its own fields, one this provisioner made for that claim: annotated
 * provisioned-by this provisioner, named `<claim>-dt` after its claimRef, naming the Secret
 * `<claim>-dt-kubeconfig` and the namespace derived from its own namespace and that claim. Anyone who may
 * write a DeploymentTarget can write such fields: what is done with the namespace also needs
 * `provisionedForClaim`.
 */
export function claimOfProvisionedTarget(target: TargetCr): string | undefined {
  if (annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) !== ProvisionerName.Namespace)
    return undefined;
  const claim = claimRefOf(target);
  const namespace = target.metadata.namespace ?? '';
  const { defaultNamespace, clusterCredentialsSecret } = credentialsOf(target);
  if (
    !claim ||
    target.metadata.name !== `${claim}-dt` ||
    clusterCredentialsSecret !== kubeconfigSecretName(claim) ||
    defaultNamespace !== provisionedNamespaceName(namespace, claim)
  )
    return undefined;
  return claim;
}

/**
 * Whether `namespace` was provisioned for the claim `claim.namespace/claim.name` of uid `claim.uid`: its
 * label provisioned-for-claim is that uid (only the service writes it, from the claim it provisions for), and
 * its annotation provisioned-for-claim-ref, when it has one (namespaces made before it existed do not), names
 * that claim. A uid is unique, so with the uid of the live claim the label alone is proof; a uid read from
 * anything a user can write (a target's annotation) is proof only together with the annotation.
 */
export function provisionedForClaim(
  namespace: KubeObject | undefined,
  claim: { namespace: string; name: string; uid: string | undefined },
): boolean {
  if (!namespace || !claim.uid) return false;
  const ref = namespace.metadata.annotations?.[PROVISIONED_FOR_CLAIM_REF_ANNOTATION];
  return (
    namespace.metadata.labels?.[AppStudioLabel.ProvisionedForClaim] === claim.uid &&
    (ref === undefined || ref === `${claim.namespace}/${claim.name}`)
  );
}

async function createIfMissing(kc: KubeConfig, path: string, body: Record<string, unknown>): Promise<void> {
  try {
    await kubeRequest(kc, { method: HttpMethod.POST, path, body });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
}

/** The API server URL and CA the provisioner's kubeconfigs name: configured, or the service's own. */
export function provisionedCluster(
  kc: KubeConfig,
  options: NamespaceProvisionerOptions,
): { apiURL: string; caPem?: string } {
  const own = ownCluster(kc);
  const caPem = options.caPem ?? own.caPem;
  return { apiURL: options.apiURL || own.apiURL, ...(caPem ? { caPem } : {}) };
}

/** The API server URL and CA of the service's own kubeconfig. */
export function ownCluster(kc: KubeConfig): { apiURL: string; caPem?: string } {
  const cluster = kc.getCurrentCluster();
  const caPem = cluster?.caData ? Buffer.from(cluster.caData, 'base64').toString() : undefined;
  return { apiURL: cluster?.server ?? 'https://kubernetes.default.svc', ...(caPem ? { caPem } : {}) };
}

export function createNamespaceProvisioner(
  ctx: { kc: KubeConfig; shardLabels: Readonly<Record<string, string>>; now: () => Date },
  options: NamespaceProvisionerOptions = {},
): Provisioner {
  const { kc } = ctx;
  const cluster = provisionedCluster(kc, options);
  const { apiURL } = cluster;
  const lifetimeMs = options.tokenLifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS;

  async function provision(claim: ClaimCr, _class: ClassCr, logger: Logger): Promise<string | undefined> {
    const claimNamespace = claim.metadata.namespace ?? '';
    const targetName = `${claim.metadata.name}-dt`;
    if (await getObject(kc, { ...Target, namespace: claimNamespace, name: targetName })) return undefined;
    const namespace = provisionedNamespaceName(claimNamespace, claim.metadata.name);
    const existing = await getObject(kc, { ...CoreKinds.Namespace, name: namespace });
    if (existing && existing.metadata.labels?.[AppStudioLabel.ProvisionedForClaim] !== claim.metadata.uid)
      return DeploymentTargetMessage.namespaceTaken(namespace);
    if (existing?.metadata.deletionTimestamp) return undefined; // an earlier one still going; its event brings us back
    if (!existing)
      await createIfMissing(kc, '/api/v1/namespaces', {
        metadata: {
          name: namespace,
          labels: { [AppStudioLabel.ProvisionedForClaim]: claim.metadata.uid ?? '' },
          annotations: { [PROVISIONED_FOR_CLAIM_REF_ANNOTATION]: `${claimNamespace}/${claim.metadata.name}` },
        },
      });
    await createIfMissing(kc, collectionPath({ ...CoreKinds.ServiceAccount.resource, namespace }), {
      metadata: { name: DEPLOYER_SERVICE_ACCOUNT },
    });
    await createIfMissing(kc, collectionPath({ ...CoreKinds.RoleBinding.resource, namespace }), {
      metadata: { name: `${DEPLOYER_SERVICE_ACCOUNT}-admin` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
      subjects: [{ kind: 'ServiceAccount', name: DEPLOYER_SERVICE_ACCOUNT, namespace }],
    });
    const token = await requestDeployerToken(kc, namespace, lifetimeMs);
    const secretName = kubeconfigSecretName(claim.metadata.name);
    await deleteIfExists(kc, { ...CoreKinds.Secret, namespace: claimNamespace, name: secretName });
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: collectionPath({ ...CoreKinds.Secret.resource, namespace: claimNamespace }),
      body: {
        metadata: { name: secretName, labels: { ...ctx.shardLabels } },
        type: SecretType.ManagedEnvironment,
        stringData: { kubeconfig: deployerKubeconfig(cluster, namespace, token) },
      },
    });
    const target = await createObject<TargetCr>(kc, Target, claimNamespace, {
      metadata: {
        name: targetName,
        labels: provisionedTargetLabels(ctx.shardLabels, claim),
        annotations: {
          [DeploymentTargetAnnotation.ProvisionedBy]: ProvisionerName.Namespace,
          [DeploymentTargetAnnotation.ProvisionedForClaimUid]: claim.metadata.uid ?? '',
        },
      },
      spec: {
        deploymentTargetClassName: classNameOf(claim),
        kubernetesCredentials: {
          defaultNamespace: namespace,
          apiURL,
          clusterCredentialsSecret: secretName,
          allowInsecureSkipTLSVerify: false,
        },
        claimRef: claim.metadata.name,
      },
    });
    await setPhase(kc, Target, target, DeploymentTargetPhase.Available);
    logger.info({ namespace, target: targetName }, 'namespace provisioned for the claim');
    return undefined;
  }

  /**
   * The namespace `target` names when it is provably the one this provisioner made for the target's claim
   * (undefined: absent), or 'not-owned'. The claim's uid: the target's provisioned-for-claim-uid when the
   * namespace's provisioned-for-claim-ref names the claim (a user can write the former, only the service the
   * latter), else the live claim's (a namespace made before the annotations, or a target without one).
   */
  async function ownedNamespaceOf(
    target: TargetCr,
    claim: string,
  ): Promise<KubeObject | 'not-owned' | undefined> {
    const claimNamespace = target.metadata.namespace ?? '';
    const name = provisionedNamespaceName(claimNamespace, claim);
    const namespace = await getObject(kc, { ...CoreKinds.Namespace, name });
    if (!namespace) return undefined;
    const named = namespace.metadata.annotations?.[PROVISIONED_FOR_CLAIM_REF_ANNOTATION] !== undefined;
    const uid =
      (named ? annotationOf(target, DeploymentTargetAnnotation.ProvisionedForClaimUid) : undefined) ||
      (await getObject(kc, { ...Claim, namespace: claimNamespace, name: claim }))?.metadata.uid;
    return provisionedForClaim(namespace, { namespace: claimNamespace, name: claim, uid })
      ? namespace
      : 'not-owned';
  }

  async function deprovision(target: TargetCr, _class: ClassCr, logger: Logger): Promise<Deprovisioned> {
    const claim = claimOfProvisionedTarget(target);
    const { defaultNamespace, clusterCredentialsSecret } = credentialsOf(target);
    if (!claim) {
      // Not a target this provisioner made (a user wrote its annotation): nothing of it is ours to delete.
      logger.warn(
        { namespace: defaultNamespace, secret: clusterCredentialsSecret },
        'not a target the namespace provisioner made for its claimRef: its namespace and Secret are left alone',
      );
      return { kind: 'gone' };
    }
    const namespace = await ownedNamespaceOf(target, claim);
    if (namespace === 'not-owned') {
      logger.warn(
        { namespace: defaultNamespace, claim },
        "the namespace is not provably the one provisioned for this claim (another claim's, or the claim is gone and the target predates the provisioned-for-claim-uid annotation): namespace and Secret left alone",
      );
      return { kind: 'gone' };
    }
    if (namespace) {
      if (!namespace.metadata.deletionTimestamp) {
        await deleteIfExists(
          kc,
          { ...CoreKinds.Namespace, name: defaultNamespace },
          { uid: namespace.metadata.uid },
        );
        logger.info({ namespace: defaultNamespace }, 'provisioned namespace deleted');
        return { kind: 'waiting', requeueAfter: NAMESPACE_RECHECK_MS };
      }
      const since = ctx.now().getTime() - Date.parse(namespace.metadata.deletionTimestamp);
      return since > DEPROVISION_TIMEOUT_MS
        ? { kind: 'failed', requeueAfter: NAMESPACE_RECHECK_MS }
        : { kind: 'waiting', requeueAfter: NAMESPACE_RECHECK_MS };
    }
    await deleteIfExists(kc, {
      ...CoreKinds.Secret,
      namespace: target.metadata.namespace,
      name: clusterCredentialsSecret,
    });
    return { kind: 'gone' };
  }

  return { name: ProvisionerName.Namespace, provision, deprovision };
}

/** The `exp` (seconds since the epoch) of a JWT, or undefined when it has none or is no JWT. */
export function jwtExpiry(token: string): number | undefined {
  try {
    const payload: unknown = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString());
    const exp = payload && typeof payload === 'object' ? (payload as { exp?: unknown }).exp : undefined;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `gitops_namespace_provisioner_token_expiry_timestamp_seconds{deployment_target_namespace, deployment_target}`:
 * when the token in the kubeconfig Secret of each DeploymentTarget this provisioner made expires (the JWT's
 * `exp`), computed from the informers' caches when /metrics is scraped, so it survives restarts and costs nothing
 * between scrapes. Not `namespace`: the Prometheus Operator gives every series of a ServiceMonitor's target the
 * label `namespace` (the Service's), which would rename ours to `exported_namespace`.
 */
export function registerProvisionedTokenExpiry(
  registry: Registry,
  caches: {
    targets: { list(): TargetCr[] };
    secrets: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  },
): void {
  addGaugeCollector(
    registry,
    {
      name: 'gitops_namespace_provisioner_token_expiry_timestamp_seconds',
      help: "Expiry time (Unix seconds) of the ServiceAccount token in each namespace-provisioned DeploymentTarget's kubeconfig Secret",
      labelNames: ['deployment_target_namespace', 'deployment_target'],
    },
    (gauge) => {
      gauge.reset();
      for (const target of caches.targets.list()) {
        if (annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) !== ProvisionerName.Namespace)
          continue;
        const { clusterCredentialsSecret } = credentialsOf(target);
        const token = tokenOfKubeconfigSecret(
          caches.secrets.get(target.metadata.namespace, clusterCredentialsSecret),
        );
        const exp = token === undefined ? undefined : jwtExpiry(token);
        if (exp !== undefined)
          gauge.set(
            {
              deployment_target_namespace: target.metadata.namespace ?? '',
              deployment_target: target.metadata.name,
            },
            exp,
          );
      }
    },
  );
}
