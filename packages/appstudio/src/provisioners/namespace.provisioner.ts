/**
 * The `managed-gitops.redhat.com/namespace` provisioner (beyond the original, design §7; README:
 * "Provisioners"): a Pending claim of such a class gets, on the cluster the service runs in,
 * - a namespace `<claim namespace>-<claim>` (over 63 characters: its first 54, `-`, 8 hex of the SHA-256 of
 *   the full name), labelled `managed-gitops.redhat.com/provisioned-for-claim=<claim uid>`;
 * - a ServiceAccount `gitops-deployer` there, bound to the ClusterRole `admin` in that namespace only;
 * - a Secret `<claim>-dt-kubeconfig` (type managed-gitops.redhat.com/managed-environment) in the claim's
 *   namespace with a kubeconfig for that ServiceAccount (a TokenRequest token, 1 year asked for);
 * - the DeploymentTarget `<claim>-dt` (claimRef = the claim, Available), which the binder then binds.
 * The kubeconfig's API server URL and CA come from configuration (GITOPS_NAMESPACE_PROVISIONER_API_URL,
 * GITOPS_NAMESPACE_PROVISIONER_CA_FILE), by default those the service itself uses. Reclaim (Delete) deletes
 * the Secret and the namespace (only one carrying the label) and is done when the namespace is gone.
 */
import { createHash } from 'node:crypto';
import {
  AppStudioKinds,
  AppStudioLabel,
  CoreKinds,
  DeploymentTargetAnnotation,
  DeploymentTargetMessage,
  DeploymentTargetPhase,
  DT_PROVISIONER_LABEL,
  Provisioner as ProvisionerName,
  SecretType,
} from '@gitops/api';
import {
  addGaugeCollector,
  collectionPath,
  deleteIfExists,
  getObject,
  HttpMethod,
  isAlreadyExists,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  type Registry,
} from '@gitops/shared';
import { annotationOf, classNameOf, credentialsOf } from '../deployment-target.ts';
import { setPhase } from '../writes.ts';
import { DEPROVISION_TIMEOUT_MS, type Deprovisioned, type Provisioner } from './provisioner.ts';

const Target = AppStudioKinds.DeploymentTarget;
export const DEPLOYER_SERVICE_ACCOUNT = 'gitops-deployer';
const TOKEN_SECONDS = 365 * 24 * 3600;
/** Namespace deletion has no watch here: look again this often. */
const NAMESPACE_RECHECK_MS = 2_000;

export interface NamespaceProvisionerOptions {
  /** The API server URL the kubeconfig names (default: the service's own). */
  apiURL?: string;
  /** PEM of the API server's CA (default: the service's own; none = the system's roots). */
  caPem?: string;
}

export const provisionedNamespaceName = (namespace: string, claim: string): string => {
  const full = `${namespace}-${claim}`;
  if (full.length <= 63) return full;
  return `${full.slice(0, 54).replace(/-+$/, '')}-${createHash('sha256').update(full).digest('hex').slice(0, 8)}`;
};
export const kubeconfigSecretName = (claim: string): string => `${claim}-dt-kubeconfig`;

