/**
 * Rendering a binding's Snapshot into its Application's GitOps repository (README: "GitOps repository
 * rendering"), the part App Studio's application service did: for one binding whose Application carries
 * `managed-gitops.redhat.com/render-gitops-repository: "true"` and names `spec.gitOpsRepository`,
 * 1. the Snapshot's image of each of the binding's components is written into the Environment's overlay
 *    (`components/<component>/overlays/<environment>/kustomization.yaml`, `images`; by digest when the
 *    reference has one), with the Environment's `configuration.env` where the overlay has a configMapGenerator
 *    `<component>-environment`; the base `components/<component>/base` must exist;
 * 2. committed (message naming the Snapshot, the Environment and the PromotionRun) only when something
 *    changed, and pushed; someone else's push in between: fetched, rendered and pushed again (5 times);
 * 3. `status.components` (url, branch, path, commitID) and `status.gitopsRepoConditions` (one
 *    `GitOpsResourcesGenerated` condition for the binding's generation) are written; the binding feature and
 *    the PromotionRun do the rest.
 * A failure writes only the condition (False, the reason in words, no credential): `status.components` keeps
 * the last render, so nothing half-written is deployed. Unreachable repositories are tried again with backoff.
 * A binding whose `status.components` or `gitopsRepoConditions` another writer (App Studio's own service)
 * manages is left alone.
 *
 * Here the wiring; the steps in render.reconciler.ts, the conditions in render.status.ts, what wakes it in
 * render.watches.ts.
 */
import {
  annotationsChanged,
  anyOf,
  generationChanged,
  ignoreCreates,
  ignoreDeletes,
  relist,
  specChanged,
  statusFieldsChanged,
} from '@gitops/shared';
import type { AppStudioContext } from '../context.ts';
import {
  type AppStudioController,
  newAppStudioController,
  quietInTerminatingNamespace,
} from '../controller.ts';
import type { ApplicationCr, EnvironmentCr, PromotionRunCr } from '../objects.ts';
import { createRenderReconciler, type RenderDeps } from './render.reconciler.ts';
import { renderWatches } from './render.watches.ts';

export type RenderFeatureDeps = RenderDeps;

export function createRenderFeature(ctx: AppStudioContext, deps: RenderFeatureDeps): AppStudioController {
  if (!ctx.sshKnownHostsFile)
    ctx.logger.warn(
      'GITOPS_SSH_KNOWN_HOSTS_FILE is not set: the SSH host key of a GitOps repository the service renders is accepted on first use (set it to a known_hosts file, e.g. the ssh_known_hosts of argocd-ssh-known-hosts-cm, to verify host keys)',
    );
  const reconcile = createRenderReconciler(ctx, deps);
  const watches = renderWatches(deps.bindings);
  return (
    newAppStudioController(ctx, 'appstudio-gitops-render')
      // Spec changes (a new snapshot, components), resyncs, and the deployments' revisions (to follow later
      // commits); other status writes are not a reason to look.
      .for(deps.bindings, {
        predicates: [anyOf(relist, generationChanged, statusFieldsChanged('gitopsDeployments'))],
      })
      // A PromotionRun starting a step (its promotionStartTime): the bindings of its application at its
      // snapshot are tried again at once, so a refusal the run sees is about its own attempt.
      .watches<PromotionRunCr>(deps.promotionRuns, watches.ofPromotionRun, {
        predicates: [ignoreDeletes, statusFieldsChanged('promotionStartTime')],
      })
      // An Application created, or its render annotation or spec changed.
      .watches<ApplicationCr>(deps.applications, watches.ofApplication, {
        predicates: [ignoreDeletes, anyOf(annotationsChanged, specChanged)],
      })
      // An Environment's spec changed (its variables).
      .watches<EnvironmentCr>(deps.environments, watches.ofEnvironment, {
        predicates: [ignoreCreates, ignoreDeletes, generationChanged],
      })
      .complete(quietInTerminatingNamespace(reconcile))
  );
}
