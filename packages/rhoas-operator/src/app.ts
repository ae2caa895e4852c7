/**
 * `buildRhoasOperator(config)`: the whole RHOAS operator without ports or process signals (tests build it
 * in-process; main.ts adds the health server and signal handling). A list of four features, one per kind,
 * run by a manager (`createManager`); they share the cloud services client and the Events recorder.
 */
import {
  createEventRecorder,
  createManager,
  type Logger,
  type ProcessOptions,
  processDeps,
  type Registry,
} from '@gitops/shared';
import { type CloudServicesClient, createCloudServicesClient } from './cloud-services-client.ts';
import { cloudServicesRequestProcessor } from './cloud-services-request/cloud-services-request.processor.ts';
import type { RhoasOperatorConfig } from './config.ts';
import { kafkaConnectionProcessor } from './kafka-connection/kafka-connection.processor.ts';
import type { RhoasContext } from './processing.ts';
import { registryConnectionProcessor } from './registry-connection/registry-connection.processor.ts';
import { createRhoasKindFeature, type RhoasKindFeature } from './rhoas-feature.ts';
import { serviceAccountRequestProcessor } from './service-account-request/service-account-request.processor.ts';

export interface BuildRhoasOperatorOptions extends ProcessOptions {
  client?: CloudServicesClient;
  now?: () => Date;
}

export interface RhoasOperator {
  start(): Promise<void>;
  /** Stops every feature (draining running reconciles). Idempotent. */
  close(): Promise<void>;
  /** True once started and every informer has synced; false again while closing. */
  ready(): boolean;
  readonly features: {
    readonly cloudServicesRequests: RhoasKindFeature;
    readonly serviceAccountRequests: RhoasKindFeature;
    readonly kafkaConnections: RhoasKindFeature;
    readonly registryConnections: RhoasKindFeature;
  };
  readonly logger: Logger;
  readonly registry: Registry;
}

export function buildRhoasOperator(
  config: RhoasOperatorConfig,
  options: BuildRhoasOperatorOptions = {},
): RhoasOperator {
  const { logger, registry, kc } = processDeps('rhoas-operator', config, options);
  const ctx: RhoasContext = {
    config,
    kc,
    client:
      options.client ??
      createCloudServicesClient({
        apiUrl: config.apiUrl,
        ssoUrl: config.ssoUrl,
        timeoutMs: config.requestTimeoutMs,
      }),
    events: createEventRecorder(kc, { component: 'rhoas-operator', logger }),
    logger,
    now: options.now ?? (() => new Date()),
  };
  // The features, in the order the console's flow uses the kinds.
  const features = {
    serviceAccountRequests: createRhoasKindFeature(ctx, serviceAccountRequestProcessor, { registry }),
    cloudServicesRequests: createRhoasKindFeature(ctx, cloudServicesRequestProcessor, { registry }),
    kafkaConnections: createRhoasKindFeature(ctx, kafkaConnectionProcessor, { registry }),
    registryConnections: createRhoasKindFeature(ctx, registryConnectionProcessor, { registry }),
  };
  const manager = createManager({
    name: 'rhoas operator',
    logger,
    features: Object.values(features),
    readyFields: { api: config.apiUrl, sso: config.ssoUrl, namespace: config.watchNamespace ?? '(all)' },
  });
  return {
    features,
    logger,
    registry,
    ready: manager.ready,
    start: manager.start,
    close: manager.close,
  };
}
