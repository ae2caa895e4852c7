/**
 * The operator's ClusterRole from manifests/components/rhoas-operator/rbac.yaml is enough: the operator runs
 * here with a service-account token bound to exactly that role (a copy with a unique name, so it never
 * touches the one tier 3a applies) and completes the console's flow, Secrets and Events included.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { repoRoot } from '@gitops/local-env';
import { HttpMethod, KubeConfig, type KubeObject, kubeRequest, loadKubeConfig } from '@gitops/shared';
import { randomSuffix } from '@gitops/shared/testing';
import { afterAll, describe, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { eventually, type RhoasFixture, TOKEN_SECRET, useRhoasFixture } from './testing/rhoas-fixture.ts';

const admin = loadKubeConfig(process.env.KUBECONFIG);
const roleName = `gitops-rhoas-operator-test-${randomSuffix()}`;
/** The same role without its Secrets rule (for the "forbidden" case). */
const noSecretsRoleName = `gitops-rhoas-operator-nosecrets-${randomSuffix()}`;

async function operatorRole(name = roleName, withSecrets = true): Promise<KubeObject> {
  const file = join(repoRoot, 'manifests', 'components', 'rhoas-operator', 'rbac.yaml');
  const docs = parseAllDocuments(await readFile(file, 'utf8')).map((d) => d.toJS() as KubeObject);
  const role = docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === 'gitops-rhoas-operator');
  if (!role) throw new Error('no ClusterRole gitops-rhoas-operator in rbac.yaml');
  const rules = (role.rules as { resources: string[] }[]).filter(
    (r) => withSecrets || !r.resources.includes('secrets'),
  );
  return { ...role, metadata: { name }, rules };
}

/** A kubeconfig with a token of service account `rhoas-operator` in `namespace`, bound to the role. */
const serviceAccountKubeConfig = (name: string, withSecrets: boolean) => async (namespace: string) => {
  await kubeRequest(admin, {
    method: HttpMethod.POST,
    path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
    body: await operatorRole(name, withSecrets),
  });
  await kubeRequest(admin, {
    method: HttpMethod.POST,
    path: `/api/v1/namespaces/${namespace}/serviceaccounts`,
    body: { metadata: { name: 'rhoas-operator' } },
  });
  await kubeRequest(admin, {
    method: HttpMethod.POST,
    path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name: 'rhoas-operator', namespace }],
    },
  });
  // The API server's RBAC authorizer reads roles and bindings from its cache: the operator starts once this
  // binding counts, or its first requests could be refused for a moment (and logged with a 403).
  await eventually('the operator role binding in effect', async () => {
    const review = (await kubeRequest(admin, {
      method: HttpMethod.POST,
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${namespace}:rhoas-operator`,
          resourceAttributes: { verb: 'watch', resource: 'cloudservicesrequests', group: 'rhoas.redhat.com' },
        },
      },
    })) as { status: { allowed: boolean } };
    return review.status.allowed ? true : undefined;
  });
  const request = (await kubeRequest(admin, {
    method: HttpMethod.POST,
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/rhoas-operator/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  })) as { status: { token: string } };
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('the test kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: 'test' }],
    users: [{ name: 'rhoas-operator', token: request.status.token }],
    contexts: [{ name: 'sa', cluster: 'test', user: 'rhoas-operator' }],
    currentContext: 'sa',
  });
  return kc;
};

async function removeRole(name: string) {
  for (const plural of ['clusterrolebindings', 'clusterroles'])
    await kubeRequest(admin, {
      method: HttpMethod.DELETE,
      path: `/apis/rbac.authorization.k8s.io/v1/${plural}/${name}`,
    }).catch(() => undefined);
}

/**
 * The fixture of the enclosing describe block, its operator running bound to the role `name` (with or without
 * the Secrets rule); the role and its binding are removed after the fixture's cleanup (after hooks run in
 * reverse order), even when the fixture could not be made.
 */
function useOperatorBoundTo(name: string, withSecrets: boolean): RhoasFixture {
  afterAll(() => removeRole(name));
  return useRhoasFixture({ operatorKubeConfig: serviceAccountKubeConfig(name, withSecrets) });
}

describe('the operator with only the RBAC of its manifests', () => {
  const f = useOperatorBoundTo(roleName, true);

  it('creates the service-account Secret, labels a KafkaConnection, writes its binding Secret and Events', async () => {
    await f.create('CloudServiceAccountRequest', 'sa', {
      serviceAccountName: 'rbac-sa',
      serviceAccountSecretName: 'rbac-sa-secret',
      accessTokenSecretName: TOKEN_SECRET,
    });
    await f.waitFinished('CloudServiceAccountRequest', 'sa', 'True');
    assert.ok((await f.getSecret('rbac-sa-secret'))?.data?.['client-id']);
    // A re-trigger updates the Secret it owns (patch).
    await f.forceRefresh('CloudServiceAccountRequest', 'sa');
    await f.waitFinished('CloudServiceAccountRequest', 'sa', 'True');

    const kafka = f.seed.kafkas[0];
    assert.ok(kafka);
    await f.create('KafkaConnection', 'orders', {
      kafkaId: kafka.id,
      accessTokenSecretName: TOKEN_SECRET,
      credentials: { serviceAccountSecretName: 'rbac-sa-secret' },
    });
    const cr = await f.waitFinished('KafkaConnection', 'orders', 'True');
    assert.equal(cr.metadata.labels?.['app.kubernetes.io/managed-by'], 'rhoas');
    assert.ok((await f.getSecret('orders-binding'))?.data?.['client-secret']);
    await eventually('a Finished Event', async () =>
      (await f.events('orders')).some((e) => e.reason === 'Finished'),
    );
    assert.ok(!f.logText().includes('"statusCode":403'), 'no request was forbidden');
  });
});

describe('the operator when the API server refuses a read it needs', () => {
  const f = useOperatorBoundTo(noSecretsRoleName, false);

  it('shows the refusal on Finished (KubernetesError) instead of staying silent, and keeps running', async () => {
    await f.create('CloudServicesRequest', 'forbidden', { accessTokenSecretName: TOKEN_SECRET });
    const cr = await f.waitFinished('CloudServicesRequest', 'forbidden', 'False');
    const finished = cr.status?.conditions?.find((c) => c.type === 'Finished');
    assert.equal(finished?.reason, 'KubernetesError');
    assert.match(finished?.message ?? '', /forbidden/i);
    assert.equal(cr.status?.conditions?.find((c) => c.type === 'AcccesTokenSecretValid')?.status, 'Unknown');
    assert.ok(f.operator.ready());
  });
});
