/**
 * The status path as one feature: Argo CD Application events → application_state (only when the
 * projection changed, a state Argo CD is on its way from only when it lasts); an Application whose row is gone is handed to the resource queue (orphan cleanup).
 */
import type { AgentFeature, FeatureContext } from '../agent-feature.ts';
import { createApplicationStatusController } from './application-status.controller.ts';

export function createStatusFeature(ctx: FeatureContext): AgentFeature {
  const controller = createApplicationStatusController({
    db: ctx.db,
    engineInstanceId: ctx.engineInstanceId,
    logger: ctx.logger,
    registry: ctx.registry,
    concurrency: ctx.config.concurrency,
    applications: ctx.applications,
    appProjects: ctx.appProjects,
    onOrphan: (id) => ctx.enqueue('Application', id),
    intervalsMs: {
      queued: ctx.config.statusQueuedIntervalMs,
      progressing: ctx.config.statusProgressIntervalMs,
    },
  });
  return {
    name: 'application-status',
    informers: [ctx.applications, ctx.appProjects],
    handles: {},
    start: controller.start,
    stop: controller.stop,
  };
}
