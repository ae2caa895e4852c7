/**
 * KafkaConnection: connection details of one Kafka instance (GET /api/kafkas_mgmt/v1/kafkas/{id}) in
 * `status`, with the original's `status.metadata` map, plus the servicebinding.io binding Secret.
 */
import { RhoasConditionType, RhoasKinds } from '@gitops/api';
import { oauthTokenUrl } from '../config.ts';
import { connectionProcessor } from '../connection.ts';

export const KAFKA_CLOUD_UI = 'https://console.redhat.com/beta/application-services/streams/kafkas/';

export const kafkaConnectionProcessor = connectionProcessor({
  kind: RhoasKinds.KafkaConnection,
  idField: 'kafkaId',
  found: RhoasConditionType.FoundKafkaById,
  fetch: (ctx, token, id, signal) => ctx.client.getKafka(token, id, signal),
  describe(ctx, id, kafka) {
    const metadata = {
      saslMechanism: 'PLAIN',
      securityProtocol: 'SASL_SSL',
      cloudUI: `${KAFKA_CLOUD_UI}${id}`,
      provider: 'rhoas',
      type: 'kafka',
    };
    return {
      status: { bootstrapServerHost: kafka.bootstrapServerHost },
      metadata,
      binding: {
        type: 'kafka',
        provider: 'rhoas',
        'bootstrap-servers': kafka.bootstrapServerHost,
        'sasl.mechanism': metadata.saslMechanism,
        'security.protocol': metadata.securityProtocol,
        'oauth-token-url': oauthTokenUrl(ctx.config),
      },
    };
  },
});
