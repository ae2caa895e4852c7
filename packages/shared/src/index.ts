/**
 * @gitops/shared: what the backend and the cluster-agent share — config, logging, metrics, errors,
 * the probe/metrics server, graceful shutdown, and the controller runtime (work queue, informer,
 * Kubernetes helpers). One way to do each of these things; look here before adding a helper.
 */
export * from './backoff.ts';
export * from './batcher.ts';
export * from './builder.ts';
export * from './clock.ts';
export * from './conditions.ts';
export * from './config.ts';
export * from './errors.ts';
export * from './feature.ts';
export * from './git-env.ts';
export * from './http-server.ts';
export * from './informer.ts';
export * from './informer-indexes.ts';
export * from './json.ts';
export * from './kube.ts';
export * from './kube-client.ts';
export * from './kube-events.ts';
export * from './lifecycle.ts';
export * from './logger.ts';
export * from './manager.ts';
export * from './metrics.ts';
export * from './periodic.ts';
export * from './predicates.ts';
export * from './rate-limiter.ts';
export * from './repository-url.ts';
export * from './service.ts';
export * from './turns.ts';
export * from './work-queue.ts';
