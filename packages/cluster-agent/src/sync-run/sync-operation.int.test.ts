/**
 * The cluster-agent's SyncOperation handling against a real PostgreSQL and API server. Rows are written as
 * the backend writes them (one transaction with the operation), Operation CRs as the relay creates them, and
 * the test plays Argo CD (takes `operation`, reports `status.operationState`).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  type ApplicationRow,
  type ClusterUserRow,
  ensureWorkspaceEnvironment,
  getOperation,
  getSyncOperation,
  insertApiCrMapping,
  insertApplication,
  insertOperation,
  insertSyncOperation,
  type OperationRow,
  setSyncOperationDesiredState,
  upsertClusterUser,
} from '@gitops/db';
import { createTestDatabase, type TestDatabase } from '@gitops/db/testing';
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
  serverSideApply,
} from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type Agent, buildAgent } from '../app.ts';
import { loadAgentConfig } from '../config.ts';

const kubeconfigPath = process.env.KUBECONFIG;
const suffix = randomBytes(4).toString('hex');
const argoCdNamespace = `sync-argocd-${suffix}`;
const tenantNamespace = `sync-tenant-${suffix}`;
const kubeTime = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('cluster-agent SyncOperation', () => {
  let kc: KubeConfig;
  let database: TestDatabase;
  let agent: Agent;
  let engineInstanceId: string;
  let tenant: ClusterUserRow;

  const appPath = (name: string) =>
    `${collectionPath({ apiVersion: 'argoproj.io/v1alpha1', plural: 'applications', namespace: argoCdNamespace })}/${name}`;
  const getApp = (name: string) =>
    getObject(kc, {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      name,
      namespace: argoCdNamespace,
    });
  const patchApp = (name: string, body: unknown) =>
    kubeRequest(kc, {
      method: HttpMethod.PATCH,
      path: appPath(name),
      query: { fieldManager: 'argocd-test' },
      body,
      contentType: 'application/merge-patch+json',
    });

  async function relay(operation: OperationRow) {
    await serverSideApply(
      kc,
      {
        apiVersion: 'managed-gitops.redhat.com/v1alpha1',
        kind: 'Operation',
        metadata: { name: `operation-${operation.id}`, namespace: argoCdNamespace },
        spec: { operationID: operation.id },
      },
      { fieldManager: 'test-relay' },
    );
  }

  /** A manual deployment's application, applied by the agent. */
  async function manualApplication(): Promise<ApplicationRow> {
    const crUid = randomUUID();
    const env = await ensureWorkspaceEnvironment(database.db, {
      id: tenant.id,
      namespaceName: tenantNamespace,
    });
    const { application, operation } = await database.db.transaction().execute(async (trx) => {
      const application = await insertApplication(trx, {
        name: `gitopsdepl-${crUid}`,
        clusterUserId: tenant.id,
        engineInstanceId,
        managedEnvironmentId: env.id,
        spec: {
          source: { repoURL: 'https://github.com/example/repo', path: 'dev', targetRevision: 'main' },
          destination: { namespace: tenantNamespace },
        },
      });
      const owner = { uid: crUid, name: `d-${crUid.slice(0, 8)}`, namespace: tenantNamespace };
      await insertApiCrMapping(
        trx,
        { ...owner, namespaceUid: tenant.namespace_uid },
        { kind: 'GitOpsDeployment', applicationId: application.id },
      );
      const { operation } = await insertOperation(trx, {
        engineInstanceId,
        resourceType: 'Application',
        resourceId: application.id,
        ownerUserId: tenant.id,
        ownerCr: { kind: 'GitOpsDeployment', ...owner },
      });
      return { application, operation };
    });
    await relay(operation);
    await eventually('Application applied', () => getApp(application.name));
    return application;
  }

  /** What the backend writes for a SyncRun. */
  async function syncRun(application: ApplicationRow, revision = '') {
    const uid = randomUUID();
    const { syncOperation, operation } = await database.db.transaction().execute(async (trx) => {
      const syncOperation = await insertSyncOperation(trx, {
        clusterUserId: tenant.id,
        applicationId: application.id,
        deploymentName: 'd',
        revision,
      });
      const owner = { uid, name: `run-${uid.slice(0, 8)}`, namespace: tenantNamespace };
      await insertApiCrMapping(
        trx,
        { ...owner, namespaceUid: tenant.namespace_uid },
        { kind: 'GitOpsDeploymentSyncRun', syncOperationId: syncOperation.id },
      );
      const { operation } = await insertOperation(trx, {
        engineInstanceId,
        resourceType: 'SyncOperation',
        resourceId: syncOperation.id,
        ownerUserId: tenant.id,
        ownerCr: { kind: 'GitOpsDeploymentSyncRun', ...owner },
      });
      return { syncOperation, operation };
    });
    await relay(operation);
    return { syncOperation, operation, owner: { uid, name: `run-${uid.slice(0, 8)}` } };
  }

  /** Plays Argo CD: takes the requested operation and reports it Running. */
  async function take(name: string) {
    const app = await eventually('sync request', async () => {
      const a = await getApp(name);
      return a?.operation ? a : undefined;
    });
    await patchApp(name, {
      operation: null,
      status: {
        operationState: {
          operation: app.operation,
          phase: 'Running',
          startedAt: kubeTime(),
          finishedAt: null,
        },
      },
    });
    return app as KubeObject & { operation: { sync: { revision: string }; initiatedBy: unknown } };
  }
  const finish = (name: string, phase: string, message = '') =>
    patchApp(name, { status: { operationState: { phase, message, finishedAt: kubeTime() } } });
  const outcome = (id: string) =>
    eventually('sync outcome', async () => {
      const row = await getSyncOperation(database.db, id);
      return row?.outcome ? row : undefined;
    });

  beforeAll(async () => {
    kc = loadKubeConfig(kubeconfigPath);
    database = await createTestDatabase();
    for (const name of [argoCdNamespace, tenantNamespace]) {
      await serverSideApply(
        kc,
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
        { fieldManager: 'test' },
      );
    }
    agent = buildAgent(
      loadAgentConfig({
        DATABASE_URL: database.url,
        KUBECONFIG: kubeconfigPath,
        GITOPS_ENCRYPTION_KEYS: `test=${randomBytes(32).toString('base64')}`,
        ARGOCD_NAMESPACE: argoCdNamespace,
        ENGINE_INSTANCE_NAME: `sync-test-${suffix}`,
        OPERATION_SWEEP_INTERVAL: '500ms',
      }),
      { logger: createSilentLogger(), registry: createMetricsRegistry({ defaultMetrics: false }) },
    );
    await agent.start();
    engineInstanceId = agent.engineInstance()!.id;
    const ns = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: tenantNamespace });
    tenant = await upsertClusterUser(database.db, { uid: ns!.metadata.uid!, name: tenantNamespace });
  });

  afterAll(async () => {
    await agent?.close();
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: collectionPath({
        apiVersion: 'argoproj.io/v1alpha1',
        plural: 'applications',
        namespace: argoCdNamespace,
      }),
    }).catch(() => ({ items: [] }))) as { items: KubeObject[] };
    for (const app of list.items)
      await patchApp(app.metadata.name, { metadata: { finalizers: null } }).catch(() => undefined);
    for (const name of [argoCdNamespace, tenantNamespace]) {
      await deleteIfExists(kc, { apiVersion: 'v1', kind: 'Namespace', name }).catch(() => undefined);
    }
    await database?.destroy();
  });

  it('refreshes, requests the sync once as gitops-service, and completes the operation with the Argo CD result', async () => {
    const application = await manualApplication();
    const { syncOperation, operation } = await syncRun(application, 'v2');
    const app = await take(application.name);
    assert.equal(app.metadata.annotations?.['argocd.argoproj.io/refresh'], 'normal');
    assert.deepEqual(app.operation.initiatedBy, { username: 'gitops-service' });
    assert.equal(app.operation.sync.revision, 'v2');
    assert.equal((await getOperation(database.db, operation.id))?.state, 'In_Progress');
    await finish(application.name, 'Succeeded', 'successfully synced');
    const row = await outcome(syncOperation.id);
    assert.equal(row.outcome, 'Succeeded');
    assert.equal(row.outcome_message, 'successfully synced');
    await eventually('operation completed', async () =>
      (await getOperation(database.db, operation.id))?.state === 'Completed' ? true : undefined,
    );
    assert.equal((await getApp(application.name))?.operation, undefined, 'requested exactly once');
  });

  it('runs the syncs of one application one after another, in creation order', async () => {
    const application = await manualApplication();
    const first = await syncRun(application, 'r1');
    const second = await syncRun(application, 'r2');
    assert.equal((await take(application.name)).operation.sync.revision, 'r1');
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal((await getApp(application.name))?.operation, undefined, 'r2 waits while r1 runs');
    assert.equal((await getSyncOperation(database.db, second.syncOperation.id))?.requested_at, null);
    await finish(application.name, 'Failed', 'boom');
    assert.equal((await outcome(first.syncOperation.id)).outcome, 'Failed');
    assert.equal((await take(application.name)).operation.sync.revision, 'r2');
    await finish(application.name, 'Succeeded');
    assert.equal((await outcome(second.syncOperation.id)).outcome, 'Succeeded');
  });

  it('terminates a running sync (phase Terminating); a queued one ends without touching Argo CD', async () => {
    const application = await manualApplication();
    const running = await syncRun(application, 'r1');
    const queued = await syncRun(application, 'r2');
    await take(application.name);
    await eventually('requested', async () =>
      (await getSyncOperation(database.db, running.syncOperation.id))?.requested_at ? true : undefined,
    );
    for (const s of [queued, running]) {
      const operation = await database.db.transaction().execute(async (trx) => {
        await setSyncOperationDesiredState(trx, s.syncOperation.id, 'Terminated');
        return (
          await insertOperation(trx, {
            engineInstanceId,
            resourceType: 'SyncOperation',
            resourceId: s.syncOperation.id,
            ownerUserId: tenant.id,
          })
        ).operation;
      });
      await relay(operation);
    }
    assert.equal((await outcome(queued.syncOperation.id)).outcome, 'Terminated');
    await eventually('Terminating', async () => {
      const app = await getApp(application.name);
      return (app?.status as { operationState?: { phase?: string } })?.operationState?.phase === 'Terminating'
        ? app
        : undefined;
    });
    await finish(application.name, 'Terminated', 'terminated');
    assert.equal((await outcome(running.syncOperation.id)).outcome, 'Terminated');
    assert.equal((await getApp(application.name))?.operation, undefined, 'r2 was never requested');
  });
});
