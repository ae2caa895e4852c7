/**
 * The `managed-gitops.redhat.com/namespace` provisioner's steps (README: "Provisioners"; the whole story in
 * namespace.provisioner.ts), each over a `deps` object (the client, the clock, the shard labels, the cluster
 * its kubeconfigs name, the token lifetime):
 * - `provisionNamespace`: the namespace `<claim namespace>-<claim>`, the ServiceAccount `gitops-deployer` with
 *   `admin` there, the kubeconfig Secret `<claim>-dt-kubeconfig`, then the DeploymentTarget `<claim>-dt`;
 * - `deprovisionNamespace`: for a target that is provably this provisioner's (`claimOfProvisionedTarget`, then
 *   `ownedNamespaceOf`), the namespace is deleted, then the Secret; done when the namespace is gone
 *   (`namespaceDeletion`: Failed after 2 minutes, still waiting); anything else is done at once with nothing
 *   deleted.
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
  collectionPath,
  createUnlessExists,
  deleteIfExists,
  getObject,
  HttpMethod,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
} from '@gitops/shared';
import type { StepContext } from '../controller.ts';
import {
  annotationOf,
  type ClaimCr,
  claimRefOf,
  classNameOf,
  credentialsOf,
  type TargetCr,
} from '../target-matching.ts';
import { createObject, setPhase } from '../writes.ts';
import { DEPLOYER_SERVICE_ACCOUNT, deployerKubeconfig, requestDeployerToken } from './namespace-token.ts';
import { DEPROVISION_TIMEOUT_MS, type Deprovisioned, provisionedTargetLabels } from './provisioner.ts';

const Target = AppStudioKinds.DeploymentTarget;
const Claim = AppStudioKinds.DeploymentTargetClaim;
/** Namespace deletion has no watch here: look again this often. */
const NAMESPACE_RECHECK_MS = 2_000;

