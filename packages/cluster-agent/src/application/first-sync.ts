/**
 * The first sync of a new Application starts with its create (issue 34; docs/architecture.md, "Create path").
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
 * We own `operation` (our apply set it), so an apply that left it out would withdraw it. Until Argo CD clears it,
 * every apply carries it as it is, at the live Application's resourceVersion: if Argo CD ended the sync
 * meanwhile, the apply is refused (409) and retried, rather than start the sync again.
 */
import { jsonField, type KubeObject } from '@gitops/shared';
import { isAutomated } from '../status/on-the-way.ts';
import type { DestinationEnvironment } from './application.render.ts';

/** The `operation.info` entry that tells our first sync apart (Argo CD copies it into `status.operationState`). */
export const FIRST_SYNC_INFO = 'gitops-first-sync';
const FIRST_SYNC_INFO_VALUE = "started with the Application's create by the GitOps Service";

/** Argo CD's retry of an automated sync when the policy names none. */
const ARGOCD_DEFAULT_RETRY = { limit: 5 };

/** The operation Argo CD's automated policy would set on `desired`, marked as our first sync. */
export function firstSyncOperation(desired: KubeObject): Record<string, unknown> {
  const syncOptions = jsonField(desired.spec, 'syncPolicy', 'syncOptions');
  const retry = jsonField(desired.spec, 'syncPolicy', 'retry');
  return {
    initiatedBy: { automated: true },
    info: [{ name: FIRST_SYNC_INFO, value: FIRST_SYNC_INFO_VALUE }],
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

/** What to apply: the Application, and the resourceVersion the apply requires (carrying our first sync). */
export interface WithFirstSync {
  desired: KubeObject;
  resourceVersion?: string;
}

/** `desired` with the first sync it starts or carries (header), or as it is. */
export function withFirstSync(
  desired: KubeObject,
  live: KubeObject | undefined,
  context: { adopting: boolean; environment: DestinationEnvironment },
): WithFirstSync {
  if (live === undefined) {
    const starts = !context.adopting && context.environment.kind === 'Workspace' && isAutomated(desired);
    return { desired: starts ? { ...desired, operation: firstSyncOperation(desired) } : desired };
  }
  if (!isFirstSync(live.operation) || !live.metadata.resourceVersion) return { desired };
  return {
    desired: { ...desired, operation: live.operation },
    resourceVersion: live.metadata.resourceVersion,
  };
}
