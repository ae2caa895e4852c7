/**
 * ServiceRegistryConnection: connection details of one Service Registry
 * (GET /api/serviceregistry_mgmt/v1/registries/{id}): `registryUrl + "/apis/registry/v2"`, the
 * `status.metadata` map with the oauthTokenUrl from MAS_AUTH_URL/MAS_AUTH_REALM, and the servicebinding.io
 * binding Secret. Its condition list is its own (the original reset it with KafkaConnection's list).
 */
import { RhoasConditionsOf, RhoasConditionType, RhoasKinds, RhoasMessage } from '@gitops/api';
import { oauthTokenUrl } from '../config.ts';
import { writeBindingSecret } from '../connection.ts';
import { accessToken, type KindProcessor, validate } from '../processing.ts';

export const REGISTRY_API_SUFFIX = '/apis/registry/v2';

export const registryConnectionProcessor: KindProcessor = {
  kind: RhoasKinds.ServiceRegistryConnection,
  conditions: RhoasConditionsOf.ServiceRegistryConnection,
  addsLabels: true,
  async process(ctx, { object, progress, status, signal }) {
    validate(progress, object, [
      ['spec', 'object'],
      ['spec.accessTokenSecretName', 'secretName'],
      ['spec.credentials', 'object'],
      ['spec.credentials.serviceAccountSecretName', 'secretName'],
      ['spec.serviceRegistryId', 'id'],
    ]);
    const spec = object.spec as {
      accessTokenSecretName: string;
      serviceRegistryId: string;
      credentials: { serviceAccountSecretName: string };
    };
    const namespace = object.metadata.namespace ?? '';
    const token = await accessToken(ctx, progress, namespace, spec.accessTokenSecretName, signal);
    const registry = await progress.step(RhoasConditionType.FoundServiceRegistryById, () =>
      ctx.client.getRegistry(token, spec.serviceRegistryId, signal),
    );
    const registryUrl = `${registry.registryUrl}${REGISTRY_API_SUFFIX}`;
    const metadata = { provider: 'rhoas', type: 'serviceregistry', oauthTokenUrl: oauthTokenUrl(ctx.config) };
    const binding = await writeBindingSecret(
      ctx,
      progress,
      object,
      RhoasKinds.ServiceRegistryConnection,
      {
        type: 'serviceregistry',
        provider: 'rhoas',
        'registry-url': registryUrl,
        'oauth-token-url': metadata.oauthTokenUrl,
      },
      spec.credentials.serviceAccountSecretName,
      signal,
    );
    status.message = RhoasMessage.created;
    status.updated = ctx.now().toISOString();
    status.registryUrl = registryUrl;
    status.serviceAccountSecretName = spec.credentials.serviceAccountSecretName;
    status.metadata = metadata;
    status.binding = { name: binding };
  },
};