/** What the steps use. */
export interface NamespaceProvisionerDeps extends Pick<StepContext, 'kc' | 'now' | 'shardLabels'> {
  /** The API server URL and CA its kubeconfigs name. */
  cluster: { apiURL: string; caPem?: string };
  /** How long a ServiceAccount token is asked for. */
  lifetimeMs: number;
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

/** The namespace, ServiceAccount, RoleBinding, kubeconfig Secret and DeploymentTarget of a Pending claim. */
export async function provisionNamespace(
  deps: NamespaceProvisionerDeps,
  claim: ClaimCr,
  logger: Logger,
): Promise<string | undefined> {
  const { kc } = deps;
  const claimNamespace = claim.metadata.namespace ?? '';
  const targetName = `${claim.metadata.name}-dt`;
  if (await getObject(kc, { ...Target, namespace: claimNamespace, name: targetName })) return undefined;
  const namespace = provisionedNamespaceName(claimNamespace, claim.metadata.name);
  const existing = await getObject(kc, { ...CoreKinds.Namespace, name: namespace });
  if (existing && existing.metadata.labels?.[AppStudioLabel.ProvisionedForClaim] !== claim.metadata.uid)
    return DeploymentTargetMessage.namespaceTaken(namespace);
  if (existing?.metadata.deletionTimestamp) return undefined; // an earlier one still going; its event brings us back
  if (!existing)
    await createUnlessExists(kc, '/api/v1/namespaces', {
      metadata: {
        name: namespace,
        labels: { [AppStudioLabel.ProvisionedForClaim]: claim.metadata.uid ?? '' },
        annotations: { [PROVISIONED_FOR_CLAIM_REF_ANNOTATION]: `${claimNamespace}/${claim.metadata.name}` },
      },
    });
  await createDeployer(kc, namespace);
  const secretName = await writeKubeconfigSecret(deps, claim, namespace);
  const target = await createObject<TargetCr>(kc, Target, claimNamespace, {
    metadata: {
      name: targetName,
      labels: provisionedTargetLabels(deps.shardLabels, claim),
      annotations: {
        [DeploymentTargetAnnotation.ProvisionedBy]: ProvisionerName.Namespace,
        [DeploymentTargetAnnotation.ProvisionedForClaimUid]: claim.metadata.uid ?? '',
      },
    },
    spec: {
      deploymentTargetClassName: classNameOf(claim),
      kubernetesCredentials: {
        defaultNamespace: namespace,
        apiURL: deps.cluster.apiURL,
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

/** The ServiceAccount `gitops-deployer` of `namespace`, bound to the ClusterRole `admin` there. */
async function createDeployer(kc: KubeConfig, namespace: string): Promise<void> {
  await createUnlessExists(kc, collectionPath({ ...CoreKinds.ServiceAccount.resource, namespace }), {
    metadata: { name: DEPLOYER_SERVICE_ACCOUNT },
  });
  await createUnlessExists(kc, collectionPath({ ...CoreKinds.RoleBinding.resource, namespace }), {
    metadata: { name: `${DEPLOYER_SERVICE_ACCOUNT}-admin` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    subjects: [{ kind: 'ServiceAccount', name: DEPLOYER_SERVICE_ACCOUNT, namespace }],
  });
}

/** The claim's kubeconfig Secret, written anew with a fresh token of the deployer of `namespace`; its name. */
async function writeKubeconfigSecret(
  deps: NamespaceProvisionerDeps,
  claim: ClaimCr,
  namespace: string,
): Promise<string> {
  const { kc } = deps;
  const claimNamespace = claim.metadata.namespace ?? '';
  const token = await requestDeployerToken(kc, namespace, deps.lifetimeMs);
  const secretName = kubeconfigSecretName(claim.metadata.name);
  await deleteIfExists(kc, { ...CoreKinds.Secret, namespace: claimNamespace, name: secretName });
  await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: collectionPath({ ...CoreKinds.Secret.resource, namespace: claimNamespace }),
    body: {
      metadata: { name: secretName, labels: { ...deps.shardLabels } },
      type: SecretType.ManagedEnvironment,
      stringData: { kubeconfig: deployerKubeconfig(deps.cluster, namespace, token) },
    },
  });
  return secretName;
}

/**
 * The namespace `target` names when it is provably the one this provisioner made for the target's claim
 * (undefined: absent), or 'not-owned'. The claim's uid: the target's provisioned-for-claim-uid when the
 * namespace's provisioned-for-claim-ref names the claim (a user can write the former, only the service the
 * latter), else the live claim's (a namespace made before the annotations, or a target without one).
 */
export async function ownedNamespaceOf(
  deps: Pick<NamespaceProvisionerDeps, 'kc'>,
  target: TargetCr,
  claim: string,
): Promise<KubeObject | 'not-owned' | undefined> {
  const claimNamespace = target.metadata.namespace ?? '';
  const name = provisionedNamespaceName(claimNamespace, claim);
  const namespace = await getObject(deps.kc, { ...CoreKinds.Namespace, name });
  if (!namespace) return undefined;
  const named = namespace.metadata.annotations?.[PROVISIONED_FOR_CLAIM_REF_ANNOTATION] !== undefined;
  const uid =
    (named ? annotationOf(target, DeploymentTargetAnnotation.ProvisionedForClaimUid) : undefined) ||
    (await getObject(deps.kc, { ...Claim, namespace: claimNamespace, name: claim }))?.metadata.uid;
  return provisionedForClaim(namespace, { namespace: claimNamespace, name: claim, uid })
    ? namespace
    : 'not-owned';
}

/** A provisioned namespace being deleted: Failed more than 2 minutes after the delete, else waiting. */
export function namespaceDeletion(namespace: KubeObject, now: Date): Deprovisioned {
  const since = now.getTime() - Date.parse(namespace.metadata.deletionTimestamp ?? '');
  return since > DEPROVISION_TIMEOUT_MS
    ? { kind: 'failed', requeueAfter: NAMESPACE_RECHECK_MS }
    : { kind: 'waiting', requeueAfter: NAMESPACE_RECHECK_MS };
}

/** Deletes the namespace of a target this provisioner provably made, then its Secret; `gone` once both are. */
export async function deprovisionNamespace(
  deps: Pick<NamespaceProvisionerDeps, 'kc' | 'now'>,
  target: TargetCr,
  logger: Logger,
): Promise<Deprovisioned> {
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
  const namespace = await ownedNamespaceOf(deps, target, claim);
  if (namespace === 'not-owned') {
    logger.warn(
      { namespace: defaultNamespace, claim },
      "the namespace is not provably the one provisioned for this claim (another claim's, or the claim is gone and the target predates the provisioned-for-claim-uid annotation): namespace and Secret left alone",
    );
    return { kind: 'gone' };
  }
  if (namespace) {
    if (namespace.metadata.deletionTimestamp) return namespaceDeletion(namespace, deps.now());
    await deleteIfExists(
      deps.kc,
      { ...CoreKinds.Namespace, name: defaultNamespace },
      { uid: namespace.metadata.uid },
    );
    logger.info({ namespace: defaultNamespace }, 'provisioned namespace deleted');
    return { kind: 'waiting', requeueAfter: NAMESPACE_RECHECK_MS };
  }
  await deleteIfExists(deps.kc, {
    ...CoreKinds.Secret,
    namespace: target.metadata.namespace,
    name: clusterCredentialsSecret,
  });
  return { kind: 'gone' };
}
