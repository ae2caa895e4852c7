/**
 * What wakes the render of a binding besides the binding itself: a PromotionRun starting a step, an
 * Application whose render annotation or spec changed, an Environment whose spec changed; each mapped to
 * the bindings it concerns through the bindings' indexes.
 */
import { type Informer, objectKey } from '@gitops/shared';
import { byApplication, byEnvironment } from '../indexes.ts';
import type { ApplicationCr, BindingCr, EnvironmentCr, PromotionRunCr } from '../objects.ts';

export function renderWatches(bindings: Informer<BindingCr>) {
  const ofApplication = byApplication(bindings);
  const ofEnvironment = byEnvironment(bindings);
  return {
    /** The bindings of the run's application at the run's snapshot. */
    ofPromotionRun: (run: PromotionRunCr) =>
      ofApplication(run.metadata.namespace, run.spec?.application ?? '')
        .filter((b) => b.spec.snapshot === run.spec?.snapshot)
        .map(objectKey),
    ofApplication: (app: ApplicationCr) =>
      ofApplication(app.metadata.namespace, app.metadata.name).map(objectKey),
    ofEnvironment: (env: EnvironmentCr) =>
      ofEnvironment(env.metadata.namespace, env.metadata.name).map(objectKey),
  };
}
