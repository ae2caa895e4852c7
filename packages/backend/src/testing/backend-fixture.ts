/**
 * Integration-test fixture: a backend built in-process (buildBackend) against the test run's real
 * PostgreSQL (a cloned database per fixture) and API server. Each fixture has its own Argo CD namespace,
 * engine instance name and backend shard (GITOPS_BACKEND_SHARD + the shard label on its GitOpsDeployments),
 * so test files, and unsharded backends of other suites, never serve each other's GitOpsDeployments.
 */
import { randomBytes } from 'node:crypto';
import { API_GROUP_VERSION, type GitOpsDeploymentSpec, Plural } from '@gitops/api';
import { gitOpsDeployment } from '@gitops/api/testing';
import {
  type ApplicationRow,
  type Database,
  getApplicationByName,
  getOperation,
  type OperationRow,
  type RepositoryCredentialsRow,
} from '@gitops/db';
import { createTestDatabase, type TestDatabase } from '@gitops/db/testing';
import {
  createLogger,
  createMetricsRegistry,
  getPathIfExists,
  HttpMethod,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type LogLevel,
  loadKubeConfig,
} from '@gitops/shared';
import { eventually, randomSuffix, useFixture } from '@gitops/shared/testing';
import type { Kysely } from 'kysely';
import { type Backend, buildBackend } from '../app.ts';
import { BACKEND_SHARD_LABEL, loadBackendConfig } from '../config.ts';
import { GitOpsDeploymentCr, type GitOpsDeploymentObject } from '../kinds.ts';

/** An automated GitOpsDeployment spec of the upstream project's test data, for tests of what the backend writes. */
export const automatedTestDataSpec = {
  source: { repoURL: 'https://github.com/redhat-appstudio/managed-gitops', path: 'resources/test-data' },
  type: 'automated',
};

export interface BackendFixture {
  readonly kc: KubeConfig;
  readonly db: Kysely<Database>;
  readonly database: TestDatabase;
  readonly argoCdNamespace: string;
  readonly engineInstanceName: string;
  readonly runLabel: string;
  /** Builds and starts a backend (several may run at once, like replicas). */
  startBackend(env?: Record<string, string>): Promise<Backend>;
  stopBackend(backend: Backend): Promise<void>;
  /** A user namespace (deleted at cleanup), with these labels. */
  createNamespace(prefix?: string, labels?: Record<string, string>): Promise<{ name: string; uid: string }>;
  createDeployment(
    namespace: string,
    name: string,
    spec: Record<string, unknown>,
    options?: { finalizers?: string[] },
  ): Promise<GitOpsDeploymentObject>;
  getDeployment(namespace: string, name: string): Promise<GitOpsDeploymentObject | undefined>;
  /** Server-side apply of a GitOpsDeployment spec (the `kubectl apply` a user would run). */
  applyDeployment(
    namespace: string,
    name: string,
    spec: Record<string, unknown>,
  ): Promise<GitOpsDeploymentObject>;
  deleteDeployment(namespace: string, name: string): Promise<void>;
  getOperationCr(operationId: string): Promise<KubeObject | undefined>;
  /** The repository_credentials row of the RepositoryCredential with this uid, once the backend wrote it. */
  repositoryCredentialsRowOf(crUid: string): Promise<RepositoryCredentialsRow>;
  /** The application row of GitOpsDeployment `cr`, once the backend wrote it. */
  applicationOf(cr: KubeObject): Promise<ApplicationRow>;
  /** The operations announcing the row `resourceId` (an application, environment, credentials), oldest first. */
  operationsOf(resourceId: string): Promise<OperationRow[]>;
  /** Waits until the relay delivered operation `operationId` (created its Operation CR); its row then. */
  deliveredOperation(operationId: string): Promise<OperationRow>;
  listOperationCrs(): Promise<KubeObject[]>;
  cleanup(): Promise<void>;
}

