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
 *
 * Here the provisioner the binder and the reclaimer call; its steps in namespace.reconciler.ts, its tokens,
 * kubeconfigs and their expiry metric in namespace-token.ts.
 */
import { Provisioner as ProvisionerName } from '@gitops/api';
import type { KubeConfig } from '@gitops/shared';
import {
  deprovisionNamespace,
  type NamespaceProvisionerDeps,
  provisionNamespace,
} from './namespace.reconciler.ts';
import {
  DEFAULT_TOKEN_LIFETIME_MS,
  type NamespaceProvisionerOptions,
  provisionedCluster,
} from './namespace-token.ts';
import type { Provisioner } from './provisioner.ts';

export function createNamespaceProvisioner(
  ctx: { kc: KubeConfig; shardLabels: Readonly<Record<string, string>>; now: () => Date },
  options: NamespaceProvisionerOptions = {},
): Provisioner {
  const deps: NamespaceProvisionerDeps = {
    kc: ctx.kc,
    now: ctx.now,
    shardLabels: ctx.shardLabels,
    cluster: provisionedCluster(ctx.kc, options),
    lifetimeMs: options.tokenLifetimeMs ?? DEFAULT_TOKEN_LIFETIME_MS,
  };
  return {
    name: ProvisionerName.Namespace,
    provision: (claim, _class, logger) => provisionNamespace(deps, claim, logger),
    deprovision: (target, _class, logger) => deprovisionNamespace(deps, target, logger),
  };
}
