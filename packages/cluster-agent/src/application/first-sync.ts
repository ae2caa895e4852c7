/**
 * The first sync of a new Application starts with its create (issue 34; docs/performance.md, "Cut since: the first sync comes with the create").
 *
 * Argo CD's automated policy syncs a new Application only once it has compared it and found it OutOfSync. It
 * then writes the Application again to set the sync operation (a GET and a PUT) and writes an Event
 * ("Initiated automated sync"). An automated Application we create carries that operation already, as Argo CD's
 * policy would set it (prune as the policy says, its sync options, its retry or Argo CD's default of 5): Argo CD
 * runs it without waiting for a comparison, and its policy, finding an operation there, sets none. That is
 * two API writes fewer per created deployment, and the sync starts sooner.
 *
 * Only for an Application that is new here: created now, in-cluster (a Workspace environment, which needs no
 * cluster Secret that could come later), not adopted from another engine instance (what that instance
 * deployed is there; Argo CD's policy compares it first, as before). Argo CD clears the operation when the
 * sync ends.
 *
 * The create (a POST, application.reconciler.ts) sets it; an Application an earlier version created by apply
 * has it owned by our apply, which an apply that left it out would withdraw. So until Argo CD clears it, every
 * apply carries it as it is, at the live Application's resourceVersion: if Argo CD ended the sync meanwhile, the
 * apply is refused (409) and retried, rather than start the sync again.
 *
 * The same operation also resumes a sync left without one: an automated Application whose
 * `status.operationState` is still Running while it has no `operation` (withdrawn while the sync ran, e.g. by a
 * tenant move's release that gave up waiting and was then undone by a move back). Argo CD never ends such a sync
 * (it runs operations only while one is set), and its automated policy does not sync that revision again ("failed
 * previous sync attempt"). Setting an operation lets Argo CD resume the sync it had begun. Seen on a reconcile
 * of the row (an adoption, an edit), not on status changes.
 */
import { jsonField, type KubeObject } from '@gitops/shared';
import { isAutomated } from '../status/on-the-way.ts';
import { hasOperation } from './application.removal.ts';
import type { DestinationEnvironment } from './application.render.ts';

/** The `operation.info` entry that tells our first sync apart (Argo CD copies it into `status.operationState`). */
export const FIRST_SYNC_INFO = 'gitops-first-sync';
const FIRST_SYNC_INFO_VALUE = "started with the Application's create by the GitOps Service";
const RESUME_INFO_VALUE = 'set by the GitOps Service: a sync still running had no operation left';

/** Argo CD's retry of an automated sync when the policy names none. */
const ARGOCD_DEFAULT_RETRY = { limit: 5 };

/** The operation Argo CD's automated policy would set on `desired`, marked as ours (`why`: the info's value). */
export function firstSyncOperation(
  desired: KubeObject,
  why = FIRST_SYNC_INFO_VALUE,
): Record<string, unknown> {
  const syncOptions = jsonField(desired.spec, 'syncPolicy', 'syncOptions');
  const retry = jsonField(desired.spec, 'syncPolicy', 'retry');
  return {
    initiatedBy: { automated: true },
    info: [{ name: FIRST_SYNC_INFO, value: why }],
    sync: {
      prune: jsonField(desired.spec, 'syncPolicy', 'automated', 'prune') === true,
      ...(Array.isArray(syncOptions) ? { syncOptions } : {}),
    },
    retry: typeof retry === 'object' && retry !== null ? retry : ARGOCD_DEFAULT_RETRY,
  };
}

/** Whether an Application's `operation` is our first sync. */
export function isFirstSync(operation: unknown): boolean {
  const info = jsonField(operation, 'info');
  return Array.isArray(info) && info.some((item) => jsonField(item, 'name') === FIRST_SYNC_INFO);
}

/**
 * What to apply: the Application, the resourceVersion the apply requires (carrying or resuming a sync), and
 * whether it sets an operation the live Application lacks (then it is applied even if nothing else changed).
 */
export interface WithFirstSync {
  desired: KubeObject;
  resourceVersion?: string;
  startsSync: boolean;
}

/** A sync Argo CD still reports running on an Application that has no operation left (header). */
export function isSyncWithoutOperation(live: KubeObject): boolean {
  return !hasOperation(live) && jsonField(live.status, 'operationState', 'phase') === 'Running';
}

/** `desired` with the first sync it starts, carries or resumes (header), or as it is. */
export function withFirstSync(
  desired: KubeObject,
  live: KubeObject | undefined,
  context: { adopting: boolean; environment: DestinationEnvironment },
): WithFirstSync {
  if (live === undefined) {
    const starts = !context.adopting && context.environment.kind === 'Workspace' && isAutomated(desired);
    return {
      desired: starts ? { ...desired, operation: firstSyncOperation(desired) } : desired,
      startsSync: starts,
    };
  }
  const resourceVersion = live.metadata.resourceVersion;
  if (!resourceVersion) return { desired, startsSync: false };
  if (isFirstSync(live.operation))
    return { desired: { ...desired, operation: live.operation }, resourceVersion, startsSync: false };
  if (isAutomated(desired) && isSyncWithoutOperation(live)) {
    const operation = firstSyncOperation(desired, RESUME_INFO_VALUE);
    return { desired: { ...desired, operation }, resourceVersion, startsSync: true };
  }
  return { desired, startsSync: false };
}
