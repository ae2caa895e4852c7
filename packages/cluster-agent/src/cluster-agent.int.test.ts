/**
 * The cluster-agent against a real PostgreSQL and a real API server (no Argo CD controller: the tests play
 * Argo CD's part — writing status, removing its resources finalizer). Rows are written the way the backend
 * writes them (one transaction with the operation), and the Operation CR is created the way the relay does.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  type ClusterUserRow,
  deleteApplication,
  ensureWorkspaceEnvironment,
  getApplicationState,
  getOperation,
  insertApplication,
  insertOperation,
  listen,
  NOTIFICATION_CHANNELS,
  type OperationRow,
  updateApplication,
  upsertEngineInstance,
} from '@gitops/db';
import { givenOperation, givenOwnedOperation, recordStatements, type TestDatabase } from '@gitops/db/testing';
import {
  collectionPath,
  createMetricsRegistry,
  deleteIfExists,
  getObject,
  HttpMethod,
  type JsonObject,
  type KubeConfig,
  kubeRequest,
  type Registry,
  serverSideApply,
} from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Agent } from './app.ts';
import { isFirstSync } from './application/first-sync.ts';
import type { AgentConfig } from './config.ts';
import { type AgentFixture, createAgentFixture } from './testing/agent-fixture.ts';

const APP = { apiVersion: 'argoproj.io/v1alpha1', kind: 'Application' } as const;
const PROJECT = { apiVersion: 'argoproj.io/v1alpha1', kind: 'AppProject' } as const;
const OPERATION = { apiVersion: 'managed-gitops.redhat.com/v1alpha1', kind: 'Operation' } as const;
const MERGE = 'application/merge-patch+json';

const automatedSyncPolicy = {
  automated: { prune: true, selfHeal: true, allowEmpty: true },
  syncOptions: ['PrunePropagationPolicy=background'],
  retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
};

describe('cluster-agent', () => {
  let f: AgentFixture;
  let kc: KubeConfig;
  let database: TestDatabase;
  let suffix: string;
  let argoCdNamespace: string;
  let otherArgoCdNamespace: string;
  let tenantNamespaces: string[];
  let agent: Agent;
  let registry: Registry;
  let engineInstanceId: string;
  let agentConfig: AgentConfig;

  const appRef = (name: string) => ({ ...APP, name, namespace: argoCdNamespace });
  const projectRef = (clusterUserId: string) => ({
    ...PROJECT,
    name: `app-project-${clusterUserId}`,
    namespace: argoCdNamespace,
  });
  const patch = (
    ref: { apiVersion: string; kind: string; name: string; namespace: string },
    body: unknown,
    manager = 'test',
  ) =>
    kubeRequest(kc, {
      method: HttpMethod.PATCH,
      path: `${collectionPath({ apiVersion: ref.apiVersion, plural: ref.kind === 'AppProject' ? 'appprojects' : 'applications', namespace: ref.namespace })}/${ref.name}`,
      query: { fieldManager: manager },
      body,
      contentType: MERGE,
    });

  /** Plays Argo CD: after pruning, it removes its finalizer. */
  const removeFinalizers = (name: string) => patch(appRef(name), { metadata: { finalizers: null } });

  /** Plays Argo CD: a sync of `name` runs, started now; returns its start time. */
  const startSync = async (name: string): Promise<string> => {
    const startedAt = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    await patch(
      appRef(name),
      {
        status: {
          operationState: { operation: { sync: { revision: 'main' } }, phase: 'Running', startedAt },
        },
      },
      'argocd-test',
    );
    return startedAt;
  };

  const givenTenant = (namespace: string) => f.givenTenant(namespace);
  const relay = (operation: OperationRow, namespace?: string) => f.relay(operation, namespace);

  /** What the backend's reconcile writes for a new GitOpsDeployment, in one transaction. */
  async function deploy(
    tenant: ClusterUserRow,
    input: {
      repoURL: string;
      path?: string;
      automated?: boolean;
      spec?: Record<string, never>;
      name?: string;
      /** false: the relay has not created the Operation CR (backend killed after commit). */
      relay?: boolean;
      /** Leave the operation In_Progress as an agent that crashed mid-operation would. */
      crashed?: boolean;
    },
  ) {
    const crUid = randomUUID();
    const env = await ensureWorkspaceEnvironment(database.db, {
      id: tenant.id,
      namespaceName: tenant.namespace_name,
    });
    const { application, operation } = await database.db.transaction().execute(async (trx) => {
      const application = await insertApplication(trx, {
        name: input.name ?? `gitopsdepl-${crUid}`,
        clusterUserId: tenant.id,
        engineInstanceId,
        managedEnvironmentId: env.id,
        spec: input.spec ?? {
          source: { repoURL: input.repoURL, path: input.path ?? 'env/dev', targetRevision: 'main' },
          destination: { namespace: tenant.namespace_name },
          ...(input.automated === false ? {} : { syncPolicy: automatedSyncPolicy }),
        },
      });
      const operation = await givenOwnedOperation(trx, {
        tenant,
        engineInstanceId,
        cr: { uid: crUid, name: `deployment-${crUid.slice(0, 8)}`, namespace: tenant.namespace_name },
        row: { kind: 'GitOpsDeployment', applicationId: application.id },
      });
      if (input.crashed) {
        await trx
          .updateTable('operation')
          .set({ state: 'In_Progress', attempts: 1, last_attempt_at: sql<Date>`now() - interval '1 hour'` })
          .where('id', '=', operation.id)
          .execute();
      }
      return { application, operation };
    });
    if (input.relay ?? true) await relay(operation);
    return { application, operation, owner: crUid };
  }

  /** What the backend writes when a GitOpsDeployment is deleted. */
  async function undeploy(tenant: ClusterUserRow, applicationId: string) {
    const operation = await givenOperation(
      database.db,
      { engineInstanceId, resourceType: 'Application', resourceId: applicationId, ownerUserId: tenant.id },
      (trx) => deleteApplication(trx, applicationId, { proven: true }),
    );
    await relay(operation);
    return operation;
  }

  /** The application's application_state row once the agent wrote Argo CD's operation phase `phase` into it. */
  const stateInPhase = (what: string, applicationId: string, phase: string) =>
    eventually(what, async () => {
      const row = await getApplicationState(database.db, applicationId);
      const state = row?.state as { operationState?: { phase?: string } } | undefined;
      return state?.operationState?.phase === phase ? row : undefined;
    });
  const finished = (id: string) =>
    eventually(`operation ${id} finished`, async () => {
      const row = await getOperation(database.db, id);
      return row && (row.state === 'Completed' || row.state === 'Failed') ? row : undefined;
    });

  const metricValue = async (name: string, labels: Record<string, string>) => {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
    const value = metric?.values.find((v) =>
      Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l),
    );
    return value?.value ?? 0;
  };

  beforeAll(async () => {
    f = await createAgentFixture({ prefix: 'agent' });
    ({ kc, database, suffix, argoCdNamespace } = f);
    otherArgoCdNamespace = `agent-other-${suffix}`;
    tenantNamespaces = ['t1', 't2', 't3', 't4', 't5', 't6', 't7', 't8'].map((t) => `agent-${t}-${suffix}`);
    for (const name of [otherArgoCdNamespace, ...tenantNamespaces]) await f.createNamespace(name);
    agentConfig = f.config({
      OPERATION_SWEEP_INTERVAL: '500ms',
      OPERATION_MAX_ATTEMPTS: '3',
      OPERATION_STALE_AFTER: '1s',
    });
    registry = createMetricsRegistry({ defaultMetrics: false });
    agent = await f.startAgent(agentConfig, registry);
    assert.equal(agent.ready(), true);
    engineInstanceId = agent.engineInstance()!.id;
  });

  afterAll(async () => {
    await agent?.close();
    await f?.cleanup();
  });

  it('an operation for a new application creates the exact Application, completes, and its CR is deleted', async () => {
    const tenant = await givenTenant(tenantNamespaces[0]!);
    const { application, operation, owner } = await deploy(tenant, {
      repoURL: 'https://github.com/org/repo',
    });

    const done = await finished(operation.id);
    assert.equal(done.state, 'Completed', done.message);
    const app = await getObject(kc, appRef(application.name));
    assert.ok(app);
    assert.deepEqual(app.metadata.labels, {
      'managed-gitops.redhat.com/database-id': application.id,
      'managed-gitops.redhat.com/cluster-user-id': tenant.id,
      'managed-gitops.redhat.com/gitopsdeployment-name': `deployment-${owner.slice(0, 8)}`,
      'managed-gitops.redhat.com/gitopsdeployment-namespace': tenant.namespace_name,
    });
    assert.deepEqual(app.metadata.finalizers, ['resources-finalizer.argocd.argoproj.io']);
    assert.deepEqual(app.spec, {
      project: `app-project-${tenant.id}`,
      source: { repoURL: 'https://github.com/org/repo', path: 'env/dev', targetRevision: 'main' },
      destination: { name: 'in-cluster', namespace: tenant.namespace_name },
      syncPolicy: automatedSyncPolicy,
    });
    const managers = (app.metadata.managedFields as Array<{ manager: string }>).map((m) => m.manager);
    assert.deepEqual(managers, ['gitops-cluster-agent']);
    // Its first sync starts with its create, as Argo CD's automated policy would set it (first-sync.ts).
    assert.deepEqual(app.operation, {
      initiatedBy: { automated: true },
      info: [
        { name: 'gitops-first-sync', value: "started with the Application's create by the GitOps Service" },
      ],
      sync: { prune: true, syncOptions: ['PrunePropagationPolicy=background'] },
      retry: automatedSyncPolicy.retry,
    });

    await eventually('Operation CR deleted', async () =>
      (await getObject(kc, { ...OPERATION, name: `operation-${operation.id}`, namespace: argoCdNamespace }))
        ? undefined
        : true,
    );
    // A late CR for a finished operation (e.g. a relay retry) is deleted too.
    await relay(operation);
    await eventually('late Operation CR deleted', async () =>
      (await getObject(kc, { ...OPERATION, name: `operation-${operation.id}`, namespace: argoCdNamespace }))
        ? undefined
        : true,
    );
  });

  it("a new Application of a tenant whose project lists its repository costs the agent three statements about it: its operation's start with its row, its first state, the finish", async () => {
    const tenant = await givenTenant(tenantNamespaces[0]!);
    // The tenant's project, listing the repository, exists: the first deployment made it.
    const first = await deploy(tenant, { repoURL: 'https://github.com/org/counted', relay: false });
    assert.equal((await finished(first.operation.id)).state, 'Completed');
    const recorder = recordStatements('gitops-cluster-agent');
    try {
      const { application, operation } = await deploy(tenant, {
        repoURL: 'https://github.com/org/counted',
        path: 'env/prod',
        relay: false,
      });
      assert.equal((await finished(operation.id)).state, 'Completed');
      // Its first state (nothing compared yet) is written at once here (GITOPS_STATUS_QUEUED_INTERVAL=0; by
      // default it waits for Argo CD's settled state).
      await eventually('its first state', () => getApplicationState(database.db, application.id));
      const kinds = recorder
        .about(application.id, operation.id)
        .map((s) => s.text.replace(/\s+/g, ' ').trim().split(' ').slice(0, 3).join(' '))
        .sort();
      // A statement more for a new Application (a read of its row apart from its operation's start, a second
      // write of the operation) fails here.
      assert.deepEqual(kinds, ['WITH unfinished AS', 'insert into application_state', 'update operation o']);
    } finally {
      recorder.stop();
    }
  });

  it('each tenant gets one AppProject listing exactly its repositories and destinations', async () => {
    // Tenants of their own: the projects list exactly what this test deployed, whatever ran before.
    const first = await givenTenant(tenantNamespaces[4]!);
    const second = await givenTenant(tenantNamespaces[5]!);
    // One after the other: the project then lists both repositories of the first tenant.
    const earlier = await deploy(first, { repoURL: 'https://github.com/org/repo' });
    assert.equal((await finished(earlier.operation.id)).state, 'Completed');
    const a = await deploy(first, { repoURL: 'https://github.com/org/Second.git' });
    const b = await deploy(second, { repoURL: 'https://github.com/org/other', automated: false });
    assert.equal((await finished(a.operation.id)).state, 'Completed');
    assert.equal((await finished(b.operation.id)).state, 'Completed');

    const firstProject = await getObject(kc, projectRef(first.id));
    assert.deepEqual(firstProject?.spec, {
      sourceRepos: ['https://github.com/org/repo', 'https://github.com/org/second'],
      destinations: [{ name: 'in-cluster', namespace: first.namespace_name }],
    });
    assert.equal(firstProject?.metadata.labels?.['managed-gitops.redhat.com/database-id'], first.id);
    const secondProject = await getObject(kc, projectRef(second.id));
    assert.deepEqual(secondProject?.spec, {
      sourceRepos: ['https://github.com/org/other'],
      destinations: [{ name: 'in-cluster', namespace: second.namespace_name }],
    });
    const manual = await getObject(kc, appRef(b.application.name));
    assert.equal((manual!.spec as { syncPolicy?: unknown }).syncPolicy, undefined);
    assert.equal(manual!.operation, undefined, 'a manual deployment is not synced by its create');
  });

  it('an edit before Argo CD ended the first sync keeps it; once Argo CD cleared it, an edit starts none', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/first' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    const first = (await getObject(kc, appRef(application.name)))?.operation;
    assert.ok(isFirstSync(first), 'created with its first sync');
    /** What the backend writes when the GitOpsDeployment's path changes; the Application once it has it. */
    const editTo = async (path: string) => {
      await database.db.transaction().execute(async (trx) => {
        await updateApplication(trx, application.id, {
          managedEnvironmentId: application.managed_environment_id,
          spec: {
            source: { repoURL: 'https://github.com/org/first', path, targetRevision: 'main' },
            destination: { namespace: tenant.namespace_name },
            syncPolicy: automatedSyncPolicy,
          },
        });
        await insertOperation(trx, {
          engineInstanceId,
          resourceType: 'Application',
          resourceId: application.id,
          ownerUserId: tenant.id,
        });
      });
      return await eventually(`the Application at ${path}`, async () => {
        const app = await getObject(kc, appRef(application.name));
        return (app?.spec as { source?: { path?: string } } | undefined)?.source?.path === path
          ? app
          : undefined;
      });
    };
    // Argo CD has not ended it (no Argo CD here): the apply of the edit carries it, not withdraws it.
    const edited = await editTo('env/stage');
    assert.deepEqual(edited.operation, first);
    // Argo CD ends the sync and clears the operation: the next edit does not start it again.
    await patch(appRef(application.name), { operation: null }, 'argocd-test');
    const again = await editTo('env/prod');
    assert.equal(again.operation, undefined);
  });

  it('an edit that drops part of a section it keeps removes it from the Application its create made: automated to manual, a Helm value', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const repoURL = 'https://github.com/org/dropped';
    const specOf = (syncPolicy: JsonObject, valuesObject: JsonObject) => ({
      source: { repoURL, path: 'env/dev', targetRevision: 'main', helm: { valuesObject } },
      destination: { namespace: tenant.namespace_name },
      syncPolicy,
    });
    const { application, operation } = await deploy(tenant, {
      repoURL,
      spec: specOf(automatedSyncPolicy, { replicas: 2, 'log.debug': true }) as never,
    });
    assert.equal((await finished(operation.id)).state, 'Completed');
    const created = await getObject(kc, appRef(application.name));
    assert.ok(created);
    // Created by a POST: the create's entry is an Update of ours, which an apply alone would leave owning both.
    assert.deepEqual(
      (created.metadata.managedFields as Array<{ manager: string; operation: string }>).map(
        ({ manager, operation }) => `${manager} ${operation}`,
      ),
      ['gitops-cluster-agent Update'],
    );
    const manual = specOf({ syncOptions: automatedSyncPolicy.syncOptions }, { replicas: 2 });
    await database.db.transaction().execute(async (trx) => {
      await updateApplication(trx, application.id, {
        managedEnvironmentId: application.managed_environment_id,
        spec: manual,
      });
      await insertOperation(trx, {
        engineInstanceId,
        resourceType: 'Application',
        resourceId: application.id,
        ownerUserId: tenant.id,
      });
    });
    const edited = await eventually(
      'the Application without automated sync and the dropped value',
      async () => {
        const app = await getObject(kc, appRef(application.name));
        const spec = app?.spec as { syncPolicy?: { automated?: unknown } } | undefined;
        return spec && spec.syncPolicy?.automated === undefined ? app : undefined;
      },
    );
    const spec = edited.spec as { source: unknown; syncPolicy: unknown };
    assert.deepEqual(spec.syncPolicy, { syncOptions: automatedSyncPolicy.syncOptions });
    assert.deepEqual(spec.source, manual.source);
  });

  it('many Applications of one tenant announced at once: the AppProject ends listing every repository', async () => {
    // Their operations run concurrently; each recomputes the tenant's project from the rows it reads, so an
    // unordered write computed from older rows could land last and leave a repository out.
    const tenant = await givenTenant(tenantNamespaces[6]!);
    const repos = Array.from({ length: 16 }, (_, i) => `https://github.com/org/many-${i}`);
    const deployed = await Promise.all(repos.map((repoURL) => deploy(tenant, { repoURL })));
    for (const { operation } of deployed) assert.equal((await finished(operation.id)).state, 'Completed');
    const project = await getObject(kc, projectRef(tenant.id));
    assert.deepEqual(
      (project?.spec as { sourceRepos?: string[] } | undefined)?.sourceRepos,
      [...repos].sort(),
    );
  });

  it("a tenant's second Application of a known repository leaves the project as it is; a repository change updates it", async () => {
    const tenant = await givenTenant(tenantNamespaces[7]!);
    const first = await deploy(tenant, { repoURL: 'https://github.com/org/shared' });
    const second = await deploy(tenant, { repoURL: 'https://github.com/org/Shared.git' });
    for (const { operation } of [first, second])
      assert.equal((await finished(operation.id)).state, 'Completed');
    const sourceRepos = async () =>
      ((await getObject(kc, projectRef(tenant.id)))?.spec as { sourceRepos?: string[] } | undefined)
        ?.sourceRepos;
    assert.deepEqual(await sourceRepos(), ['https://github.com/org/shared']);
    // The second Application moves to another repository: the project gains it; both repositories stay
    // while the first Application still uses the shared one.
    /** What the backend writes when a GitOpsDeployment's source changes: the row and its operation. */
    const moveTo = (application: typeof first.application, repoURL: string, path: string) =>
      database.db.transaction().execute(async (trx) => {
        await updateApplication(trx, application.id, {
          managedEnvironmentId: application.managed_environment_id,
          spec: {
            source: { repoURL, path, targetRevision: 'main' },
            destination: { namespace: tenant.namespace_name },
          },
        });
        const announced = await insertOperation(trx, {
          engineInstanceId,
          resourceType: 'Application',
          resourceId: application.id,
          ownerUserId: tenant.id,
        });
        return announced.operation;
      });
    const moved = await moveTo(second.application, 'https://github.com/org/moved', 'env/dev');
    assert.equal((await finished(moved.id)).state, 'Completed');
    assert.deepEqual(await sourceRepos(), ['https://github.com/org/moved', 'https://github.com/org/shared']);
    // And the first one moves too: the shared repository is no longer any Application's, so it leaves.
    const movedToo = await moveTo(first.application, 'https://github.com/org/moved', 'env/other');
    assert.equal((await finished(movedToo.id)).state, 'Completed');
    assert.deepEqual(await sourceRepos(), ['https://github.com/org/moved']);
  });

  it('a sync Argo CD reports running whose operation was withdrawn is resumed on the next reconcile of its row', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/resume' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    // Plays Argo CD: the first sync failed and waits to be retried, and its operation is withdrawn meanwhile
    // (a tenant move's release that gave up waiting, undone by a move back). Argo CD runs no operation then.
    await patch(
      appRef(application.name),
      {
        operation: null,
        status: {
          operationState: {
            operation: { sync: { revision: 'main' }, initiatedBy: { automated: true } },
            phase: 'Running',
            message: 'not permitted in project. Retrying attempt #1',
            retryCount: 1,
            startedAt: '2026-11-30T18:07:05Z',
            finishedAt: '2026-11-30T18:07:21Z',
          },
        },
      },
      'argocd-test',
    );
    // The row's next reconcile (here an operation announcing it unchanged, as an adoption or a resync would).
    const announced = await database.db.transaction().execute(
      async (trx) =>
        (
          await insertOperation(trx, {
            engineInstanceId,
            resourceType: 'Application',
            resourceId: application.id,
            ownerUserId: tenant.id,
          })
        ).operation,
    );
    assert.equal((await finished(announced.id)).state, 'Completed');
    const resumed = await getObject(kc, appRef(application.name));
    assert.ok(isFirstSync(resumed?.operation), JSON.stringify(resumed?.operation));
    assert.deepEqual((resumed?.operation as { sync?: unknown } | undefined)?.sync, {
      prune: true,
      syncOptions: ['PrunePropagationPolicy=background'],
    });
  });

  it('Argo CD status becomes application_state; an unchanged projection writes nothing', async () => {
    const tenant = await givenTenant(tenantNamespaces[1]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/status' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    // The new Application (no Argo CD status yet) gets its first application_state row on its own, maybe
    // after the operation completed: counted from after that write, only the test's patches notify.
    await eventually('the first application_state row', () =>
      getApplicationState(database.db, application.id),
    );
    let notifications = 0;
    const listener = listen(database.url, [NOTIFICATION_CHANNELS.applicationStateChanged], (n) => {
      if (n.payload === application.id) notifications++;
    });
    await listener.ready;
    try {
      const status = (phase: string, reconciledAt: string) => ({
        status: {
          sync: {
            status: 'Synced',
            revision: 'abc',
            comparedTo: {
              source: { repoURL: 'https://github.com/org/status', path: 'env/dev', targetRevision: 'main' },
              destination: { name: 'in-cluster', namespace: tenant.namespace_name },
            },
          },
          health: { status: 'Healthy' },
          resources: [
            {
              version: 'v1',
              kind: 'ConfigMap',
              namespace: tenant.namespace_name,
              name: 'c',
              status: 'Synced',
            },
          ],
          operationState: {
            operation: { sync: { revision: 'abc' } },
            phase,
            message: 'ok',
            startedAt: '2026-01-01T00:00:00Z',
          },
          reconciledAt,
        },
      });
      await patch(
        appRef(application.name),
        status('Running', '2026-01-01T00:00:01Z'),
        'argocd-application-controller',
      );
      const first = await stateInPhase('application_state written', application.id, 'Running');
      assert.deepEqual(first.state, {
        sync: { status: 'Synced', revision: 'abc' },
        health: { status: 'Healthy' },
        resources: [
          {
            group: '',
            version: 'v1',
            kind: 'ConfigMap',
            namespace: tenant.namespace_name,
            name: 'c',
            status: 'Synced',
          },
        ],
        reconciledState: {
          source: { repoURL: 'https://github.com/org/status', path: 'env/dev', targetRevision: 'main' },
          destination: { name: 'in-cluster', namespace: tenant.namespace_name },
        },
        operationState: {
          operation: { sync: { revision: 'abc' } },
          phase: 'Running',
          message: 'ok',
          startedAt: '2026-01-01T00:00:00Z',
        },
        conditions: [],
      });
      // Only reconciledAt changes: same projection, nothing written.
      await patch(
        appRef(application.name),
        status('Running', '2026-01-01T00:00:02Z'),
        'argocd-application-controller',
      );
      // Then a real change, which serves as the barrier.
      await patch(
        appRef(application.name),
        status('Succeeded', '2026-01-01T00:00:03Z'),
        'argocd-application-controller',
      );
      const second = await stateInPhase('application_state updated', application.id, 'Succeeded');
      assert.ok(second.updated_at > first.updated_at);
      await eventually('two notifications', async () => (notifications >= 2 ? true : undefined));
      assert.equal(notifications, 2, 'the unchanged projection must not have been written');
    } finally {
      await listener.close();
    }
  });

  it('a user-edited Application spec and a deleted Application are put back', async () => {
    const tenant = await givenTenant(tenantNamespaces[1]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/drift' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    const before = await metricValue('drift_corrected_total', { kind: 'Application' });

    await patch(
      appRef(application.name),
      { spec: { source: { path: 'evil' }, syncPolicy: null } },
      'kubectl-edit',
    );
    await eventually('edited spec repaired', async () => {
      const app = await getObject(kc, appRef(application.name));
      const spec = app?.spec as { source: { path: string }; syncPolicy?: unknown };
      return spec.source.path === 'env/dev' && spec.syncPolicy !== undefined ? true : undefined;
    });

    const original = await getObject(kc, appRef(application.name));
    await deleteIfExists(kc, appRef(application.name));
    await removeFinalizers(application.name); // Argo CD, after pruning
    const recreated = await eventually('deleted Application re-created', async () => {
      const app = await getObject(kc, appRef(application.name));
      return app && app.metadata.uid !== original?.metadata.uid && !app.metadata.deletionTimestamp
        ? app
        : undefined;
    });
    assert.deepEqual(recreated.metadata.finalizers, ['resources-finalizer.argocd.argoproj.io']);
    // The counter goes up once the repair's apply has returned, which may be just after the object is visible.
    await eventually('both repairs counted', async () =>
      (await metricValue('drift_corrected_total', { kind: 'Application' })) >= before + 2 ? true : undefined,
    );
  });

  it('a deleted row: the Application is deleted, the operation completes once Argo CD removed it, the AppProject goes with the last app', async () => {
    const tenant = await givenTenant(tenantNamespaces[2]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/delete' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    assert.ok(await getObject(kc, projectRef(tenant.id)));

    const deleteOperation = await undeploy(tenant, application.id);
    await eventually('Application marked for deletion', async () =>
      (await getObject(kc, appRef(application.name)))?.metadata.deletionTimestamp ? true : undefined,
    );
    // Argo CD has not removed its finalizer yet: the operation waits, the AppProject stays.
    assert.equal((await getOperation(database.db, deleteOperation.id))?.state, 'In_Progress');
    assert.ok(await getObject(kc, projectRef(tenant.id)));

    await removeFinalizers(application.name);
    const done = await finished(deleteOperation.id);
    assert.equal(done.state, 'Completed', done.message);
    assert.equal(await getObject(kc, appRef(application.name)), undefined);
    await eventually('AppProject deleted', async () =>
      (await getObject(kc, projectRef(tenant.id))) ? undefined : true,
    );
  });

  it('a deleted row whose Application is syncing: the sync is ended first, the Application deleted after', async () => {
    const tenant = await givenTenant(tenantNamespaces[2]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/syncing' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    // Plays Argo CD: a sync runs (it may just have created resources its cache does not know yet).
    const startedAt = await startSync(application.name);

    const deleteOperation = await undeploy(tenant, application.id);
    const terminating = await eventually('the running sync asked to terminate', async () => {
      const app = await getObject(kc, appRef(application.name));
      const phase = (app?.status as { operationState?: { phase?: string } } | undefined)?.operationState
        ?.phase;
      return phase === 'Terminating' ? app : undefined;
    });
    assert.equal(terminating.metadata.deletionTimestamp, undefined, 'not deleted while its sync runs');
    assert.equal((await getOperation(database.db, deleteOperation.id))?.state, 'In_Progress');

    // Argo CD ends the sync: now the Application goes.
    await patch(
      appRef(application.name),
      {
        status: {
          operationState: { phase: 'Failed', message: 'Operation terminated', finishedAt: startedAt },
        },
      },
      'argocd-test',
    );
    await eventually('Application marked for deletion', async () =>
      (await getObject(kc, appRef(application.name)))?.metadata.deletionTimestamp ? true : undefined,
    );
    await removeFinalizers(application.name);
    assert.equal((await finished(deleteOperation.id)).state, 'Completed');
  });

  it('a deleted row whose Application keeps an operation Argo CD does not end: after the wait the operation is withdrawn, so Argo CD can finalize the delete', async () => {
    const tenant = await givenTenant(tenantNamespaces[2]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/stuck' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    // Plays an Argo CD whose sync never ends (e.g. waiting to retry a failed sync): the operation stays set.
    await patch(appRef(application.name), { operation: { sync: { revision: 'main' } } }, 'argocd-test');
    await startSync(application.name);

    await undeploy(tenant, application.id);
    const deleted = await eventually(
      'the Application deleted with its operation withdrawn',
      async () => {
        const app = await getObject(kc, appRef(application.name));
        return app?.metadata.deletionTimestamp ? app : undefined;
      },
      60_000,
    );
    assert.equal((deleted as { operation?: unknown }).operation, undefined, 'no operation left to block it');
    await removeFinalizers(application.name);
  }, 90_000);

  it('a moved row whose Application is syncing: the release lets the sync finish (a move back must not leave it terminated), then releases it without cascading', async () => {
    const tenant = await givenTenant(tenantNamespaces[2]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/moving' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    const startedAt = await startSync(application.name);
    const targetNs = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: otherArgoCdNamespace });
    const target = await upsertEngineInstance(database.db, {
      name: `moving-to-${suffix}`,
      namespaceName: otherArgoCdNamespace,
      namespaceUid: targetNs!.metadata.uid!,
      clusterIdentity: 'test',
    });
    await f.moveTenant(tenant, engineInstanceId, target.id);

    // The sync keeps running: not asked to terminate, and the Application stays while it runs.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const during = await getObject(kc, appRef(application.name));
    assert.equal(
      (during?.status as { operationState?: { phase?: string } } | undefined)?.operationState?.phase,
      'Running',
    );
    assert.equal(during?.metadata.deletionTimestamp, undefined);

    // Argo CD finishes it: now the Application is released (no finalizer: nothing pruned) and handed over.
    await patch(
      appRef(application.name),
      { status: { operationState: { phase: 'Succeeded', finishedAt: startedAt } } },
      'argocd-test',
    );
    await eventually('the Application released', async () =>
      (await getObject(kc, appRef(application.name))) ? undefined : true,
    );
    // The agent records the release after the Application is gone (completeApplicationRelease): wait for it.
    await eventually('handed over: the new instance adopts it', async () => {
      const row = await database.db
        .selectFrom('application')
        .select('releasing_engine_instance_id')
        .where('id', '=', application.id)
        .executeTakeFirst();
      return row?.releasing_engine_instance_id === target.id ? true : undefined;
    });
  });

  it('an Application with our label and no row is deleted once the deletion of its row was recorded (orphan)', async () => {
    const tenant = await givenTenant(tenantNamespaces[2]!);
    const orphanId = randomUUID();
    // The backend's proof (application_deletion), as deleteApplication writes it; without it the orphan is kept
    // (deletion-guard.int.test.ts).
    await database.db
      .insertInto('application_deletion')
      .values({
        application_id: orphanId,
        engine_instance_id: engineInstanceId,
        cluster_user_id: tenant.id,
        application_name: `orphan-${suffix}`,
      })
      .execute();
    await serverSideApply(
      kc,
      {
        ...APP,
        metadata: {
          name: `orphan-${suffix}`,
          namespace: argoCdNamespace,
          labels: {
            'managed-gitops.redhat.com/database-id': orphanId,
            'managed-gitops.redhat.com/cluster-user-id': tenant.id,
          },
        },
        spec: {
          project: 'default',
          source: { repoURL: 'https://github.com/org/orphan', path: 'x' },
          destination: { name: 'in-cluster', namespace: tenant.namespace_name },
        },
      },
      { fieldManager: 'someone' },
    );
    await eventually('orphan deleted', async () =>
      (await getObject(kc, appRef(`orphan-${suffix}`))) ? undefined : true,
    );
  });

  it('a malformed application row fails its operation with a message, and the agent keeps working', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const bad = await deploy(tenant, {
      repoURL: '',
      spec: { source: { path: 'x' }, destination: { namespace: 'y' } } as never,
    });
    const failed = await finished(bad.operation.id);
    assert.equal(failed.state, 'Failed');
    assert.match(failed.message, /malformed application spec: source\.repoURL/);
    assert.equal(await getObject(kc, appRef(bad.application.name)), undefined);

    const good = await deploy(tenant, { repoURL: 'https://github.com/org/fine' });
    assert.equal((await finished(good.operation.id)).state, 'Completed');
    assert.ok(await getObject(kc, appRef(good.application.name)));
  });

  it('Operation CRs in another namespace, for another engine instance, or without a valid id are ignored', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const otherNs = await getObject(kc, { apiVersion: 'v1', kind: 'Namespace', name: otherArgoCdNamespace });
    const other = await upsertEngineInstance(database.db, {
      name: `other-${suffix}`,
      namespaceName: otherArgoCdNamespace,
      namespaceUid: otherNs!.metadata.uid!,
      clusterIdentity: 'test',
    });
    const foreign = await database.db.transaction().execute(async (trx) => {
      const application = await insertApplication(trx, {
        name: `gitopsdepl-${randomUUID()}`,
        clusterUserId: tenant.id,
        engineInstanceId: other.id,
        managedEnvironmentId: null,
        spec: {
          source: { repoURL: 'https://github.com/org/foreign', path: 'x' },
          destination: { namespace: 'y' },
        },
      });
      return (
        await insertOperation(trx, {
          engineInstanceId: other.id,
          resourceType: 'Application',
          resourceId: application.id,
          ownerUserId: tenant.id,
        })
      ).operation;
    });
    await relay(foreign, otherArgoCdNamespace);
    // Our CR pointing at the foreign row is ignored too.
    await relay(foreign, argoCdNamespace);
    // So are CRs whose operationID is not an operation id at all.
    await serverSideApply(
      kc,
      {
        ...OPERATION,
        metadata: { name: `malformed-${suffix}`, namespace: argoCdNamespace },
        spec: { operationID: 'x' },
      },
      { fieldManager: 'test-relay' },
    );

    // Barrier: a later operation of our own completes (and several sweeps have run meanwhile).
    const ours = await deploy(tenant, { repoURL: 'https://github.com/org/fine' });
    assert.equal((await finished(ours.operation.id)).state, 'Completed');
    // Everything the agent was given (the ignored CRs included) has been handled to the end.
    await agent.whenIdle();
    assert.equal((await getOperation(database.db, foreign.id))?.state, 'Waiting');
    assert.ok(
      await getObject(kc, { ...OPERATION, name: `operation-${foreign.id}`, namespace: otherArgoCdNamespace }),
    );
  });

  it('a Waiting operation whose Operation CR was never created is processed (the agent hears the commit; the sweep is the net)', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const { application, operation } = await deploy(tenant, {
      repoURL: 'https://github.com/org/no-cr',
      relay: false,
    });
    const done = await finished(operation.id);
    assert.equal(done.state, 'Completed', done.message);
    assert.ok(await getObject(kc, appRef(application.name)));
  });

  it('an In_Progress operation left by a crashed agent is retried and completed', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    const { application, operation } = await deploy(tenant, {
      repoURL: 'https://github.com/org/crashed',
      relay: false,
      crashed: true,
    });
    const done = await finished(operation.id);
    assert.equal(done.state, 'Completed', done.message);
    assert.equal(done.attempts, 2);
    assert.ok(await getObject(kc, appRef(application.name)));
  });

  it('an operation that keeps failing is retried with backoff, then Failed after OPERATION_MAX_ATTEMPTS', async () => {
    const tenant = await givenTenant(tenantNamespaces[3]!);
    // The API server rejects this name (upper case, underscore) on every attempt.
    const { operation } = await deploy(tenant, {
      repoURL: 'https://github.com/org/x',
      name: `Bad_Name-${suffix}`,
    });
    const failed = await finished(operation.id);
    assert.equal(failed.state, 'Failed');
    assert.equal(failed.attempts, 3);
    assert.match(failed.message, /^failed after 3 attempts: .*422/);
  });

  it('a user-edited or deleted AppProject is put back', async () => {
    const tenant = await givenTenant(tenantNamespaces[1]!);
    // An application of its own, so the project exists whichever tests ran before.
    const { operation } = await deploy(tenant, { repoURL: 'https://github.com/org/project-drift' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    const expected = (await getObject(kc, projectRef(tenant.id)))?.spec;
    assert.ok(expected);
    await patch(projectRef(tenant.id), { spec: { sourceRepos: ['*'] } }, 'kubectl-edit');
    await eventually('AppProject repaired', async () => {
      const project = await getObject(kc, projectRef(tenant.id));
      return JSON.stringify(project?.spec) === JSON.stringify(expected) ? true : undefined;
    });
    await deleteIfExists(kc, projectRef(tenant.id));
    await eventually('AppProject re-created', async () => {
      const project = await getObject(kc, projectRef(tenant.id));
      return JSON.stringify(project?.spec) === JSON.stringify(expected) ? true : undefined;
    });
  });

  it('after a restart, an Application deleted while the agent was down is re-created and In_Progress operations are recovered', async () => {
    const tenant = await givenTenant(tenantNamespaces[1]!);
    const { application, operation } = await deploy(tenant, { repoURL: 'https://github.com/org/restart' });
    assert.equal((await finished(operation.id)).state, 'Completed');
    await agent.close();
    await deleteIfExists(kc, appRef(application.name));
    await removeFinalizers(application.name);
    await eventually('Application gone', async () =>
      (await getObject(kc, appRef(application.name))) ? undefined : true,
    );
    // Left In_Progress by the agent that stopped: recovered at start, not after OPERATION_STALE_AFTER.
    const crashed = await deploy(tenant, {
      repoURL: 'https://github.com/org/restart',
      relay: false,
      crashed: true,
    });
    agent = await f.startAgent({ ...agentConfig, operationStaleAfterMs: 24 * 3_600_000 });
    assert.equal(
      agent.engineInstance()?.id,
      engineInstanceId,
      'the engine instance row is found again by name',
    );
    await eventually(
      'Application re-created',
      async () => (await getObject(kc, appRef(application.name))) ?? undefined,
    );
    const recovered = await finished(crashed.operation.id);
    assert.equal(recovered.state, 'Completed', recovered.message);
    assert.ok(await getObject(kc, appRef(crashed.application.name)));
  });
});
