/**
 * Integration-test fixture for the cluster-agent (beside the backend's, packages/backend/src/testing):
 * a cloned test database, an Argo CD namespace and tenant namespaces of its own on the test run's API
 * server, agents built in-process (buildAgent) against them, and the parts the tests play: the relay
 * (creates the Operation CR) and Argo CD (patches Applications). cleanup() closes the agents, removes the
 * Applications' finalizers (no Argo CD controller runs to remove them), deletes the namespaces and drops
 * the database.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  type AdmittedEngineInstance,
  type ApplicationRow,
  admitEngineInstance,
  agentDatabaseUrl,
  type ClusterUserRow,
  createSealer,
  type Database,
  decodeSealingKey,
  ensureWorkspaceEnvironment,
  getClusterUser,
  getEngineInstance,
  getEngineInstanceByName,
  insertApplication,
  moveTenant,
  type OperationRow,
  placeTenant,
  sealCredentialsForInstances,
  type TenantMove,
  upsertClusterUser,
} from '@gitops/db';
import { createTestDatabase, givenOwnedOperation, type TestDatabase } from '@gitops/db/testing';
import {
  collectionPath,
  createMetricsRegistry,
  createSilentLogger,
  deleteIfExists,
  getObject,
  HttpMethod,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  loadKubeConfig,
  type Periodic,
  type Registry,
  runPeriodically,
  serverSideApply,
} from '@gitops/shared';
import { randomSuffix, useFixture } from '@gitops/shared/testing';
import type { Kysely } from 'kysely';
import { type Agent, buildAgent } from '../app.ts';
import { type AgentConfig, loadAgentConfig } from '../config.ts';

const ARGO_GROUP_VERSION = 'argoproj.io/v1alpha1';

export interface AgentFixture {
  readonly kc: KubeConfig;
  readonly database: TestDatabase;
  readonly db: Kysely<Database>;
  /** Random suffix of this fixture's names. */
  readonly suffix: string;
  /** `<prefix>-argocd-<suffix>`; created by createAgentFixture unless `createArgoCdNamespace: false`. */
  readonly argoCdNamespace: string;
  /** `<prefix>-<suffix>`. */
  readonly engineInstanceName: string;
  /** The base64 AES key (id `test`) of GITOPS_ENCRYPTION_KEYS. */
  readonly encryptionKey: string;
  /** The environment an agent process of this fixture runs with (`extra` added/overridden). */
  env(extra?: Record<string, string>): Record<string, string>;
  /** loadAgentConfig(env(extra)). */
  config(extra?: Record<string, string>): AgentConfig;
  /**
   * Builds and starts an agent in-process (closed at cleanup). With the test database's own URL (the default),
   * the agent runs as production agents do: its instance is admitted first and it connects with its own role.
   */
  startAgent(config?: AgentConfig, registry?: Registry): Promise<Agent>;
  /** `config` with the connection string of its instance's own role (admitting the instance the first time). */
  withOwnRole(config: AgentConfig): Promise<AgentConfig>;
  /** env(extra) with DATABASE_URL the connection string of the instance's own role, for an agent process. */
  agentEnv(extra?: Record<string, string>): Promise<Record<string, string>>;
  /** Creates (server-side apply) a namespace, deleted at cleanup. */
  createNamespace(name: string): Promise<KubeObject>;
  /** The cluster_user row of a tenant namespace, as the backend writes it (and its workspace environment). */
  givenTenant(
    namespace: string,
    /** `engineInstanceName`: the instance it is placed on (default: the fixture's, once registered). */
    options?: { workspaceEnvironment?: boolean; engineInstanceName?: string },
  ): Promise<ClusterUserRow>;
  /**
   * What most agent tests start from: an agent started with `config(extra)`, and a tenant in a namespace of
   * its own (`<prefix>-tenant-<suffix>`, created) placed on the agent's instance, without a workspace
   * environment (`givenDeployment` adds it).
   */
  startAgentWithTenant(extra?: Record<string, string>): Promise<AgentWithTenant>;
  /**
   * What the backend writes for a new manual GitOpsDeployment of `tenant` (in `namespace`), in one
   * transaction: the application row on `engineInstanceId`, its mapping and the Application operation.
   */
  givenDeployment(
    tenant: ClusterUserRow,
    namespace: string,
    engineInstanceId: string,
  ): Promise<{ application: ApplicationRow; operation: OperationRow }>;
  /**
   * An operator's move of `tenant`, placed on the instance `from` first, to the instance `to` (moveTenant),
   * and the relay of the operations the move announces to `from` (what that instance's agent releases).
   */
  moveTenant(tenant: ClusterUserRow, from: string, to: string): Promise<TenantMove>;
  /** Creates the Operation CR the backend's relay would create. */
  relay(operation: { id: string }, namespace?: string): Promise<void>;
  /** The Operation CRs in the fixture's Argo CD namespace. */
  listOperationCrs(): Promise<KubeObject[]>;
  getApplication(name: string): Promise<KubeObject | undefined>;
  /** Merge-patches an Application as Argo CD would (field manager `argocd-test` unless given). */
  patchApplication(name: string, body: unknown, fieldManager?: string): Promise<unknown>;
  cleanup(): Promise<void>;
}

