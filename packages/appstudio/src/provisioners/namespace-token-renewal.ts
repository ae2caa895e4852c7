/**
 * Renewal of the ServiceAccount tokens the `managed-gitops.redhat.com/namespace` provisioner writes
 * (namespace.provisioner.ts, namespace.reconciler.ts): at start and then every
 * GITOPS_NAMESPACE_PROVISIONER_TOKEN_CHECK_INTERVAL (default 1h), each DeploymentTarget this provisioner made whose kubeconfig Secret holds a token that
 * expires within GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE (default 720h), or one whose expiry cannot
 * be read, gets a new token (a TokenRequest for `gitops-deployer` in the target's namespace) written into that
 * Secret in place (a merge patch guarded by the cached resourceVersion: the ManagedEnvironment reading it
 * never sees it missing, and a concurrent change wins; the next round looks again).
 *
 * The token, the expiry and the Secret are read from the informers' caches (those of the expiry metric).
 * Only a target that is provably this provisioner's is touched (the check reclaim uses too, in
 * namespace.reconciler.ts): annotated provisioned-by, named `<claim>-dt` after its claimRef, naming the
 * Secret `<claim>-dt-kubeconfig` and the namespace the provisioner derives for that claim
 * (`claimOfProvisionedTarget`), whose label `provisioned-for-claim` holds the uid of that claim in the
 * target's namespace (`provisionedForClaim`, with the live claim's uid). So no one gets a token for a
 * ServiceAccount by writing a DeploymentTarget that points elsewhere, and a Released target (Retain: no claim
 * any more) keeps its last token.
 *
 * A failure (ServiceAccount gone, API error) is logged (never the token) and retried at the next round.
 */
import { CoreKinds } from '@gitops/api';
import {
  type Feature,
  getObject,
  type Informer,
  type KubeConfig,
  type KubeObject,
  type Logger,
  mergePatch,
  periodicJob,
} from '@gitops/shared';
import type { ClaimCr, TargetCr } from '../target-matching.ts';
import {
  claimOfProvisionedTarget,
  kubeconfigSecretName,
  provisionedForClaim,
  provisionedNamespaceName,
} from './namespace.reconciler.ts';
import {
  DEFAULT_TOKEN_CHECK_INTERVAL_MS,
  DEFAULT_TOKEN_LIFETIME_MS,
  DEFAULT_TOKEN_RENEW_BEFORE_MS,
  deployerKubeconfig,
  jwtExpiry,
  type NamespaceProvisionerOptions,
  provisionedCluster,
  requestDeployerToken,
  tokenOfKubeconfigSecret,
} from './namespace-token.ts';

/** What one round did. */
export interface TokenRenewalRound {
  /** Targets of this provisioner whose token was looked at. */
  checked: number;
  renewed: number;
  failed: number;
}

export interface NamespaceTokenRenewal extends Feature {
  /** One round now (the timer runs the same): renews every due token of the cached targets. */
  renewDue(signal?: AbortSignal): Promise<TokenRenewalRound>;
}

export function createNamespaceTokenRenewal(
  ctx: { kc: KubeConfig; logger: Logger; now: () => Date },
  deps: { targets: Informer<TargetCr>; secrets: Informer<KubeObject>; claims: Informer<ClaimCr> },
  options: NamespaceProvisionerOptions = {},
): NamespaceTokenRenewal {
  const { kc } = ctx;
  const logger = ctx.logger.child({ component: 'namespace-token-renewal' });
  const cluster = provisionedCluster(kc, options);
  const lifetimeMs = options.tokenLifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS;
  const renewBeforeMs = options.tokenRenewBeforeMs ?? DEFAULT_TOKEN_RENEW_BEFORE_MS;
  const intervalMs = options.tokenCheckIntervalMs ?? DEFAULT_TOKEN_CHECK_INTERVAL_MS;

  /** Renews the token of one target when due; true when it did. */
  async function renewIfDue(target: TargetCr, claimName: string, signal?: AbortSignal): Promise<boolean> {
    const namespace = target.metadata.namespace ?? '';
    const secretName = kubeconfigSecretName(claimName);
    const secret = deps.secrets.get(namespace, secretName);
    if (!secret) return false; // provisioning not finished, or deleted: nothing to renew in place
    const token = tokenOfKubeconfigSecret(secret);
    const exp = token === undefined ? undefined : jwtExpiry(token);
    if (exp !== undefined && exp * 1000 - ctx.now().getTime() > renewBeforeMs) return false;
    const claim = deps.claims.get(namespace, claimName);
    const provisioned = provisionedNamespaceName(namespace, claimName);
    const ns = claim
      ? await getObject(kc, { ...CoreKinds.Namespace, name: provisioned }, { signal })
      : undefined;
    if (
      !provisionedForClaim(ns, { namespace, name: claimName, uid: claim?.metadata.uid }) ||
      ns?.metadata.deletionTimestamp
    ) {
      logger.debug(
        { namespace, target: target.metadata.name },
        'token due but the target is not bound to a claim its namespace was provisioned for: left alone',
      );
      return false;
    }
    const fresh = await requestDeployerToken(kc, provisioned, lifetimeMs, signal);
    await mergePatch(
      kc,
      { ...CoreKinds.Secret, namespace, name: secretName },
      {
        metadata: { uid: secret.metadata.uid, resourceVersion: secret.metadata.resourceVersion },
        data: {
          kubeconfig: Buffer.from(deployerKubeconfig(cluster, provisioned, fresh)).toString('base64'),
        },
      },
      { signal },
    );
    const newExp = jwtExpiry(fresh);
    const expiresAt = newExp === undefined ? undefined : new Date(newExp * 1000).toISOString();
    logger.info(
      { namespace, target: target.metadata.name, expiresAt },
      'provisioned namespace token renewed',
    );
    if (newExp !== undefined && newExp * 1000 - ctx.now().getTime() <= renewBeforeMs)
      logger.warn(
        { namespace, target: target.metadata.name, expiresAt },
        'the API server gave the renewed token less than GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE: it will be renewed at every check (is --service-account-max-token-expiration below the lifetime?)',
      );
    return true;
  }

  async function renewDue(signal?: AbortSignal): Promise<TokenRenewalRound> {
    const round: TokenRenewalRound = { checked: 0, renewed: 0, failed: 0 };
    for (const target of deps.targets.list()) {
      if (signal?.aborted) break;
      const claim = claimOfProvisionedTarget(target);
      if (!claim) continue;
      round.checked++;
      try {
        if (await renewIfDue(target, claim, signal)) round.renewed++;
      } catch (err) {
        if (signal?.aborted) break;
        round.failed++;
        // KubeApiError carries the API server's message and the path, never a request body.
        logger.warn(
          { err, namespace: target.metadata.namespace, target: target.metadata.name },
          'provisioned namespace token renewal failed; retried at the next check',
        );
      }
    }
    return round;
  }

  return {
    name: 'appstudio-namespace-token-renewal',
    informers: [deps.targets, deps.secrets, deps.claims],
    renewDue,
    ...periodicJob('namespace provisioner token renewal', intervalMs, renewDue, { logger, jitter: 0.1 }),
  };
}
