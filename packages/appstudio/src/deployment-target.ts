/**
 * The little the environment and binding controllers need of DeploymentTargetClaims (their own controllers
 * are the next issue): whether a claim exists, whether it is Bound, and the DeploymentTarget bound to it
 * (`spec.targetName`, else the one DeploymentTarget whose `spec.claimRef` names the claim). While the API
 * server does not serve these kinds, every claim counts as missing.
 */
import { APPSTUDIO_GROUP_VERSION, AppStudioKinds, DeploymentTargetClaimPhase } from '@gitops/api';
import {
  collectionPath,
  ErrorCode,
  errorCode,
  getObject,
  HttpMethod,
  isNotFound,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
} from '@gitops/shared';
import { record, specOf, statusOf, text } from './objects.ts';

const DeploymentTargetKind = {
  apiVersion: APPSTUDIO_GROUP_VERSION,
  kind: 'DeploymentTarget',
  plural: 'deploymenttargets',
};

/** The kind is not served (yet), or the collection is gone: nothing is bound. */
const notServed = (err: unknown) => errorCode(err) === ErrorCode.kubeUnknownKind || isNotFound(err);

export async function getClaim(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<KubeObject | undefined> {
  try {
    return await getObject(kc, { ...AppStudioKinds.DeploymentTargetClaim, namespace, name });
  } catch (err) {
    if (notServed(err)) return undefined;
    throw err;
  }
}

export const isBound = (claim: KubeObject) =>
  text(statusOf(claim).phase) === DeploymentTargetClaimPhase.Bound;

export interface BoundTarget {
  apiURL: string;
  clusterCredentialsSecret: string;
  allowInsecureSkipTLSVerify: boolean;
  defaultNamespace: string;
}

/** The DeploymentTarget bound to `claim`; undefined when there is none (or several: ambiguous). */
export async function boundTarget(kc: KubeConfig, claim: KubeObject): Promise<BoundTarget | undefined> {
  const namespace = claim.metadata.namespace ?? '';
  const targetName = text(specOf(claim).targetName);
  let target: KubeObject | undefined;
  try {
    if (targetName) {
      target = await getObject(kc, { ...DeploymentTargetKind, namespace, name: targetName });
    } else {
      const answer = record(
        await kubeRequest(kc, {
          method: HttpMethod.GET,
          path: collectionPath({ ...DeploymentTargetKind, namespace }),
        }),
      );
      const claiming = (Array.isArray(answer.items) ? (answer.items as KubeObject[]) : []).filter(
        (t) => text(specOf(t).claimRef) === claim.metadata.name,
      );
      target = claiming.length === 1 ? claiming[0] : undefined;
    }
  } catch (err) {
    if (notServed(err)) return undefined;
    throw err;
  }
  if (!target) return undefined;
  const credentials = record(specOf(target).kubernetesCredentials);
  return {
    apiURL: text(credentials.apiURL),
    clusterCredentialsSecret: text(credentials.clusterCredentialsSecret),
    allowInsecureSkipTLSVerify: credentials.allowInsecureSkipTLSVerify === true,
    defaultNamespace: text(credentials.defaultNamespace),
  };
}
