/**
 * The GitOpsDeploymentRepositoryCredential feature: its CRs (this shard) and the repository-credential
 * Secrets (by type, every namespace) → work queue keys of the CRs that reference the Secret in the same
 * namespace (references never cross namespaces); operation state changes → the owner's key; a slow sweep
 * finds rows whose CR is gone. The reconciler's `requeueAfter` re-validates periodically.
 */
import { SecretType } from '@gitops/api';
import { type KubeObject, objectKey } from '@gitops/shared';
import type { BackendContext } from '../backend-feature.ts';
import { type CrController, createCrController } from '../cr-controller.ts';
import { RepositoryCredentialCr } from '../kinds.ts';
import {
  createRepositoryCredentialReconciler,
  parseRepositoryCredentialSpec,
} from './repository-credential.reconciler.ts';

/** The Secrets the feature watches (field selector of the Secret informer). */
export const REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR = `type=${SecretType.RepositoryCredential}`;

export type RepositoryCredentialsFeature = CrController;

export function createRepositoryCredentialsFeature(ctx: BackendContext): RepositoryCredentialsFeature {
  const informer = ctx.informer(RepositoryCredentialCr.resource, { sharded: true });
  const secrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: REPOSITORY_CREDENTIAL_SECRET_FIELD_SELECTOR },
  );
  return createCrController({
    kind: RepositoryCredentialCr,
    db: ctx.db,
    informer,
    alsoReads: [secrets],
    registry: ctx.registry,
    logger: ctx.logger.child({ controller: 'gitopsdeploymentrepositorycredential' }),
    concurrency: ctx.config.maxConcurrentReconciles,
    resyncIntervalMs: ctx.config.resyncIntervalMs,
    reconcile: createRepositoryCredentialReconciler({
      db: ctx.db,
      kc: ctx.kc,
      informer,
      engineInstance: ctx.engineInstance,
      events: ctx.events,
      sealer: ctx.sealer,
      selector: ctx.selector,
    }),
    watch: (enqueue) => {
      const enqueueUsersOf = (secret: KubeObject) => {
        for (const cr of informer.list(secret.metadata.namespace)) {
          if (parseRepositoryCredentialSpec(cr.spec).secret === secret.metadata.name) enqueue(objectKey(cr));
        }
      };
      return [
        secrets.onAdd(enqueueUsersOf),
        secrets.onUpdate((a, b) => {
          if (a.metadata.resourceVersion !== b.metadata.resourceVersion) enqueueUsersOf(b);
        }),
        secrets.onDelete(enqueueUsersOf),
      ];
    },
  });
}
