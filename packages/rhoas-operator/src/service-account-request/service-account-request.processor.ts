/**
 * CloudServiceAccountRequest: creates a service account (POST /api/kafkas_mgmt/v1/service_accounts) and
 * writes its credentials to Secret `spec.serviceAccountSecretName` (keys client-id, client-secret), owned
 * by the CR. Unlike the original, a Secret this CR already owns is updated (the console re-triggers a CR
 * with a spec bump), and a Secret owned by something else fails the step before any service account is
 * created. Each processing creates one service account (as the original); deleting the CR deletes the
 * Secret but not the service account.
 */
import {
  type CloudServiceAccountRequest,
  RhoasConditionType,
  RhoasKinds,
  RhoasMessage,
  RhoasReason,
  ServiceAccountSecretKey,
} from '@gitops/api';
import {
  accessToken,
  applyOwnedSecret,
  checked,
  isControlledBy,
  type KindProcessor,
  kubeWriteFailure,
  readSecret,
  validate,
} from '../processing.ts';

export const serviceAccountRequestProcessor: KindProcessor<CloudServiceAccountRequest> = {
  kind: RhoasKinds.CloudServiceAccountRequest,
  addsLabels: false,
  async process(ctx, { object, progress, status, signal }) {
    validate(progress, object, [
      ['spec', 'object'],
      ['spec.accessTokenSecretName', 'secretName'],
      ['spec.serviceAccountName', 'text'],
      ['spec.serviceAccountSecretName', 'secretName'],
    ]);
    const spec = {
      accessTokenSecretName: checked(object.spec?.accessTokenSecretName, 'spec.accessTokenSecretName'),
      serviceAccountName: checked(object.spec?.serviceAccountName, 'spec.serviceAccountName'),
      serviceAccountSecretName: checked(
        object.spec?.serviceAccountSecretName,
        'spec.serviceAccountSecretName',
      ),
      serviceAccountDescription: object.spec?.serviceAccountDescription,
    };
    const namespace = object.metadata.namespace ?? '';
    const token = await accessToken(ctx, progress, namespace, spec.accessTokenSecretName, signal);
    const existing = await readSecret(ctx, namespace, spec.serviceAccountSecretName, signal);
    if (existing && !isControlledBy(existing, object))
      progress.fail(
        RhoasConditionType.ServiceAccountSecretCreated,
        RhoasReason.SecretConflict,
        RhoasMessage.secretConflict(spec.serviceAccountSecretName),
      );
    const account = await progress.step(RhoasConditionType.ServiceAccountCreated, () =>
      ctx.client.createServiceAccount(
        token,
        {
          name: spec.serviceAccountName,
          description: spec.serviceAccountDescription ?? '',
        },
        signal,
      ),
    );
    try {
      await applyOwnedSecret(
        ctx,
        object,
        RhoasKinds.CloudServiceAccountRequest,
        {
          name: spec.serviceAccountSecretName,
          stringData: {
            [ServiceAccountSecretKey.clientId]: account.clientId,
            [ServiceAccountSecretKey.clientSecret]: account.clientSecret,
          },
        },
        signal,
      );
    } catch (err) {
      const failure = kubeWriteFailure(
        RhoasConditionType.ServiceAccountSecretCreated,
        RhoasReason.SecretWriteFailed,
        `Secret ${spec.serviceAccountSecretName}`,
        err,
      );
      progress.fail(failure.condition, failure.reason, failure.message, failure.transient);
    }
    progress.pass(RhoasConditionType.ServiceAccountSecretCreated);
    status.message = RhoasMessage.created;
    status.updated = ctx.now().toISOString();
    status.serviceAccountSecretName = spec.serviceAccountSecretName;
  },
};