/** An agent started by startAgentWithTenant, and its tenant. */
export interface AgentWithTenant {
  agent: Agent;
  engineInstanceId: string;
  tenant: ClusterUserRow;
  tenantNamespace: string;
}

export interface AgentFixtureOptions {
  prefix: string;
  createArgoCdNamespace?: boolean;
}

/** The fixture of the enclosing test file or describe block: made before its tests, cleaned up after them. */
export const useAgentFixture = (options: AgentFixtureOptions): AgentFixture =>
  useFixture(
    () => createAgentFixture(options),
    (f) => f.cleanup(),
  );

/**
 * `f.startAgentWithTenant(extra)` before the tests of the enclosing block (beforeAll), for blocks whose tests
 * share one agent and tenant: `started.agent`, `started.tenant`, ... (f's cleanup closes the agent; a test may
 * set `started.agent` to the one it restarts). Call it after `useAgentFixture`.
 */
export const useAgentWithTenant = (f: AgentFixture, extra?: Record<string, string>): AgentWithTenant =>
  useFixture(
    () => f.startAgentWithTenant(extra),
    async () => {},
  );

export async function createAgentFixture(options: AgentFixtureOptions): Promise<AgentFixture> {
  const kubeconfigPath = process.env.KUBECONFIG;
  const kc = loadKubeConfig(kubeconfigPath);
  const database = await createTestDatabase();
  const suffix = randomSuffix();
  const argoCdNamespace = `${options.prefix}-argocd-${suffix}`;
  const engineInstanceName = `${options.prefix}-${suffix}`;
  const encryptionKey = randomBytes(32).toString('base64');
  const namespaces: string[] = [];
  const agents = new Set<Agent>();
  /** Instance name → its admission (admitted once: a new password would lock out agents already running). */
  const admitted = new Map<string, Promise<AdmittedEngineInstance>>();
  /**
   * Plays the backend's sealing (backend instance-sealing.feature.ts) while agents with their own role run: what
   * the tests store sealed with the fixture's key is sealed for each instance with the key its agent published.
   */
  const backendSealer = createSealer({
    keys: [{ id: 'test', key: decodeSealingKey(encryptionKey) }],
    activeKeyId: 'test',
  });
  let sealing: Periodic | undefined;
  const applicationsPath = collectionPath({
    apiVersion: ARGO_GROUP_VERSION,
    plural: 'applications',
    namespace: argoCdNamespace,
  });

  const fixture: AgentFixture = {
    kc,
    database,
    db: database.db,
    suffix,
    argoCdNamespace,
    engineInstanceName,
    encryptionKey,
    env: (extra = {}) => ({
      DATABASE_URL: database.url,
      KUBECONFIG: kubeconfigPath ?? '',
      ARGOCD_NAMESPACE: argoCdNamespace,
      ENGINE_INSTANCE_NAME: engineInstanceName,
      GITOPS_ENCRYPTION_KEYS: `test=${encryptionKey}`,
      // Every state the tests play is written as it comes; the status path's own test sets the intervals.
      GITOPS_STATUS_QUEUED_INTERVAL: '0ms',
      GITOPS_STATUS_PROGRESS_INTERVAL: '0ms',
      ...extra,
    }),
    config: (extra) => loadAgentConfig(fixture.env(extra)),
    async withOwnRole(config) {
      const name = config.engineInstanceName;
      let admission = admitted.get(name);
      if (!admission) {
        admission = admitEngineInstance(database.db, { name, namespaceName: config.argoCdNamespace });
        admitted.set(name, admission);
      }
      // No backend key: an agent with its own role opens only what is sealed for its instance.
      return {
        ...config,
        databaseUrl: agentDatabaseUrl(database.url, await admission),
        encryptionKeys: undefined,
      };
    },
    async agentEnv(extra) {
      const { GITOPS_ENCRYPTION_KEYS: _backendKeys, ...env } = fixture.env(extra);
      return { ...env, DATABASE_URL: (await fixture.withOwnRole(loadAgentConfig(env))).databaseUrl };
    },
    async startAgent(config = fixture.config(), registry = createMetricsRegistry({ defaultMetrics: false })) {
      const own = config.databaseUrl === database.url ? await fixture.withOwnRole(config) : config;
      sealing ??= runPeriodically(
        'fixture: sealing for engine instances',
        100,
        () => sealCredentialsForInstances(database.db, backendSealer, 'all').then(() => undefined),
        { logger: createSilentLogger(), jitter: 0 },
      );
      const agent = buildAgent(own, { logger: createSilentLogger(), registry });
      agents.add(agent);
      await agent.start();
      return agent;
    },
    async createNamespace(name) {
      if (!namespaces.includes(name)) namespaces.push(name);
      return await serverSideApply(
        kc,
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
        { fieldManager: 'test' },
      );
    },
    async givenTenant(namespace, { workspaceEnvironment = true, engineInstanceName: placedOn } = {}) {
      const ns = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: namespace });
      if (!ns?.metadata.uid) throw new Error(`namespace ${namespace} does not exist`);
      const user = await upsertClusterUser(database.db, { uid: ns.metadata.uid, name: namespace });
      // Placed on the fixture's instance once it is registered, as the backend places a tenant before it
      // writes anything for it (an instance's role sees only the tenants placed on it).
      const instanceName = placedOn ?? engineInstanceName;
      if (await getEngineInstanceByName(database.db, instanceName)) {
        await database.db.transaction().execute((trx) => placeTenant(trx, user.id, instanceName));
      }
      if (workspaceEnvironment) {
        await ensureWorkspaceEnvironment(database.db, { id: user.id, namespaceName: namespace });
      }
      return (await getClusterUser(database.db, user.id)) ?? user;
    },
    async startAgentWithTenant(extra) {
      const tenantNamespace = `${options.prefix}-tenant-${suffix}`;
      await fixture.createNamespace(tenantNamespace);
      const agent = await fixture.startAgent(fixture.config(extra));
      const engineInstanceId = agent.engineInstance()!.id;
      const tenant = await fixture.givenTenant(tenantNamespace, { workspaceEnvironment: false });
      return { agent, engineInstanceId, tenant, tenantNamespace };
    },
    async givenDeployment(tenant, namespace, engineInstanceId) {
      const crUid = randomUUID();
      return await database.db.transaction().execute(async (trx) => {
        // Placed first, as the backend does (an instance's role sees only the tenants placed on it).
        const instance = await getEngineInstance(trx, engineInstanceId);
        if (instance) await placeTenant(trx, tenant.id, instance.name);
        const env = await ensureWorkspaceEnvironment(trx, { id: tenant.id, namespaceName: namespace });
        const application = await insertApplication(trx, {
          name: `gitopsdepl-${crUid}`,
          clusterUserId: tenant.id,
          engineInstanceId,
          managedEnvironmentId: env.id,
          spec: {
            source: { repoURL: 'https://github.com/example/repo', path: 'dev', targetRevision: 'main' },
            destination: { namespace },
          },
        });
        const operation = await givenOwnedOperation(trx, {
          tenant,
          engineInstanceId,
          cr: { uid: crUid, name: `d-${crUid.slice(0, 8)}`, namespace },
          row: { kind: 'GitOpsDeployment', applicationId: application.id },
        });
        return { application, operation };
      });
    },
    async listOperationCrs() {
      const list = (await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: collectionPath({
          apiVersion: 'managed-gitops.redhat.com/v1alpha1',
          plural: 'operations',
          namespace: argoCdNamespace,
        }),
      })) as { items: KubeObject[] };
      return list.items;
    },
    async moveTenant(tenant, from, to) {
      await database.db
        .updateTable('cluster_user')
        .set({ engine_instance_id: from })
        .where('id', '=', tenant.id)
        .execute();
      const moved = await database.db.transaction().execute((trx) => moveTenant(trx, tenant.id, to));
      if (!moved) throw new Error(`tenant ${tenant.id} was not moved`);
      for (const { operation } of moved.operations)
        if (operation.engine_instance_id === from) await fixture.relay(operation);
      return moved;
    },
    async relay(operation, namespace = argoCdNamespace) {
      await serverSideApply(
        kc,
        {
          apiVersion: 'managed-gitops.redhat.com/v1alpha1',
          kind: 'Operation',
          metadata: { name: `operation-${operation.id}`, namespace },
          spec: { operationID: operation.id },
        },
        { fieldManager: 'test-relay' },
      );
    },
    getApplication: (name) =>
      getObject(kc, {
        apiVersion: ARGO_GROUP_VERSION,
        kind: 'Application',
        name,
        namespace: argoCdNamespace,
      }),
    patchApplication: (name, body, fieldManager = 'argocd-test') =>
      kubeRequest(kc, {
        method: HttpMethod.PATCH,
        path: `${applicationsPath}/${encodeURIComponent(name)}`,
        query: { fieldManager },
        body,
        contentType: 'application/merge-patch+json',
      }),
    async cleanup() {
      for (const agent of agents) await agent.close().catch(() => undefined);
      await sealing?.stop();
      agents.clear();
      const list = (await kubeRequest(kc, { method: HttpMethod.GET, path: applicationsPath }).catch(() => ({
        items: [],
      }))) as { items: KubeObject[] };
      for (const app of list.items) {
        await fixture
          .patchApplication(app.metadata.name, { metadata: { finalizers: null } }, 'test')
          .catch(() => undefined);
      }
      for (const name of namespaces) {
        await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name }).catch(() => undefined);
      }
      await database.destroy();
    },
  };
  if (options.createArgoCdNamespace ?? true) await fixture.createNamespace(argoCdNamespace);
  return fixture;
}
