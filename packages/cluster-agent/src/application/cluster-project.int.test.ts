/**
 * The tenant's two AppProjects against a real PostgreSQL and a real API server (no Argo CD controller): an
 * Application whose External environment allows cluster-scoped objects is in `app-project-<id>-cluster`
 * (the only project with a cluster resource whitelist, never listing in-cluster); every other one stays in
 * `app-project-<id>`; so is one that asks Argo CD to create its namespace (`CreateNamespace=true`) through
 * an External environment; a change of the environment's scope (or of that option) moves it, and the unused
 * project goes.
 * Rows are written the way the backend writes them (one transaction with the operation); the Operation CR is
 * created the way the relay does.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type ClusterCredentialsInput,
  type ClusterUserRow,
  createSealer,
  decodeSealingKey,
  deleteApplication,
  deleteManagedEnvironment,
  ensureWorkspaceEnvironment,
  getOperation,
  insertApplication,
  insertExternalEnvironment,
  type OperationRequest,
  SealContext,
  type Sealer,
  updateApplication,
  updateEnvironmentCredentials,
  upsertEngineInstance,
} from '@gitops/db';
import { givenOperation, givenRepositoryCredentials } from '@gitops/db/testing';
import { collectionPath, getObject, HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { useAgentFixture } from '../testing/agent-fixture.ts';

const ARGO = 'argoproj.io/v1alpha1';

interface Scope {
  namespaces: string[];
  clusterResources: boolean;
}

interface Project extends KubeObject {
  spec: {
    destinations?: { name: string; namespace: string }[];
    clusterResourceWhitelist?: { group: string; kind: string }[];
    sourceRepos?: string[];
  };
}

describe('the tenant’s AppProjects and cluster-scoped resources', () => {
  const f = useAgentFixture({ prefix: 'cres' });
  let sealer: Sealer;
  let engineInstanceId: string;

  beforeAll(async () => {
    sealer = createSealer({
      keys: [{ id: 'test', key: decodeSealingKey(f.encryptionKey) }],
      activeKeyId: 'test',
    });
    const agent = await f.startAgent(f.config({ OPERATION_SWEEP_INTERVAL: '500ms' }));
    engineInstanceId = agent.engineInstance()!.id;
  });

  async function givenTenant(prefix: string): Promise<ClusterUserRow> {
    const namespace = `cres-${prefix}-${f.suffix}`;
    await f.createNamespace(namespace);
    return await f.givenTenant(namespace);
  }

  const project = (name: string) =>
    getObject(f.kc, {
      apiVersion: ARGO,
      kind: 'AppProject',
      name,
      namespace: f.argoCdNamespace,
    }) as Promise<Project | undefined>;
  const mainProject = (tenant: ClusterUserRow) => `app-project-${tenant.id}`;
  const clusterProject = (tenant: ClusterUserRow) => `app-project-${tenant.id}-cluster`;

  /** Inserts one operation (as the backend does after writing its rows) and plays the relay. */
  async function announce(request: Omit<OperationRequest, 'engineInstanceId'>): Promise<string> {
    const operation = await givenOperation(f.db, { engineInstanceId, ...request });
    await f.relay(operation);
    return operation.id;
  }

  const credentials = (scope: Scope, by: Sealer = sealer): ClusterCredentialsInput => ({
    apiUrl: 'https://cluster.example.test:6443',
    bearerTokenSealed: by.seal(`token-${randomUUID()}`, SealContext.bearerToken),
    allowInsecureSkipTlsVerify: true,
    namespaces: scope.namespaces,
    clusterResources: scope.clusterResources,
  });

  async function givenEnvironment(tenant: ClusterUserRow, scope: Scope, by?: Sealer): Promise<string> {
    const created = await f.db.transaction().execute((trx) =>
      insertExternalEnvironment(trx, {
        clusterUserId: tenant.id,
        name: `env-${randomUUID().slice(0, 8)}`,
        credentials: credentials(scope, by),
      }),
    );
    await announce({
      resourceType: 'ManagedEnvironment',
      resourceId: created.environment.id,
      ownerUserId: tenant.id,
    });
    return created.environment.id;
  }

  const specOf = (repoURL: string, syncOptions?: string[]) => ({
    source: { repoURL, path: 'dev', targetRevision: 'main' },
    destination: { namespace: 'apps' },
    ...(syncOptions ? { syncPolicy: { syncOptions } } : {}),
  });

  async function deployTo(
    tenant: ClusterUserRow,
    managedEnvironmentId: string,
    repoURL: string,
    syncOptions?: string[],
  ) {
    const application = await insertApplication(f.db, {
      name: `gitopsdepl-${randomUUID()}`,
      clusterUserId: tenant.id,
      engineInstanceId,
      managedEnvironmentId,
      spec: specOf(repoURL, syncOptions),
    });
    await announce({ resourceType: 'Application', resourceId: application.id, ownerUserId: tenant.id });
    return application;
  }

  const projectOf = async (name: string) =>
    ((await f.getApplication(name))?.spec as { project?: string } | undefined)?.project;

  it('only an Application whose environment allows cluster resources is in the whitelisted project, which never lists in-cluster', async () => {
    // Given a tenant with an environment with clusterResources: true and one limited to its namespaces
    const tenant = await givenTenant('a');
    const open = await givenEnvironment(tenant, { namespaces: ['apps'], clusterResources: true });
    const limited = await givenEnvironment(tenant, { namespaces: ['apps'], clusterResources: false });
    const workspace = await ensureWorkspaceEnvironment(f.db, {
      id: tenant.id,
      namespaceName: tenant.namespace_name,
    });

    // When the tenant deploys to each, and to its own namespace
    const apps = [
      await deployTo(tenant, open, 'https://git.example.test/org/cluster-things.git'),
      await deployTo(tenant, limited, 'https://git.example.test/org/limited'),
      await deployTo(tenant, workspace.id, 'https://git.example.test/org/own'),
    ];

    // Then only the Application of the open environment is in the cluster-resource project
    const projects = await eventually('Applications applied', async () => {
      const names = await Promise.all(apps.map((app) => projectOf(app.name)));
      return names.every((n) => n !== undefined) ? names : undefined;
    });
    assert.deepEqual(projects, [clusterProject(tenant), mainProject(tenant), mainProject(tenant)]);
    // and that project allows every cluster-scoped kind, but only through the open environment
    const cluster = await eventually('cluster project', () => project(clusterProject(tenant)));
    assert.deepEqual(cluster.spec.clusterResourceWhitelist, [{ group: '*', kind: '*' }]);
    assert.deepEqual(cluster.spec.destinations, [{ name: `managed-env-${open}`, namespace: '*' }]);
    assert.ok(cluster.spec.sourceRepos?.includes('https://git.example.test/org/cluster-things'));
    // while the main project, which lists in-cluster, allows none
    const main = await eventually('main project', () => project(mainProject(tenant)));
    assert.equal(main.spec.clusterResourceWhitelist, undefined);
    assert.ok(main.spec.destinations?.some((d) => d.name === 'in-cluster'));

    // When another manager gives the main project a cluster resource whitelist
    await kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `${collectionPath({ apiVersion: ARGO, plural: 'appprojects', namespace: f.argoCdNamespace })}/${mainProject(tenant)}`,
      query: { fieldManager: 'someone-else' },
      body: { spec: { clusterResourceWhitelist: [{ group: '*', kind: '*' }] } },
      contentType: 'application/merge-patch+json',
    });
    // Then the agent takes it away again
    await eventually('whitelist removed from the main project', async () => {
      const live = await project(mainProject(tenant));
      return live?.spec.clusterResourceWhitelist === undefined ? true : undefined;
    });
  });

  it('another tenant’s environment never widens a tenant’s projects', async () => {
    // Given tenant B with an environment allowing cluster resources, and tenant C with a limited one
    const b = await givenTenant('b');
    const c = await givenTenant('c');
    const bEnvironment = await givenEnvironment(b, { namespaces: [], clusterResources: false });
    const cEnvironment = await givenEnvironment(c, { namespaces: ['apps'], clusterResources: false });
    const bApp = await deployTo(b, bEnvironment, 'https://git.example.test/org/b');
    const cApp = await deployTo(c, cEnvironment, 'https://git.example.test/org/c');

    // Then B (no namespaces list: the whole cluster) has a cluster-resource project listing only its environment
    await eventually('B in its cluster project', async () =>
      (await projectOf(bApp.name)) === clusterProject(b) ? true : undefined,
    );
    const bCluster = await project(clusterProject(b));
    assert.deepEqual(bCluster?.spec.destinations, [{ name: `managed-env-${bEnvironment}`, namespace: '*' }]);
    // and C has none, its Application stays in its main project, which names neither B's environment
    await eventually('C applied', async () =>
      (await projectOf(cApp.name)) === mainProject(c) ? true : undefined,
    );
    assert.equal(await project(clusterProject(c)), undefined);
    const cMain = await project(mainProject(c));
    assert.equal(cMain?.spec.clusterResourceWhitelist, undefined);
    assert.ok(cMain?.spec.destinations?.every((d) => d.name !== `managed-env-${bEnvironment}`));
  });

  it('CreateNamespace=true through an environment limited to its namespaces puts that Application alone in the cluster-resource project; dropping the option moves it back', async () => {
    // Given an environment limited to its namespaces, without cluster resources
    const tenant = await givenTenant('e');
    const limited = await givenEnvironment(tenant, { namespaces: ['apps'], clusterResources: false });
    const workspace = await ensureWorkspaceEnvironment(f.db, {
      id: tenant.id,
      namespaceName: tenant.namespace_name,
    });
    // When the tenant deploys through it with CreateNamespace=true, through it without, and to its own
    // namespace with it
    const creating = await deployTo(tenant, limited, 'https://git.example.test/org/creating', [
      'CreateNamespace=true',
    ]);
    const plain = await deployTo(tenant, limited, 'https://git.example.test/org/plain');
    const own = await deployTo(tenant, workspace.id, 'https://git.example.test/org/own', [
      'CreateNamespace=true',
    ]);

    // Then only the first is in the cluster-resource project (Argo CD checks the Namespace it creates against
    // the project's whitelist), which lists that environment and never in-cluster
    const projects = await eventually('Applications applied', async () => {
      const names = await Promise.all([creating, plain, own].map((app) => projectOf(app.name)));
      return names.every((n) => n !== undefined) ? names : undefined;
    });
    assert.deepEqual(projects, [clusterProject(tenant), mainProject(tenant), mainProject(tenant)]);
    const cluster = await eventually('cluster project', () => project(clusterProject(tenant)));
    assert.deepEqual(cluster.spec.destinations, [{ name: `managed-env-${limited}`, namespace: '*' }]);
    assert.equal((await project(mainProject(tenant)))?.spec.clusterResourceWhitelist, undefined);

    // When the first drops the option (the backend updates its row and announces it)
    await updateApplication(f.db, creating.id, {
      managedEnvironmentId: limited,
      spec: specOf('https://git.example.test/org/creating'),
    });
    await announce({ resourceType: 'Application', resourceId: creating.id, ownerUserId: tenant.id });
    // Then it moves to the main project and the cluster-resource project, unused, goes
    await eventually('moved to the main project', async () =>
      (await projectOf(creating.name)) === mainProject(tenant) ? true : undefined,
    );
    await eventually('cluster project deleted', async () =>
      (await project(clusterProject(tenant))) === undefined ? true : undefined,
    );
  });

  it('a change of the environment’s scope moves its Applications, and the unused project goes', async () => {
    // Given an environment allowing cluster resources, an Application there and a repository credential
    const tenant = await givenTenant('d');
    const environment = await givenEnvironment(tenant, { namespaces: ['apps'], clusterResources: true });
    const app = await deployTo(tenant, environment, 'https://git.example.test/org/private');
    const credential = await givenRepositoryCredentials(
      f.db,
      { clusterUserId: tenant.id, engineInstanceId },
      { url: 'https://git.example.test/org/private', secretName: 'private-repo' },
      { sealer, username: 'user', password: 'pass' },
    );
    await announce({
      resourceType: 'RepositoryCredentials',
      resourceId: credential.id,
      ownerUserId: tenant.id,
    });
    await eventually('in the cluster project', async () =>
      (await projectOf(app.name)) === clusterProject(tenant) ? true : undefined,
    );
    // Then its credentials are there for both projects (Argo CD matches a repository Secret to one project)
    const projectsOfSecrets = await eventually('both repository Secrets', async () => {
      const found = await Promise.all(
        [`repo-cred-${credential.id}`, `repo-cred-${credential.id}-cluster`].map((name) =>
          getObject(f.kc, { apiVersion: 'v1', kind: 'Secret', name, namespace: f.argoCdNamespace }),
        ),
      );
      if (found.some((s) => s === undefined)) return undefined;
      return found.map((s) =>
        Buffer.from((s as unknown as { data: { project: string } }).data.project, 'base64').toString('utf8'),
      );
    });
    assert.deepEqual(projectsOfSecrets, [mainProject(tenant), clusterProject(tenant)]);

    // When the environment no longer allows cluster resources (the backend updates its credentials)
    await updateEnvironmentCredentials(
      f.db,
      environment,
      credentials({ namespaces: ['apps'], clusterResources: false }),
    );
    await announce({ resourceType: 'ManagedEnvironment', resourceId: environment, ownerUserId: tenant.id });

    // Then its Application moves to the main project and the cluster-resource project is deleted
    await eventually('moved to the main project', async () =>
      (await projectOf(app.name)) === mainProject(tenant) ? true : undefined,
    );
    await eventually('cluster project deleted', async () =>
      (await project(clusterProject(tenant))) === undefined ? true : undefined,
    );
    const main = await project(mainProject(tenant));
    assert.ok(main?.spec.destinations?.some((d) => d.name === `managed-env-${environment}`));
    assert.equal(main?.spec.clusterResourceWhitelist, undefined);
  });
  it('a tenant moved to another instance leaves nothing here: its Applications are released, and its projects and cluster Secrets go although it still has an environment', async () => {
    const tenant = await givenTenant('moved');
    const environment = await givenEnvironment(tenant, { namespaces: ['apps'], clusterResources: false });
    const app = await deployTo(tenant, environment, 'https://git.example.test/org/moved');
    await eventually('the project and the Application', async () =>
      (await projectOf(app.name)) === mainProject(tenant) ? true : undefined,
    );
    const elsewhereNamespace = await f.createNamespace(`cres-elsewhere-${f.suffix}`);
    const elsewhere = await upsertEngineInstance(f.db, {
      name: `elsewhere-${f.suffix}`,
      namespaceName: `cres-elsewhere-${f.suffix}`,
      namespaceUid: elsewhereNamespace.metadata.uid ?? randomUUID(),
      clusterIdentity: `elsewhere-${randomUUID()}`,
    });
    await f.moveTenant(tenant, engineInstanceId, elsewhere.id);

    await eventually('the Application released', async () =>
      (await f.getApplication(app.name)) === undefined ? true : undefined,
    );
    await eventually('the project gone from this instance', async () =>
      (await project(mainProject(tenant))) === undefined ? true : undefined,
    );
    await eventually('the cluster Secret gone from this instance', async () =>
      (await getObject(f.kc, {
        apiVersion: 'v1',
        kind: 'Secret',
        name: `managed-env-${environment}`,
        namespace: f.argoCdNamespace,
      })) === undefined
        ? true
        : undefined,
    );
  });

  it('an environment’s cluster Secret stays while an Application being deleted still deploys through it (Argo CD prunes through it), and goes once that Application is gone', async () => {
    // Given an environment with its cluster Secret and an Application deploying there
    const tenant = await givenTenant('prunes');
    const environment = await givenEnvironment(tenant, { namespaces: ['apps'], clusterResources: false });
    const secret = () =>
      getObject(f.kc, {
        apiVersion: 'v1',
        kind: 'Secret',
        name: `managed-env-${environment}`,
        namespace: f.argoCdNamespace,
      });
    const app = await deployTo(tenant, environment, 'https://git.example.test/org/prunes');
    await eventually('the Application', () => f.getApplication(app.name));
    await eventually('the cluster Secret', secret);
    // When the deployment is deleted: Argo CD holds its Application by the resources finalizer while it prunes
    // (no Argo CD controller here, so it stays)
    await deleteApplication(f.db, app.id, { proven: true });
    await announce({ resourceType: 'Application', resourceId: app.id, ownerUserId: tenant.id });
    await eventually('the Application being deleted', async () =>
      (await f.getApplication(app.name))?.metadata.deletionTimestamp ? true : undefined,
    );
    // and the environment is deleted too
    await f.db.transaction().execute((trx) => deleteManagedEnvironment(trx, environment));
    const operationId = await announce({
      resourceType: 'ManagedEnvironment',
      resourceId: environment,
      ownerUserId: tenant.id,
    });
    await eventually('the environment operation taken up', async () =>
      (await getOperation(f.db, operationId))?.state === 'In_Progress' ? true : undefined,
    );
    // Then, through a re-check, the Secret stays and the operation waits
    await sleep(6_000);
    assert.ok(await secret(), 'the cluster Secret must stay while Argo CD prunes through it');
    assert.equal((await getOperation(f.db, operationId))?.state, 'In_Progress');
    // When Argo CD has pruned and finalized the Application (played: its finalizer removed)
    await f.patchApplication(app.name, { metadata: { finalizers: null } });
    // Then the Secret goes and the operation completes
    await eventually('the cluster Secret gone', async () =>
      (await secret()) === undefined ? true : undefined,
    );
    await eventually('the operation completed', async () =>
      (await getOperation(f.db, operationId))?.state === 'Completed' ? true : undefined,
    );
  });

  it('an Application is not deleted while its environment’s cluster Secret is missing here (Argo CD would prune nothing), and is once the Secret is there', async () => {
    // Given an environment whose cluster Secret cannot be written yet (its credentials are sealed with a key
    // this agent does not have: its operation fails and backs off, as after an API server outage)
    const tenant = await givenTenant('nosecret');
    const otherKey = createSealer({ keys: [{ id: 'other', key: randomBytes(32) }], activeKeyId: 'other' });
    const environment = await givenEnvironment(
      tenant,
      { namespaces: ['apps'], clusterResources: false },
      otherKey,
    );
    const secretName = `managed-env-${environment}`;
    const secret = () =>
      getObject(f.kc, { apiVersion: 'v1', kind: 'Secret', name: secretName, namespace: f.argoCdNamespace });
    // and an Application deploying there
    const app = await deployTo(tenant, environment, 'https://git.example.test/org/nosecret');
    await eventually('the Application', () => f.getApplication(app.name));
    assert.equal(await secret(), undefined);

    // When its row is deleted and the agent is told
    await deleteApplication(f.db, app.id, { proven: true });
    const operationId = await announce({
      resourceType: 'Application',
      resourceId: app.id,
      ownerUserId: tenant.id,
    });
    await eventually('the delete operation taken up', async () =>
      (await getOperation(f.db, operationId))?.state === 'In_Progress' ? true : undefined,
    );
    // Then, through several re-checks, the Application stays and its operation is not completed
    await sleep(5_000);
    const live = await f.getApplication(app.name);
    assert.ok(live, 'the Application must not be deleted while its destination is unknown to Argo CD');
    assert.equal(live.metadata.deletionTimestamp, undefined);
    assert.equal((await getOperation(f.db, operationId))?.state, 'In_Progress');

    // When the environment's credentials can be unsealed and its Secret is written
    await updateEnvironmentCredentials(
      f.db,
      environment,
      credentials({ namespaces: ['apps'], clusterResources: false }),
    );
    await announce({ resourceType: 'ManagedEnvironment', resourceId: environment, ownerUserId: tenant.id });
    await eventually('the cluster Secret', secret);
    // Then the Application is deleted, with its resources finalizer (for Argo CD to prune)
    const deleting = await eventually('the Application deleted', async () => {
      const now = await f.getApplication(app.name);
      return now?.metadata.deletionTimestamp ? now : undefined;
    });
    assert.deepEqual(deleting.metadata.finalizers, ['resources-finalizer.argocd.argoproj.io']);
    // and once Argo CD has pruned and finalized it (played here: no Argo CD controller), the operation completes
    await f.patchApplication(app.name, { metadata: { finalizers: null } });
    await eventually('the operation completed', async () =>
      (await getOperation(f.db, operationId))?.state === 'Completed' ? true : undefined,
    );
  });
});
