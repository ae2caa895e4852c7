/**
 * The GitOpsDeploymentRepositoryCredential feature: its CRs (this shard) and the Secrets a CR may reference
 * (by type, every namespace: `managed-gitops.redhat.com/repository-credential`, and `Opaque`, the type of a
 * Secret written without one, cached as metadata only) → work queue keys of the CRs that reference the Secret
 * in the same namespace (references never cross namespaces); operation state changes → the owner's key; a
 * slow sweep finds rows whose CR is gone. The reconciler's `requeueAfter` re-validates periodically.
 */
import { SecretType } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import type { BackendContext } from '../backend-feature.ts';
import { type CrController, createCrController, watchNamedSecrets } from '../cr-controller.ts';
import { RepositoryCredentialCr, type RepositoryCredentialObject } from '../kinds.ts';
import { createRepositoryCredentialReconciler } from './repository-credential.reconciler.ts';

/** The Secrets the feature watches (field selectors of the two Secret informers). */
export const REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR = `type=${SecretType.RepositoryCredential}`;
export const OPAQUE_SECRET_FIELD_SELECTOR = `type=${SecretType.Opaque}`;

/**
 * Only what the watch needs of an Opaque Secret: most Opaque Secrets of a cluster are no credentials of ours,
 * and the reconciler reads the one a CR names with a live GET, so the cache keeps no Secret data.
 */
export function secretMetadataOnly(secret: KubeObject): KubeObject {
  const { name, namespace, uid, resourceVersion } = secret.metadata;
  return {
    apiVersion: secret.apiVersion,
    kind: secret.kind,
    metadata: { name, namespace, uid, resourceVersion },
  };
}

export type RepositoryCredentialsFeature = CrController<RepositoryCredentialObject>;

export function createRepositoryCredentialsFeature(ctx: BackendContext): RepositoryCredentialsFeature {
  const informer = ctx.kindInformer(RepositoryCredentialCr);
  const secrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR },
  );
  const opaqueSecrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: OPAQUE_SECRET_FIELD_SELECTOR, transform: secretMetadataOnly },
  );
  return createCrController(ctx, {
    kind: RepositoryCredentialCr,
    informer,
    reconcile: createRepositoryCredentialReconciler({
      tenantClusterIdentity: () => ctx.engineInstance().cluster_identity,
      db: ctx.db,
      kc: ctx.kc,
      informer,
      events: ctx.events,
      sealer: ctx.sealer,
      selector: ctx.selector,
      sshKnownHostsFile: ctx.config.sshKnownHostsFile,
    }),
    // A Secret changed (not a relist): the CRs of its namespace that reference it. A Secret whose type changes
    // is a new object (type is immutable), so each informer sees all of its life.
    watches: watchNamedSecrets(informer, (cr) => cr.spec.secret || undefined, [secrets, opaqueSecrets]),
  });
}
