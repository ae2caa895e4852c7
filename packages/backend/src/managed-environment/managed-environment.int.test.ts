import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { API_GROUP_VERSION } from '@gitops/api';
import { managedEnvironment } from '@gitops/api/testing';
import {
  failOperation,
  getApiCrMappingByUid,
  getApplicationByName,
  getManagedEnvironment,
  startOperation,
} from '@gitops/db';
import { HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually, listEvents, randomSuffix } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, test } from 'vitest';
import type { Backend } from '../app.ts';
import { type BackendFixture, createBackendFixture } from '../testing/backend-fixture.ts';
import { BEARER_TOKEN_CONTEXT } from './managed-environment.store.ts';

const SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';
const envPath = (ns: string, name = '') =>
  `/apis/${API_GROUP_VERSION}/namespaces/${ns}/gitopsdeploymentmanagedenvironments${name ? `/${name}` : ''}`;

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

describe('ManagedEnvironment reconciler', () => {
  let f: BackendFixture;
  let backend: Backend;
  let tenant: { name: string; uid: string };
  let kubeconfigText: (token: string) => string;
  let token: string;
  const cleanupPaths: string[] = [];

  const request = (method: HttpMethod, path: string, body?: unknown, contentType?: string) =>
    kubeRequest(f.kc, { method, path, body, contentType });

  beforeAll(async () => {
    f = await createBackendFixture();
    // A failed agent operation is announced again this long after the failure (default 1 minute).
    backend = await f.startBackend({ GITOPS_OPERATION_RETRY_INTERVAL: '2s' });
    tenant = await f.createNamespace('menv');
    const cluster = f.kc.getCurrentCluster()!;
    const caData =
      cluster.caData ?? (cluster.caFile ? readFileSync(cluster.caFile).toString('base64') : undefined);
    kubeconfigText = (t) =>
      JSON.stringify({
        clusters: [{ name: 'c', cluster: { server: cluster.server, 'certificate-authority-data': caData } }],
        users: [{ name: 'u', user: { token: t } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      });
    const sa = `menv-${randomSuffix()}`;
    await request(HttpMethod.POST, `/api/v1/namespaces/${tenant.name}/serviceaccounts`, {
      metadata: { name: sa },
    });
    await request(HttpMethod.POST, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: sa },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: tenant.name }],
    });
    await request(HttpMethod.POST, '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: sa },
      rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['list', 'get'] }],
    });
    await request(HttpMethod.POST, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: `${sa}-ns` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: sa },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: tenant.name }],
    });
    cleanupPaths.push(
      `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${sa}`,
      `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${sa}-ns`,
      `/apis/rbac.authorization.k8s.io/v1/clusterroles/${sa}`,
    );
    // The grants count before the token is used: the RBAC authorizer reads bindings from a cache, and a
    // refused first check would make a test wait for the 30 s re-check.
    await eventually('the ServiceAccount may list namespaces', async () => {
      const review = (await request(HttpMethod.POST, '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${tenant.name}:${sa}`,
          resourceAttributes: { verb: 'list', resource: 'namespaces', group: '' },
        },
      })) as { status: { allowed: boolean } };
      return review.status.allowed ? true : undefined;
    });
    const answer = (await request(
      HttpMethod.POST,
      `/api/v1/namespaces/${tenant.name}/serviceaccounts/${sa}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    )) as { status: { token: string } };
    token = answer.status.token;
  });
  afterAll(async () => {
    for (const path of cleanupPaths) await request(HttpMethod.DELETE, path).catch(() => {});
    await f?.cleanup();
  });

  async function createSecret(name: string, kubeconfig: string) {
    await request(HttpMethod.POST, `/api/v1/namespaces/${tenant.name}/secrets`, {
      metadata: { name },
      type: 'managed-gitops.redhat.com/managed-environment',
      data: { kubeconfig: Buffer.from(kubeconfig).toString('base64') },
    });
  }
  async function createEnvironment(name: string, secret: string): Promise<KubeObject> {
    const cluster = f.kc.getCurrentCluster()!;
    return (await request(
      HttpMethod.POST,
      envPath(tenant.name),
      managedEnvironment(
        name,
        { apiURL: cluster.server, credentialsSecret: secret, allowInsecureSkipTLSVerify: false },
        { labels: { [SHARD_LABEL]: f.runLabel } },
      ),
    )) as KubeObject;
  }
  const conditionOf = (name: string, predicate: (c: Condition) => boolean) =>
    eventually(`condition of ${name}`, async () => {
      const env = (await request(HttpMethod.GET, envPath(tenant.name, name))) as {
        status?: { conditions?: Condition[] };
      };
      const c = env.status?.conditions?.find((x) => x.type === 'ConnectionInitializationSucceeded');
      return c && predicate(c) ? c : undefined;
    });

  test('a connected environment writes sealed credentials, the External environment, its mapping and one operation', async () => {
    await createSecret('ok', kubeconfigText(token));
    const env = await createEnvironment('ok', 'ok');
    await conditionOf('ok', (c) => c.status === 'True');
    const mapping = await eventually('mapping', () => getApiCrMappingByUid(f.db, env.metadata.uid!));
    const environment = await getManagedEnvironment(f.db, mapping.managed_environment_id!);
    assert.equal(environment?.kind, 'External');
    const credentials = await f.db
      .selectFrom('cluster_credentials')
      .selectAll()
      .where('id', '=', environment.cluster_credentials_id!)
      .executeTakeFirstOrThrow();
    assert.equal(backend.sealer.openString(credentials.bearer_token_sealed, BEARER_TOKEN_CONTEXT), token);
    const operations = await f.db
      .selectFrom('operation')
      .selectAll()
      .where('resource_id', '=', environment.id)
      .execute();
    assert.equal(operations.length, 1);
    assert.equal(operations[0]!.resource_type, 'ManagedEnvironment');
    assert.equal(operations[0]!.owner_uid, env.metadata.uid);

    // A re-check with the same outcome writes nothing: no new operation, same lastTransitionTime.
    const before = await conditionOf('ok', () => true);
    // Touching the Secret re-runs the checks.
    await request(
      HttpMethod.PATCH,
      `/api/v1/namespaces/${tenant.name}/secrets/ok`,
      { metadata: { annotations: { touched: 'yes' } } },
      'application/merge-patch+json',
    );
    // Whatever the watch does with the touch, a re-check runs to the end before the comparison (a fixed
    // pause could end before it ran and compare nothing).
    backend.environments.queue.add(`${tenant.name}/ok`);
    await backend.environments.queue.whenIdle();
    const after = await conditionOf('ok', () => true);
    assert.equal(after.lastTransitionTime, before.lastTransitionTime);
    const again = await f.db
      .selectFrom('operation')
      .select('id')
      .where('resource_id', '=', environment.id)
      .execute();
    assert.equal(again.length, 1);
  });

  test("a tenant row recorded under another name of the namespace's uid follows the namespace, as for the other kinds", async () => {
    // As a database restored from elsewhere may hold it: the agent deploys into the row's namespace name.
    await f.db
      .updateTable('cluster_user')
      .set({ namespace_name: 'a-stale-name' })
      .where('namespace_uid', '=', tenant.uid)
      .execute();
    await createSecret('renamed', kubeconfigText(token));
    const env = await createEnvironment('renamed', 'renamed');
    await conditionOf('renamed', (c) => c.status === 'True');
    await eventually('mapping', () => getApiCrMappingByUid(f.db, env.metadata.uid!));
    const row = await f.db
      .selectFrom('cluster_user')
      .select('namespace_name')
      .where('namespace_uid', '=', tenant.uid)
      .executeTakeFirstOrThrow();
    assert.equal(row.namespace_name, tenant.name);
  });

  test('an operation the agent failed: a Warning Event on the CR with the reason, and the environment is announced again', async () => {
    await createSecret('agent-fails', kubeconfigText(token));
    const env = await createEnvironment('agent-fails', 'agent-fails');
    await conditionOf('agent-fails', (c) => c.status === 'True');
    const mapping = await eventually('mapping', () => getApiCrMappingByUid(f.db, env.metadata.uid!));
    const operationsOfEnvironment = () => f.operationsOf(mapping.managed_environment_id!);
    const [first] = await operationsOfEnvironment();
    assert.ok(first);
    // The agent takes the operation and gives up on it.
    assert.equal((await startOperation(f.db, first.id)).status, 'started');
    assert.ok(await failOperation(f.db, first.id, 'no key to unseal the credentials (key k9)'));

    // The user sees why in a Warning Event on the ManagedEnvironment; the connection condition stays True.
    const event = await eventually('the AgentOperationFailed Event', async () => {
      const events = await listEvents(f.kc, tenant.name, { uid: env.metadata.uid! });
      return events.find((e) => e.reason === 'AgentOperationFailed');
    });
    assert.equal(event.type, 'Warning');
    assert.match(event.message, /no key to unseal the credentials \(key k9\)/);
    assert.equal((await conditionOf('agent-fails', () => true)).status, 'True');

    // And the environment is announced to the agent again.
    const retry = await eventually('a new operation for the environment', async () =>
      (await operationsOfEnvironment()).find((o) => o.id !== first.id && o.state === 'Waiting'),
    );
    assert.equal(retry.owner_uid, env.metadata.uid);
    assert.equal(retry.resource_type, 'ManagedEnvironment');
  });

  test('a failing check sets False with observedGeneration; fixing the Secret makes it True', async () => {
    await createSecret('later', kubeconfigText('wrong-token'));
    const env = await createEnvironment('later', 'later');
    const failed = await conditionOf('later', (c) => c.status === 'False');
    assert.equal(failed.reason, 'UnableToValidateClusterCredentials');
    assert.equal(failed.observedGeneration, env.metadata.generation);
    await request(
      HttpMethod.PATCH,
      `/api/v1/namespaces/${tenant.name}/secrets/later`,
      { data: { kubeconfig: Buffer.from(kubeconfigText(token)).toString('base64') } },
      'application/merge-patch+json',
    );
    await conditionOf('later', (c) => c.status === 'True' && c.reason === 'Succeeded');
  });

  test('an environment deleted while the backend was down loses its rows at the next start (orphan sweep)', async () => {
    await createSecret('missed', kubeconfigText(token));
    const env = await createEnvironment('missed', 'missed');
    await conditionOf('missed', (c) => c.status === 'True');
    const mapping = await eventually('mapping', () => getApiCrMappingByUid(f.db, env.metadata.uid!));
    await f.stopBackend(backend);
    await request(HttpMethod.DELETE, envPath(tenant.name, 'missed'));
    backend = await f.startBackend();
    await eventually(
      'rows of the missed delete gone',
      async () => (await getManagedEnvironment(f.db, mapping.managed_environment_id!)) === undefined,
    );
  });

  test('deleting an environment deletes its rows and announces it and every application that used it, in one transaction', async () => {
    await createSecret('used', kubeconfigText(token));
    const env = await createEnvironment('used', 'used');
    await conditionOf('used', (c) => c.status === 'True');
    const mapping = await eventually('mapping', () => getApiCrMappingByUid(f.db, env.metadata.uid!));
    const envId = mapping.managed_environment_id!;
    const gd = await f.createDeployment(tenant.name, 'on-used', {
      source: { repoURL: 'https://github.com/example/repo', path: 'p' },
      destination: { environment: 'used' },
      type: 'manual',
    });
    const app = await eventually('application on the environment', async () => {
      const a = await getApplicationByName(f.db, `gitopsdepl-${gd.metadata.uid}`);
      return a?.managed_environment_id === envId ? a : undefined;
    });
    assert.deepEqual((app.spec as { destination: unknown }).destination, { namespace: tenant.name });
    await request(HttpMethod.DELETE, envPath(tenant.name, 'used'));
    await eventually(
      'environment rows gone',
      async () => (await getManagedEnvironment(f.db, envId)) === undefined,
    );
    const updated = await getApplicationByName(f.db, `gitopsdepl-${gd.metadata.uid}`);
    assert.equal(updated?.managed_environment_id, null);
    // Without an agent the earlier Waiting operations are reused (one per resource): both are due.
    const envOps = await f.db.selectFrom('operation').selectAll().where('resource_id', '=', envId).execute();
    assert.ok(envOps.some((o) => o.resource_type === 'ManagedEnvironment' && o.state === 'Waiting'));
    const appOps = await f.db
      .selectFrom('operation')
      .selectAll()
      .where('resource_id', '=', app.id)
      .where('resource_type', '=', 'Application')
      .execute();
    assert.ok(appOps.some((o) => o.state === 'Waiting'));
    // The GitOpsDeployment reports the unusable environment.
    await eventually('ErrorOccurred', async () => {
      const current = await f.getDeployment(tenant.name, 'on-used');
      const conditions = (current?.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
      return conditions.some(
        (c) =>
          c.type === 'ErrorOccurred' &&
          c.status === 'True' &&
          c.message ===
            'Unable to reconcile the ManagedEnvironment. Verify that the ManagedEnvironment and Secret are correctly defined, and have valid credentials',
      )
        ? true
        : undefined;
    });
  });
  test("a replica whose cache still shows an earlier ManagedEnvironment of the name leaves the current one's rows alone", async () => {
    await createSecret('again', kubeconfigText(token));
    const first = await createEnvironment('again', 'again');
    const firstMapping = await eventually('the first mapping', () =>
      getApiCrMappingByUid(f.db, first.metadata.uid!),
    );
    // Replica B holds the first incarnation; its watch then stops, so nothing newer reaches it.
    const b = await f.startBackend();
    await eventually('replica B caches it', () =>
      b.environments.informer.get(tenant.name, 'again') ? true : undefined,
    );
    await b.environments.informer.stop();
    await b.environments.queue.whenIdle();
    await request(HttpMethod.DELETE, envPath(tenant.name, 'again'));
    await eventually(
      'the first environment deleted',
      async () => (await getManagedEnvironment(f.db, firstMapping.managed_environment_id!)) === undefined,
    );
    const second = await createEnvironment('again', 'again');
    const mapping = await eventually('the second mapping', () =>
      getApiCrMappingByUid(f.db, second.metadata.uid!),
    );
    const environment = await getManagedEnvironment(f.db, mapping.managed_environment_id!);
    assert.ok(environment);

    b.environments.enqueueAll();
    await b.environments.queue.whenIdle();
    await f.stopBackend(b);
    assert.deepEqual(
      await getManagedEnvironment(f.db, mapping.managed_environment_id!),
      environment,
      "B deleted the current ManagedEnvironment's rows",
    );
    assert.deepEqual(await getApiCrMappingByUid(f.db, second.metadata.uid!), mapping);
  });
});
