/**
 * Placement of tenants on engine instances, through the backend as users drive it: a namespace label names
 * the instance, otherwise the least loaded one; a tenant stays where it was placed; an unknown or cordoned
 * instance is refused with a clear condition and nothing is written until it can be placed. Everything of a
 * tenant (applications, repository credentials) goes to its instance; a tenant on an instance of another
 * cluster reaches its own namespace with a token for that namespace only.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { API_GROUP_VERSION, Label, PlacementMessage } from '@gitops/api';
import { repositoryCredential } from '@gitops/api/testing';
import {
  completeApplicationAdoption,
  completeApplicationRelease,
  type EngineInstanceRow,
  getApplicationByName,
  getClusterUserByNamespaceUid,
  getManagedEnvironmentWithCredentials,
  getWorkspaceEnvironment,
  SealContext,
  setEngineInstanceCordoned,
  upsertEngineInstance,
} from '@gitops/db';
import {
  clusterIdentity,
  getPathIfExists,
  HttpMethod,
  KubeApiError,
  KubeConfig,
  type KubeObject,
  kubeRequest,
} from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, test } from 'vitest';
import type { Backend } from './app.ts';
import { BACKEND_SHARD_LABEL } from './config.ts';
import { automatedTestDataSpec, useBackendFixture } from './testing/backend-fixture.ts';
import { WORKSPACE_SERVICE_ACCOUNT } from './workspace-access/workspace-access.ts';

const spec = automatedTestDataSpec;

describe('tenant placement on engine instances', () => {
  const f = useBackendFixture();
  let backend: Backend;
  let own: EngineInstanceRow;
  let other: EngineInstanceRow;

  /**
   * Engine instance `name` registered as its agent does at start, with an Argo CD namespace of its own
   * (`namespacePrefix-…`), on this cluster unless `onCluster` names another cluster identity.
   */
  async function registerInstance(name: string, namespacePrefix: string, onCluster?: string) {
    const namespace = await f.createNamespace(namespacePrefix);
    return await upsertEngineInstance(f.db, {
      name,
      namespaceName: namespace.name,
      namespaceUid: namespace.uid,
      clusterIdentity: onCluster ?? (await clusterIdentity(f.kc)),
    });
  }

  beforeAll(async () => {
    backend = await f.startBackend();
    own = backend.engineInstance();
    // A second Argo CD on this cluster, registered by its agent (as the agent does at start).
    other = await registerInstance(`other-${randomUUID().slice(0, 8)}`, 'argocd-other');
  });

  const applicationOf = (object: KubeObject) => f.applicationOf(object);
  const errorOccurred = (namespace: string, name: string) =>
    eventually(`ErrorOccurred of ${namespace}/${name}`, async () => {
      const live = await f.getDeployment(namespace, name);
      const condition = live && (live.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred');
      return condition?.status === 'True' ? condition : undefined;
    });
  const placedOn = async (namespaceUid: string) =>
    (await getClusterUserByNamespaceUid(f.db, namespaceUid))?.engine_instance_id ?? null;

  const labelNamespace = (name: string, instance: string) =>
    kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `/api/v1/namespaces/${name}`,
      body: { metadata: { labels: { [Label.EngineInstance]: instance } } },
      contentType: 'application/merge-patch+json',
    });
  const serviceAccountOf = (namespace: string) =>
    getPathIfExists(f.kc, `/api/v1/namespaces/${namespace}/serviceaccounts/${WORKSPACE_SERVICE_ACCOUNT}`);
  /** The Workspace environment of the tenant of this namespace, once it has credentials. */
  const workspaceReach = (namespaceUid: string) =>
    eventually('workspace credentials', async () => {
      const tenant = await getClusterUserByNamespaceUid(f.db, namespaceUid);
      const workspace = tenant && (await getWorkspaceEnvironment(f.db, tenant.id));
      if (!workspace?.cluster_credentials_id) return undefined;
      const found = await getManagedEnvironmentWithCredentials(f.db, workspace.id);
      return found?.credentials
        ? { environment: found.environment, credentials: found.credentials }
        : undefined;
    });
  /** Uses `token` against the API server: ConfigMaps in `namespace` yes, in `other` no, Namespaces no. */
  async function assertTokenScopedTo(token: string, namespace: string, other: string) {
    const cluster = f.kc.getCurrentCluster();
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: cluster?.server ?? '', caData: cluster?.caData, skipTLSVerify: false }],
      users: [{ name: 'u', token }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const configMap = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });
    await kubeRequest(kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${namespace}/configmaps`,
      body: configMap('allowed'),
    });
    const forbidden = async (request: Parameters<typeof kubeRequest>[1]) => {
      const err = await kubeRequest(kc, request).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof KubeApiError && err.statusCode === 403, `expected 403, got ${String(err)}`);
    };
    await forbidden({
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${other}/configmaps`,
      body: configMap('refused'),
    });
    await forbidden({ method: HttpMethod.GET, path: '/api/v1/namespaces' });
  }

  test('the namespace label names the instance; the next tenant goes to the least loaded one; each stays', async () => {
    const labelled = await f.createNamespace('labelled', { [Label.EngineInstance]: other.name });
    const first = await applicationOf(await f.createDeployment(labelled.name, 'a', spec));
    assert.equal(first.engine_instance_id, other.id, 'the label wins');
    assert.equal(await placedOn(labelled.uid), other.id);

    // `other` now holds one application, the backend's own instance none: a tenant without a label goes there.
    const unlabelled = await f.createNamespace('unlabelled');
    const second = await applicationOf(await f.createDeployment(unlabelled.name, 'a', spec));
    assert.equal(second.engine_instance_id, own.id, 'the least loaded instance');

    // More deployments of each tenant follow it, whatever the load says now.
    for (let i = 0; i < 2; i++) {
      const more = await applicationOf(await f.createDeployment(labelled.name, `more-${i}`, spec));
      assert.equal(more.engine_instance_id, other.id);
    }
    const third = await applicationOf(await f.createDeployment(unlabelled.name, 'b', spec));
    assert.equal(
      third.engine_instance_id,
      own.id,
      'a placed tenant stays although its instance is busier now',
    );

    // Operators see the placement per instance in /metrics.
    const metrics = await backend.registry.metrics();
    const sample = (name: string, instance: string) =>
      metrics
        .split('\n')
        .find((line) => line.startsWith(`${name}{`) && line.includes(`engine_instance="${instance}"`))
        ?.split(' ')
        .at(-1);
    assert.equal(sample('gitops_engine_instance_applications', other.name), '3');
    assert.equal(sample('gitops_engine_instance_tenants', other.name), '1');
    assert.equal(sample('gitops_engine_instance_tenants', own.name), '1');
    assert.equal(sample('gitops_engine_instance_cordoned', other.name), '0');
  });

  test('a label naming an unknown instance gives a clear condition and no rows; once registered, the deployment is placed there', async () => {
    const name = `later-${randomUUID().slice(0, 8)}`;
    const tenant = await f.createNamespace('unknown', { [Label.EngineInstance]: name });
    const cr = await f.createDeployment(tenant.name, 'a', spec);
    const condition = await errorOccurred(tenant.name, 'a');
    assert.equal(condition.message, PlacementMessage.unknownInstance(name));
    assert.equal(await getApplicationByName(f.db, `gitopsdepl-${cr.metadata.uid}`), undefined);
    assert.equal(await placedOn(tenant.uid), null, 'the tenant is not placed anywhere else');

    const later = await registerInstance(name, 'argocd-later');
    const application = await eventually(
      'the deployment placed on the instance once it is registered',
      () => getApplicationByName(f.db, `gitopsdepl-${cr.metadata.uid}`),
      120_000,
    );
    assert.equal(application.engine_instance_id, later.id);
  });

  test('a cordoned instance takes no new tenant: named by a label it is refused, without a label another is chosen; its tenants stay', async () => {
    // A new instance whose name sorts first: with one application it is always the least loaded (or first
    // among equals) here, so only the cordon keeps a new tenant away from it.
    const first = await registerInstance(`aaa-${randomUUID().slice(0, 8)}`, 'argocd-aaa');
    const placedBefore = await f.createNamespace('before', { [Label.EngineInstance]: first.name });
    await applicationOf(await f.createDeployment(placedBefore.name, 'a', spec));
    assert.ok(await setEngineInstanceCordoned(f.db, first.name, true));
    try {
      const refused = await f.createNamespace('cordoned', { [Label.EngineInstance]: first.name });
      await f.createDeployment(refused.name, 'a', spec);
      assert.equal(
        (await errorOccurred(refused.name, 'a')).message,
        PlacementMessage.instanceCordoned(first.name),
      );
      const free = await f.createNamespace('free');
      const application = await applicationOf(await f.createDeployment(free.name, 'a', spec));
      assert.notEqual(application.engine_instance_id, first.id, 'the least loaded instance is cordoned');
      const stays = await applicationOf(await f.createDeployment(placedBefore.name, 'b', spec));
      assert.equal(stays.engine_instance_id, first.id, 'a tenant placed before the cordon stays');
    } finally {
      await setEngineInstanceCordoned(f.db, first.name, false);
    }
  });

  test('an instance on another cluster: only a label places a tenant there; its deployments without an environment reach the namespace with a token for that namespace only, which a move back takes away', async () => {
    // Registered by an agent on another cluster (its cluster identity differs from this one's).
    const remote = await registerInstance(
      `aaa-remote-${randomUUID().slice(0, 8)}`,
      'argocd-remote',
      `another-cluster-${randomUUID()}`,
    );

    // Empty and first by name, yet a tenant without a label stays on this cluster, with no credentials.
    const unlabelled = await f.createNamespace('stays-here');
    const here = await applicationOf(await f.createDeployment(unlabelled.name, 'a', spec));
    assert.notEqual(here.engine_instance_id, remote.id);
    const tenantHere = await getClusterUserByNamespaceUid(f.db, unlabelled.uid);
    assert.equal((await getWorkspaceEnvironment(f.db, tenantHere?.id ?? ''))?.cluster_credentials_id, null);
    assert.equal(await serviceAccountOf(unlabelled.name), undefined);

    // Labelled for the remote instance: the deployment is placed there, and its Workspace environment gets
    // credentials for this namespace, announced to that instance (its agent makes the cluster Secret).
    const labelled = await f.createNamespace('remote', { [Label.EngineInstance]: remote.name });
    const application = await applicationOf(await f.createDeployment(labelled.name, 'a', spec));
    assert.equal(application.engine_instance_id, remote.id);
    const reach = await workspaceReach(labelled.uid);
    assert.equal(application.managed_environment_id, reach.environment.id);
    assert.deepEqual(reach.credentials.namespaces, [labelled.name]);
    assert.equal(reach.credentials.cluster_resources, false);
    assert.equal(reach.credentials.api_url, f.kc.getCurrentCluster()?.server);
    const announced = await f.db
      .selectFrom('operation')
      .select('engine_instance_id')
      .where('resource_type', '=', 'ManagedEnvironment')
      .where('resource_id', '=', reach.environment.id)
      .execute();
    assert.deepEqual(
      announced.map((o) => o.engine_instance_id),
      [remote.id],
    );
    // What the token allows, asked of the API server with it: this namespace, nothing else.
    const token = backend.sealer.openString(reach.credentials.bearer_token_sealed, SealContext.bearerToken);
    await assertTokenScopedTo(token, labelled.name, unlabelled.name);

    // A tenant of this cluster with such a deployment, labelled for the remote instance later: it moves, and
    // its namespace is reached the same way.
    await labelNamespace(unlabelled.name, remote.name);
    await eventually('the tenant moved to the remote instance', async () =>
      (await placedOn(unlabelled.uid)) === remote.id ? true : undefined,
    );
    const moved = await workspaceReach(unlabelled.uid);
    assert.deepEqual(moved.credentials.namespaces, [unlabelled.name]);
    assert.ok(await serviceAccountOf(unlabelled.name));

    // Moved back to this cluster: the credentials and the ServiceAccount (so every token of it) are gone.
    await labelNamespace(unlabelled.name, own.name);
    await eventually('the tenant back on this cluster without credentials', async () => {
      if ((await placedOn(unlabelled.uid)) !== own.id) return undefined;
      const workspace = await getWorkspaceEnvironment(f.db, moved.environment.cluster_user_id);
      if (workspace?.cluster_credentials_id !== null) return undefined;
      return (await serviceAccountOf(unlabelled.name)) === undefined ? true : undefined;
    });
    const rows = await f.db
      .selectFrom('cluster_credentials')
      .select('id')
      .where('cluster_user_id', '=', moved.environment.cluster_user_id)
      .execute();
    assert.deepEqual(rows, [], 'no credentials row is left behind');
  });

  test('a workspace token older than GITOPS_WORKSPACE_TOKEN_RENEW_AFTER is renewed, and the instance is told', async () => {
    const remote = await registerInstance(
      `renew-${randomUUID().slice(0, 8)}`,
      'argocd-renew',
      `another-cluster-${randomUUID()}`,
    );
    const tenant = await f.createNamespace('renewed', { [Label.EngineInstance]: remote.name });
    await applicationOf(await f.createDeployment(tenant.name, 'a', spec));
    const first = await workspaceReach(tenant.uid);
    const tokenOf = (sealed: Buffer) => backend.sealer.openString(sealed, SealContext.bearerToken);
    const firstToken = tokenOf(first.credentials.bearer_token_sealed);
    const announcements = () =>
      f.db
        .selectFrom('operation')
        .select(['id', 'state'])
        .where('resource_type', '=', 'ManagedEnvironment')
        .where('resource_id', '=', first.environment.id)
        .where('engine_instance_id', '=', remote.id)
        .execute();
    const announced = await announcements();
    assert.equal(announced.length, 1);
    // Its agent (none runs here) took it: a renewal must announce anew.
    await f.db
      .updateTable('operation')
      .set({ state: 'Completed', finished_at: new Date() })
      .where('id', '=', announced[0]?.id ?? '')
      .execute();

    // A replica configured to renew after one second (the default is 30 days).
    const renewing = await f.startBackend({ GITOPS_WORKSPACE_TOKEN_RENEW_AFTER: '1s' });
    try {
      const renewed = await eventually('a renewed token', async () => {
        const now = await workspaceReach(tenant.uid);
        return tokenOf(now.credentials.bearer_token_sealed) !== firstToken ? now : undefined;
      });
      assert.equal(renewed.credentials.id, first.credentials.id, 'renewed in place');
      assert.ok(
        (await announcements()).some((o) => o.state === 'Waiting'),
        'the instance is told to rewrite its cluster Secret',
      );
      await assertTokenScopedTo(
        tokenOf(renewed.credentials.bearer_token_sealed),
        tenant.name,
        remote.namespace_name,
      );
    } finally {
      await f.stopBackend(renewing);
    }
  });

  test('a deployment deleted while a move hands its Argo CD Application over is deleted once the new instance holds it (which prunes)', async () => {
    const tenant = await f.createNamespace('release-delete', { [Label.EngineInstance]: own.name });
    const application = await applicationOf(await f.createDeployment(tenant.name, 'a', spec));
    assert.equal(application.engine_instance_id, own.id);
    await labelNamespace(tenant.name, other.name);
    const moved = await eventually('the move', async () => {
      const row = await getApplicationByName(f.db, application.name);
      return row?.releasing_engine_instance_id === own.id ? row : undefined;
    });
    assert.equal(moved.engine_instance_id, other.id);

    // Deleted while `own` still holds (and may be releasing) the old Application: nothing is deleted yet, as
    // nothing could prune the resources if the release had already removed Argo CD's finalizer.
    await f.deleteDeployment(tenant.name, 'a');
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    assert.ok(await getApplicationByName(f.db, application.name), 'the row waits for the release');

    // `own`'s agent released it (what the agents do is done here: no agent runs in this test) ...
    assert.ok(await completeApplicationRelease(f.db, application.id, own.id));
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    assert.ok(
      await getApplicationByName(f.db, application.name),
      'the row waits until the new instance holds the Application (nothing would prune the resources)',
    );
    // ... and `other`'s agent created its Application, taking the resources over.
    assert.ok(await completeApplicationAdoption(f.db, application.id, other.id));
    await eventually('the row deleted after the release', async () =>
      (await getApplicationByName(f.db, application.name)) ? undefined : true,
    );
    const deletes = await f.db
      .selectFrom('operation')
      .select(['engine_instance_id', 'owner_name'])
      .where('resource_type', '=', 'Application')
      .where('resource_id', '=', application.id)
      .where('owner_name', '=', 'a')
      .where('state', '=', 'Waiting')
      .execute();
    assert.ok(
      deletes.some((o) => o.engine_instance_id === other.id),
      'the delete goes to the instance that now holds the Application',
    );
  });

  test("a tenant's repository credentials go to its instance", async () => {
    const tenant = await f.createNamespace('creds', { [Label.EngineInstance]: other.name });
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${tenant.name}/secrets`,
      body: {
        metadata: { name: 'creds' },
        type: 'managed-gitops.redhat.com/repository-credential',
        stringData: { username: 'jane', password: 'not-a-real-one' },
      },
    });
    const cr = (await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: `/apis/${API_GROUP_VERSION}/namespaces/${tenant.name}/gitopsdeploymentrepositorycredentials`,
      body: repositoryCredential(
        'creds',
        { repository: 'https://git.invalid/team/repo.git', secret: 'creds' },
        { labels: { [BACKEND_SHARD_LABEL]: f.runLabel } },
      ),
    })) as KubeObject;
    const row = await f.repositoryCredentialsRowOf(cr.metadata.uid!);
    assert.equal(row.engine_instance_id, other.id);
    assert.equal(await placedOn(tenant.uid), other.id);
  });
});
