/**
 * CloudServicesRequest: which Kafka instances and Service Registries can this token see? Lists both (the
 * server's first page, no query, as the original) and replaces `status.userKafkas` and
 * `status.serviceRegistries`; when either call fails, both lists keep their previous values.
 */
import {
  type CloudServicesRequest,
  RhoasConditionType,
  RhoasKinds,
  type ServiceRegistryItem,
  type UserKafka,
} from '@gitops/api';
import { accessToken, checked, isoInstant, type KindProcessor, validate } from '../processing.ts';

export const cloudServicesRequestProcessor: KindProcessor<CloudServicesRequest> = {
  kind: RhoasKinds.CloudServicesRequest,
  addsLabels: false,
  async process(ctx, { object, progress, status, signal }) {
    validate(progress, object, [
      ['spec', 'object'],
      ['spec.accessTokenSecretName', 'secretName'],
    ]);
    const tokenSecretName = checked(object.spec?.accessTokenSecretName, 'spec.accessTokenSecretName');
    const namespace = object.metadata.namespace ?? '';
    const token = await accessToken(ctx, progress, namespace, tokenSecretName, signal);
    const kafkas = await progress.step(RhoasConditionType.UserKafkasUpToDate, () =>
      ctx.client.listKafkas(token, signal),
    );
    const registries = await progress.step(RhoasConditionType.ServiceRegistriesUpToDate, () =>
      ctx.client.listRegistries(token, signal),
    );
    status.userKafkas = kafkas.map(
      (k): UserKafka => ({
        id: k.id,
        name: k.name,
        owner: k.owner,
        bootstrapServerHost: k.bootstrapServerHost,
        status: k.status,
        createdAt: isoInstant(k.createdAt),
        updatedAt: isoInstant(k.updatedAt),
        provider: k.cloudProvider,
        region: k.region,
      }),
    );
    status.serviceRegistries = registries.map(
      (r): ServiceRegistryItem => ({
        id: r.id,
        name: r.name,
        registryUrl: r.registryUrl,
        registryStatus: r.status,
        lastUpdated: isoInstant(r.updatedAt),
      }),
    );
    status.lastUpdate = ctx.now().toISOString();
  },
};
