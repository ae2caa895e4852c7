import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { clusterSecretStringData, renderClusterSecret } from './cluster-secret.render.ts';

const input = {
  environmentId: '11111111-1111-1111-1111-111111111111',
  clusterUserId: '22222222-2222-2222-2222-222222222222',
  apiUrl: 'https://api.example.com:6443',
  bearerToken: 'tok',
  insecure: true,
  namespaces: [] as string[],
  clusterResources: false,
  namespace: 'argocd',
};

describe('Argo CD cluster Secret', () => {
  it('names the cluster managed-env-<id>, keeps environments on one server distinct, and scopes it to the tenant project', () => {
    const data = clusterSecretStringData(input);
    assert.deepEqual(data, {
      name: `managed-env-${input.environmentId}`,
      server: `https://api.example.com:6443?managedEnvironment=${input.environmentId}`,
      config: JSON.stringify({ bearerToken: 'tok', tlsClientConfig: { insecure: true } }),
      project: `app-project-${input.clusterUserId}`,
    });
  });

  it('writes namespaces (comma-separated) and clusterResources only for a namespace-scoped environment', () => {
    const data = clusterSecretStringData({ ...input, namespaces: ['a', 'b'], clusterResources: true });
    assert.equal(data.namespaces, 'a,b');
    assert.equal(data.clusterResources, 'true');
  });

  it('passes the CA bundle the backend verified as tlsClientConfig.caData, and none when TLS is not verified', () => {
    const caData = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString(
      'base64',
    );
    const verified = JSON.parse(clusterSecretStringData({ ...input, insecure: false, caData }).config!);
    assert.deepEqual(verified.tlsClientConfig, { insecure: false, caData });
    const skipped = JSON.parse(clusterSecretStringData({ ...input, insecure: true, caData }).config!);
    assert.deepEqual(skipped.tlsClientConfig, { insecure: true });
    const systemTrust = JSON.parse(
      clusterSecretStringData({ ...input, insecure: false, caData: null }).config!,
    );
    assert.deepEqual(systemTrust.tlsClientConfig, { insecure: false });
  });

  it('carries the cluster and database-id labels and base64 data', () => {
    const secret = renderClusterSecret(input) as { data: Record<string, string> } & ReturnType<
      typeof renderClusterSecret
    >;
    assert.equal(secret.metadata.name, `managed-env-${input.environmentId}`);
    assert.equal(secret.metadata.labels?.['argocd.argoproj.io/secret-type'], 'cluster');
    assert.equal(secret.metadata.labels?.['managed-gitops.redhat.com/database-id'], input.environmentId);
    assert.equal(Buffer.from(secret.data.name!, 'base64').toString(), `managed-env-${input.environmentId}`);
  });
});
