/**
 * KafkaConnection: connection details of one Kafka instance (GET /api/kafkas_mgmt/v1/kafkas/{id}) in
 * `status`, with the original's `status.metadata` map, plus the servicebinding.io binding Secret.
 */
import { RhoasConditionsOf, RhoasConditionType, RhoasKinds, RhoasMessage } from '@gitops/api';
import { oauthTokenUrl } from '../config.ts';
import { writeBindingSecret } from '../connection.ts';
import { accessToken, type KindProcessor, validate } from '../processing.ts';

export const KAFKA_CLOUD_UI = 'https://console.redhat.com/beta/application-services/streams/kafkas/';

export const kafkaConnectionProcessor: KindProcessor = {
  kind: RhoasKinds.KafkaConnection,
  conditions: RhoasConditionsOf.KafkaConnection,
  addsLabels: true,
  async process(ctx, { object, progress, status, signal }) {
    validate(progress, object, [
      ['spec', 'object'],
      ['spec.accessTokenSecretName', 'secretName'],
      ['spec.credentials', 'object'],
      ['spec.credentials.serviceAccountSecretName', 'secretName'],
      ['spec.kafkaId', 'id'],
    ]);
    const spec = object.spec as {
      accessTokenSecretName: string;
      kafkaId: string;
      credentials: { serviceAccountSecretName: string };
    };
    const namespace = object.metadata.namespace ?? '';
    const token = await accessToken(ctx, progress, namespace, spec.accessTokenSecretName, signal);
    const kafka = await progress.step(RhoasConditionType.FoundKafkaById, () =>
      ctx.client.getKafka(token, spec.kafkaId, signal),
    );
    const metadata = {
      saslMechanism: 'PLAIN',
      securityProtocol: 'SASL_SSL',
      cloudUI: `${KAFKA_CLOUD_UI}${spec.kafkaId}`,
      provider: 'rhoas',
      type: 'kafka',
    };
    const binding = await writeBindingSecret(
      ctx,
      progress,
      object,
      RhoasKinds.KafkaConnection,
      {
        type: 'kafka',
        provider: 'rhoas',
        'bootstrap-servers': kafka.bootstrapServerHost,
        'sasl.mechanism': metadata.saslMechanism,
        'security.protocol': metadata.securityProtocol,
        'oauth-token-url': oauthTokenUrl(ctx.config),
      },
      spec.credentials.serviceAccountSecretName,
      signal,
    );
    status.message = RhoasMessage.created;
    status.updated = ctx.now().toISOString();
    status.bootstrapServerHost = kafka.bootstrapServerHost;
    status.serviceAccountSecretName = spec.credentials.serviceAccountSecretName;
    status.metadata = metadata;
    status.binding = { name: binding };
  },
};