const deploymentsPath = (namespace: string) =>
  `/apis/${API_GROUP_VERSION}/namespaces/${encodeURIComponent(namespace)}/${Plural.GitOpsDeployment}`;

/** The fixture of the enclosing test file or describe block: made before its tests, cleaned up after them. */
export const useBackendFixture = (): BackendFixture => useFixture(createBackendFixture, (f) => f.cleanup());

/**
 * The fixture of the enclosing test file or describe block with one backend started (`startBackend(env)`) and
 * one tenant namespace (`createNamespace(namespacePrefix)`), both made before its tests: the preamble most
 * backend tests share. `backend` and `tenant` stand for what beforeAll made (use them in hooks and tests only).
 */
export function useStartedBackend(
  env: Record<string, string> = {},
  namespacePrefix?: string,
): { f: BackendFixture; backend: Backend; tenant: { name: string; uid: string } } {
  const f = useBackendFixture();
  // The fixture's cleanup closes the backend and deletes the namespace: nothing of their own to release.
  const backend = useFixture(
    () => f.startBackend(env),
    async () => {},
  );
  const tenant = useFixture(
    () => f.createNamespace(namespacePrefix),
    async () => {},
  );
  return { f, backend, tenant };
}

export async function createBackendFixture(): Promise<BackendFixture> {
  const kc = loadKubeConfig(process.env.KUBECONFIG);
  const database = await createTestDatabase();
  const suffix = randomSuffix();
  const argoCdNamespace = `argocd-be-${suffix}`;
  const engineInstanceName = `backend-test-${suffix}`;
  const runLabel = suffix;
  const encryptionKeys = `test=${randomBytes(32).toString('base64')}`;
  await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: '/api/v1/namespaces',
    body: { metadata: { name: argoCdNamespace } },
  });
  const namespaces: string[] = [argoCdNamespace];
  const backends = new Set<Backend>();

  const get = async (path: string) => (await getPathIfExists(kc, path)) as KubeObject | undefined;

  const fixture: BackendFixture = {
    kc,
    db: database.db,
    database,
    argoCdNamespace,
    engineInstanceName,
    runLabel,
    async startBackend(env = {}) {
      const config = loadBackendConfig({
        DATABASE_URL: database.url,
        KUBECONFIG: process.env.KUBECONFIG,
        ARGOCD_NAMESPACE: argoCdNamespace,
        ENGINE_INSTANCE_NAME: engineInstanceName,
        GITOPS_ENCRYPTION_KEYS: encryptionKeys,
        GITOPS_BACKEND_SHARD: runLabel,
        GITOPS_RELAY_SWEEP_INTERVAL: '1s',
        // The fixture runs no agent: its changes wait by design, so the "instance away" report stays off unless
        // a test asks for it.
        GITOPS_ENGINE_INSTANCE_AWAY_AFTER: '24h',
        LOG_LEVEL: 'silent',
        ...env,
      });
      const backend = buildBackend(config, {
        logger: createLogger({
          name: 'backend-test',
          level: (process.env.BACKEND_TEST_LOG_LEVEL ?? 'silent') as LogLevel,
        }),
        registry: createMetricsRegistry({ defaultMetrics: false }),
      });
      backends.add(backend);
      await backend.start();
      return backend;
    },
    async stopBackend(backend) {
      backends.delete(backend);
      await backend.close();
    },
    repositoryCredentialsRowOf: (crUid) =>
      eventually('repository_credentials row', () =>
        database.db
          .selectFrom('api_cr_mapping')
          .innerJoin(
            'repository_credentials',
            'repository_credentials.id',
            'api_cr_mapping.repository_credentials_id',
          )
          .selectAll('repository_credentials')
          .where('cr_uid', '=', crUid)
          .executeTakeFirst(),
      ),
    applicationOf: (cr) =>
      eventually(`application of ${cr.metadata.name}`, () =>
        getApplicationByName(database.db, `gitopsdepl-${cr.metadata.uid}`),
      ),
    operationsOf: (resourceId) =>
      database.db
        .selectFrom('operation')
        .selectAll()
        .where('resource_id', '=', resourceId)
        .orderBy('created_at')
        .execute(),
    deliveredOperation: (operationId) =>
      eventually(`operation ${operationId} delivered`, async () => {
        const row = await getOperation(database.db, operationId);
        return row?.delivered_at ? row : undefined;
      }),
    async createNamespace(prefix = 'tenant', labels = {}) {
      const name = `${prefix}-${randomSuffix()}`;
      const ns = (await kubeRequest(kc, {
        method: HttpMethod.POST,
        path: '/api/v1/namespaces',
        body: { metadata: { name, labels } },
      })) as KubeObject;
      namespaces.push(name);
      return { name, uid: ns.metadata.uid ?? '' };
    },
    async createDeployment(namespace, name, spec, options = {}) {
      return GitOpsDeploymentCr.parse(
        await kubeRequest(kc, {
          method: HttpMethod.POST,
          path: deploymentsPath(namespace),
          body: gitOpsDeployment(name, spec as unknown as GitOpsDeploymentSpec, {
            namespace,
            labels: { [BACKEND_SHARD_LABEL]: runLabel },
            finalizers: options.finalizers,
          }),
        }),
      );
    },
    getDeployment: async (namespace, name) => {
      const object = await get(`${deploymentsPath(namespace)}/${encodeURIComponent(name)}`);
      return object && GitOpsDeploymentCr.parse(object);
    },
    async applyDeployment(namespace, name, spec) {
      return GitOpsDeploymentCr.parse(
        await kubeRequest(kc, {
          method: HttpMethod.PATCH,
          path: `${deploymentsPath(namespace)}/${encodeURIComponent(name)}`,
          query: { fieldManager: 'backend-test-user', force: true },
          contentType: 'application/apply-patch+yaml',
          body: gitOpsDeployment(name, spec as unknown as GitOpsDeploymentSpec, {
            namespace,
            labels: { [BACKEND_SHARD_LABEL]: runLabel },
          }),
        }),
      );
    },
    async deleteDeployment(namespace, name) {
      await kubeRequest(kc, {
        method: HttpMethod.DELETE,
        path: `${deploymentsPath(namespace)}/${encodeURIComponent(name)}`,
      });
    },
    getOperationCr: (operationId) =>
      get(
        `/apis/${API_GROUP_VERSION}/namespaces/${argoCdNamespace}/${Plural.Operation}/operation-${operationId}`,
      ),
    async listOperationCrs() {
      const list = (await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: `/apis/${API_GROUP_VERSION}/namespaces/${argoCdNamespace}/${Plural.Operation}`,
      })) as { items: KubeObject[] };
      return list.items;
    },
    async cleanup() {
      for (const backend of backends) await backend.close().catch(() => {});
      backends.clear();
      // Its GitOpsEngineInstances are cluster-scoped (no namespace deletion takes them), and their finalizer
      // has nobody left to remove it.
      const instances = `/apis/${API_GROUP_VERSION}/${Plural.GitOpsEngineInstance}`;
      const shard = (await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: instances,
        query: { labelSelector: `${BACKEND_SHARD_LABEL}=${runLabel}` },
      }).catch(() => ({ items: [] }))) as { items: KubeObject[] };
      for (const object of shard.items) {
        const path = `${instances}/${encodeURIComponent(object.metadata.name)}`;
        await kubeRequest(kc, {
          method: HttpMethod.PATCH,
          path,
          body: { metadata: { finalizers: null } },
          contentType: 'application/merge-patch+json',
        }).catch(() => {});
        await kubeRequest(kc, { method: HttpMethod.DELETE, path }).catch(() => {});
      }
      for (const name of namespaces) {
        await kubeRequest(kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${name}` }).catch(
          () => {},
        );
      }
      await database.destroy();
    },
  };
  return fixture;
}
