/**
 * The GitOpsDeploymentManagedEnvironment feature: its CRs (this shard) and the credential Secrets (by type,
 * mapped to the CRs of the same namespace that reference them) → the reconciler's work queue. The
 * reconciler's `requeueAfter` is the periodic connection re-check. Other features subscribe to
 * `onEnvironmentChanged` (the reconcile changed a namespace's environment rows), and watch its informer with
 * `connectionChanged` (a connection condition changed in the cache, or an environment is gone).
 */
import { SecretType } from '@gitops/api';
import { jsonEqual, type Predicate } from '@gitops/shared';
import type { BackendContext } from '../backend-feature.ts';
import { type CrController, createCrController, watchNamedSecrets } from '../cr-controller.ts';
import { ManagedEnvironmentCr, type ManagedEnvironmentObject } from '../kinds.ts';
import { createManagedEnvironmentReconciler } from './managed-environment.reconciler.ts';

/** Field selector of the Secrets watched (only ManagedEnvironment credentials). */
export const MANAGED_ENVIRONMENT_SECRET_SELECTOR = `type=${SecretType.ManagedEnvironment}`;

export interface ManagedEnvironmentFeature extends CrController<ManagedEnvironmentObject> {
  /** Calls `listener(namespace)` when the reconcile changed the rows of an environment of that namespace. */
  onEnvironmentChanged(listener: (namespace: string) => void): void;
}

/** An environment whose connection condition changed, or that is gone: the users of its namespace look again. */
export const connectionChanged: Predicate<ManagedEnvironmentObject> = {
  name: 'connection condition changed, or deleted',
  create: () => false,
  update: (a, b) => !jsonEqual(a.status?.conditions, b.status?.conditions),
};

export function createManagedEnvironmentFeature(ctx: BackendContext): ManagedEnvironmentFeature {
  const informer = ctx.kindInformer(ManagedEnvironmentCr);
  const secrets = ctx.informer(
    { apiVersion: 'v1', plural: 'secrets' },
    { fieldSelector: MANAGED_ENVIRONMENT_SECRET_SELECTOR },
  );
  const listeners: ((namespace: string) => void)[] = [];
  const environmentChanged = (namespace: string) => {
    for (const listener of listeners) listener(namespace);
  };
  const controller = createCrController(ctx, {
    kind: ManagedEnvironmentCr,
    informer,
    reconcile: createManagedEnvironmentReconciler({
      tenantClusterIdentity: () => ctx.engineInstance().cluster_identity,
      db: ctx.db,
      kc: ctx.kc,
      sealer: ctx.sealer,
      informer,
      events: ctx.events,
      selector: ctx.selector,
      operationRetryMs: ctx.config.operationRetryMs,
      onEnvironmentChanged: environmentChanged,
    }),
    // A credentials Secret changed (not a relist): the environments of its namespace that name it.
    watches: watchNamedSecrets(informer, (environment) => environment.spec.credentialsSecret || undefined, [
      secrets,
    ]),
  });
  return {
    ...controller,
    onEnvironmentChanged(listener) {
      listeners.push(listener);
    },
  };
}
