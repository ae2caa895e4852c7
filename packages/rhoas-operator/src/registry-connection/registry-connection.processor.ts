/**
 * ServiceRegistryConnection: connection details of one Service Registry
 * (GET /api/serviceregistry_mgmt/v1/registries/{id}): `registryUrl + "/apis/registry/v2"`, the
 * `status.metadata` map with the oauthTokenUrl from MAS_AUTH_URL/MAS_AUTH_REALM, and the servicebinding.io
 * binding Secret. Its condition list is its own (the original reset it with KafkaConnection's list).
 */
import { RhoasConditionType, RhoasKinds } from '@gitops/api';
import { oauthTokenUrl } from '../config.ts';
import { connectionProcessor } from '../connection.ts';

export const REGISTRY_API_SUFFIX = '/apis/registry/v2';

export const registryConnectionProcessor = connectionProcessor({
  kind: RhoasKinds.ServiceRegistryConnection,
  idField: 'serviceRegistryId',
  found: RhoasConditionType.FoundServiceRegistryById,
  fetch: (ctx, token, id, signal) => ctx.client.getRegistry(token, id, signal),
  describe(ctx, _id, registry) {
    const registryUrl = `${registry.registryUrl}${REGISTRY_API_SUFFIX}`;
    const metadata = { provider: 'rhoas', type: 'serviceregistry', oauthTokenUrl: oauthTokenUrl(ctx.config) };
    return {
      status: { registryUrl },
      metadata,
      binding: {
        type: 'serviceregistry',
        provider: 'rhoas',
        'registry-url': registryUrl,
        'oauth-token-url': metadata.oauthTokenUrl,
      },
    };
  },
});
