/**
 * The refresh an application row asks for (issue 34 item 4) against a real PostgreSQL and API server: the
 * backend's transaction (`requestApplicationRefresh`) is played by the test, Argo CD too (it removes its
 * refresh annotation once it has refreshed). Argo CD is asked once per request: never again for the same one,
 * whatever reconciles the Application next.
 */
import assert from 'node:assert/strict';
import { type ApplicationRow, getApplication, getOperation, requestApplicationRefresh } from '@gitops/db';
import { givenNotDueOperation, givenOperation } from '@gitops/db/testing';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import { AgentAnnotation, REFRESH_ANNOTATION } from '../argocd.ts';
import { useAgentFixture, useAgentWithTenant } from '../testing/agent-fixture.ts';

describe('cluster-agent: the refresh an application row asks for', () => {
  const f = useAgentFixture({ prefix: 'refresh' });
  const started = useAgentWithTenant(f, { OPERATION_SWEEP_INTERVAL: '500ms' });

  const completed = (id: string) =>
    eventually(`operation ${id} Completed`, async () =>
      (await getOperation(f.db, id))?.state === 'Completed' ? true : undefined,
    );
  const annotations = async (name: string) => (await f.getApplication(name))?.metadata.annotations ?? {};

  async function deployed(): Promise<ApplicationRow> {
    const { application, operation } = await f.givenDeployment(
      started.tenant,
      started.tenantNamespace,
      started.engineInstanceId,
    );
    await completed(operation.id);
    return application;
  }
  /** What the backend writes after a push to the branch the application follows. */
  async function requestRefresh(application: ApplicationRow) {
    const [inserted] = await f.db
      .transaction()
      .execute((trx) => requestApplicationRefresh(trx, [{ id: application.id }]));
    assert.ok(inserted);
    return inserted.operation;
  }
  /** An operation for the row with nothing new in it (another change announced, a replay). */
  const announce = (application: ApplicationRow) =>
    givenOperation(f.db, {
      engineInstanceId: started.engineInstanceId,
      resourceType: 'Application',
      resourceId: application.id,
      ownerUserId: started.tenant.id,
    });
  /** Plays Argo CD: it has refreshed, and removes its annotation. */
  const argoCdRefreshed = (name: string) =>
    f.patchApplication(name, { metadata: { annotations: { [REFRESH_ANNOTATION]: null } } });

  it('an ordinary change asks for no refresh', async () => {
    const application = await deployed();
    await started.agent.whenIdle();
    const found = await annotations(application.name);
    assert.equal(found[REFRESH_ANNOTATION], undefined);
    assert.equal(found[AgentAnnotation.RefreshServed], undefined);
  });

  it('a requested refresh sets the annotation once, recording the request; the next reconcile does not set it again', async () => {
    const application = await deployed();
    const before = (await f.getApplication(application.name))?.metadata;
    await completed((await requestRefresh(application)).id);
    const row = await getApplication(f.db, application.id);
    const asked = await annotations(application.name);
    assert.equal(asked[REFRESH_ANNOTATION], 'normal');
    assert.equal(asked[AgentAnnotation.RefreshServed], row?.refresh_requested_at?.toISOString());
    // The stamp left the row version alone: the Application was not applied again for it.
    assert.equal(asked[AgentAnnotation.RowVersion], before?.annotations?.[AgentAnnotation.RowVersion]);

    await argoCdRefreshed(application.name);
    const refreshed = await f.getApplication(application.name);
    assert.equal(refreshed?.metadata.annotations?.[REFRESH_ANNOTATION], undefined);
    await completed((await announce(application)).id);
    await started.agent.whenIdle();
    const after = (await f.getApplication(application.name)) as KubeObject;
    assert.equal(after.metadata.annotations?.[REFRESH_ANNOTATION], undefined, 'not asked twice');
    assert.equal(after.metadata.resourceVersion, refreshed?.metadata.resourceVersion, 'nothing written');
  });

  it('a later request is served again', async () => {
    const application = await deployed();
    await completed((await requestRefresh(application)).id);
    const first = (await annotations(application.name))[AgentAnnotation.RefreshServed];
    await argoCdRefreshed(application.name);
    await completed((await requestRefresh(application)).id);
    const again = await annotations(application.name);
    assert.equal(again[REFRESH_ANNOTATION], 'normal');
    assert.ok(Date.parse(again[AgentAnnotation.RefreshServed] ?? '') > Date.parse(first ?? ''));
  });

  it("waits for the tenant's new repository credentials to reach Argo CD before it asks", async () => {
    const application = await deployed();
    // A RepositoryCredentials operation of the tenant not yet done (not due from its commit on: the agent hears
    // of it at once and would otherwise finish it first).
    const credentials = await givenNotDueOperation(f.db, {
      engineInstanceId: started.engineInstanceId,
      resourceType: 'RepositoryCredentials',
      resourceId: '00000000-0000-4000-8000-000000000001',
      ownerUserId: started.tenant.id,
    });
    const refresh = await requestRefresh(application);
    await eventually('the refresh operation taken', async () =>
      (await getOperation(f.db, refresh.id))?.state === 'In_Progress' ? true : undefined,
    );
    assert.equal((await annotations(application.name))[REFRESH_ANNOTATION], undefined);
    await f.db
      .updateTable('operation')
      .set({ state: 'Completed', finished_at: new Date() })
      .where('id', '=', credentials.id)
      .execute();
    await completed(refresh.id);
    assert.equal((await annotations(application.name))[REFRESH_ANNOTATION], 'normal');
  });

  it('a restarted agent (no memory) reads the request served from the Application and does not ask again', async () => {
    const application = await deployed();
    await completed((await requestRefresh(application)).id);
    await argoCdRefreshed(application.name);
    const refreshed = await f.getApplication(application.name);
    await started.agent.close();
    started.agent = await f.startAgent(f.config({ OPERATION_SWEEP_INTERVAL: '500ms' }));
    await completed((await announce(application)).id);
    await started.agent.whenIdle();
    const after = await f.getApplication(application.name);
    assert.equal(after?.metadata.annotations?.[REFRESH_ANNOTATION], undefined);
    assert.equal(after?.metadata.resourceVersion, refreshed?.metadata.resourceVersion);
  });
});