async function createIfMissing(kc: KubeConfig, path: string, body: Record<string, unknown>): Promise<void> {
  try {
    await kubeRequest(kc, { method: HttpMethod.POST, path, body });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
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
  const own = ownCluster(kc);
  const apiURL = options.apiURL || own.apiURL;
  const caPem = options.caPem ?? own.caPem;

  function kubeconfig(namespace: string, token: string): string {
    return JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'target',
          cluster: {
            server: apiURL,
            ...(caPem ? { 'certificate-authority-data': Buffer.from(caPem).toString('base64') } : {}),
          },
        },
      ],
      users: [{ name: DEPLOYER_SERVICE_ACCOUNT, user: { token } }],
      contexts: [
        { name: 'target', context: { cluster: 'target', user: DEPLOYER_SERVICE_ACCOUNT, namespace } },
      ],
      'current-context': 'target',
    });
  }

  async function provision(
    claim: KubeObject,
    _class: KubeObject,
    logger: Logger,
  ): Promise<string | undefined> {
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
    const answer = (await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${namespace}/serviceaccounts/${DEPLOYER_SERVICE_ACCOUNT}/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: TOKEN_SECONDS },
      },
    })) as { status?: { token?: string } };
    const token = answer.status?.token ?? '';
    const secretName = kubeconfigSecretName(claim.metadata.name);
    await deleteIfExists(kc, { ...CoreKinds.Secret, namespace: claimNamespace, name: secretName });
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: collectionPath({ ...CoreKinds.Secret.resource, namespace: claimNamespace }),
      body: {
        metadata: { name: secretName, labels: { ...ctx.shardLabels } },
        type: SecretType.ManagedEnvironment,
        stringData: { kubeconfig: kubeconfig(namespace, token) },
      },
    });
    const provisionerLabel = annotationOf(claim, DeploymentTargetAnnotation.DTProvisioner);
    const target = (await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: collectionPath({ ...Target.resource, namespace: claimNamespace }),
      body: {
        apiVersion: Target.apiVersion,
        kind: Target.kind,
        metadata: {
          name: targetName,
          labels: {
            ...ctx.shardLabels,
            ...(provisionerLabel ? { [DT_PROVISIONER_LABEL]: provisionerLabel } : {}),
          },
          annotations: { [DeploymentTargetAnnotation.ProvisionedBy]: ProvisionerName.Namespace },
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
      },
    })) as KubeObject;
    await setPhase(kc, Target, target, DeploymentTargetPhase.Available);
    logger.info({ namespace, target: targetName }, 'namespace provisioned for the claim');
    return undefined;
  }

  async function deprovision(target: KubeObject, _class: KubeObject, logger: Logger): Promise<Deprovisioned> {
    const { defaultNamespace, clusterCredentialsSecret } = credentialsOf(target);
    const namespace = defaultNamespace
      ? await getObject(kc, { ...CoreKinds.Namespace, name: defaultNamespace })
      : undefined;
    // Only a namespace this provisioner made is deleted (never one a user pointed a target at).
    if (namespace?.metadata.labels?.[AppStudioLabel.ProvisionedForClaim] !== undefined) {
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
    if (
      annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) === ProvisionerName.Namespace &&
      clusterCredentialsSecret
    )
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
 * `gitops_namespace_provisioner_token_expiry_timestamp_seconds{namespace, deployment_target}`: when the token in
 * the kubeconfig Secret of each DeploymentTarget this provisioner made expires (the JWT's `exp`), computed from
 * the informers' caches when /metrics is scraped, so it survives restarts and costs nothing between scrapes.
 */
export function registerProvisionedTokenExpiry(
  registry: Registry,
  caches: {
    targets: { list(): KubeObject[] };
    secrets: { get(namespace: string | undefined, name: string): KubeObject | undefined };
  },
): void {
  addGaugeCollector(
    registry,
    {
      name: 'gitops_namespace_provisioner_token_expiry_timestamp_seconds',
      help: "Expiry time (Unix seconds) of the ServiceAccount token in each namespace-provisioned DeploymentTarget's kubeconfig Secret",
      labelNames: ['namespace', 'deployment_target'],
    },
    (gauge) => {
      gauge.reset();
      for (const target of caches.targets.list()) {
        if (annotationOf(target, DeploymentTargetAnnotation.ProvisionedBy) !== ProvisionerName.Namespace)
          continue;
        const { clusterCredentialsSecret } = credentialsOf(target);
        const secret = caches.secrets.get(target.metadata.namespace, clusterCredentialsSecret);
        const data = (secret as { data?: Record<string, string> } | undefined)?.data?.kubeconfig;
        if (!data) continue;
        let token: unknown;
        try {
          token = (
            JSON.parse(Buffer.from(data, 'base64').toString()) as { users?: { user?: { token?: unknown } }[] }
          ).users?.[0]?.user?.token;
        } catch {
          continue;
        }
        const exp = typeof token === 'string' ? jwtExpiry(token) : undefined;
        if (exp !== undefined)
          gauge.set(
            { namespace: target.metadata.namespace ?? '', deployment_target: target.metadata.name },
            exp,
          );
      }
    },
  );
}
