/**
 * The agent hears new operations from the database: LISTEN `gitops_operation_created`, with the
 * agent-listening lock held on that connection. With the periodic sweep set to its longest interval and no
 * Operation CR ever created, only the NOTIFY can get an operation processed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  ensureWorkspaceEnvironment,
  getOperation,
  insertApplication,
  insertOperation,
  isAgentListening,
} from '@gitops/db';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Agent } from '../app.ts';
import { type AgentFixture, createAgentFixture } from '../testing/agent-fixture.ts';

describe('operations heard from the database', () => {
  let f: AgentFixture;
  let agent: Agent;
  let engineInstanceId: string;
  let tenantNamespace: string;

  beforeAll(async () => {
    f = await createAgentFixture({ prefix: 'listen' });
    tenantNamespace = `listen-tenant-${f.suffix}`;
    await f.createNamespace(tenantNamespace);
    agent = await f.startAgent(f.config({ OPERATION_SWEEP_INTERVAL: '10m' }));
    engineInstanceId = agent.engineInstance()!.id;
  });
  afterAll(async () => {
    await agent?.close();
    await f?.cleanup();
  });

  it('an operation committed while the agent listens is processed on its NOTIFY, with no Operation CR', async () => {
    await eventually('the agent listening', async () => await isAgentListening(f.db, engineInstanceId));
    const tenant = await f.givenTenant(tenantNamespace);
    const environment = await ensureWorkspaceEnvironment(f.db, {
      id: tenant.id,
      namespaceName: tenantNamespace,
    });
    const name = `gitopsdepl-${randomUUID()}`;
    const operation = await f.db.transaction().execute(async (trx) => {
      const application = await insertApplication(trx, {
        name,
        clusterUserId: tenant.id,
        engineInstanceId,
        managedEnvironmentId: environment.id,
        spec: {
          source: { repoURL: 'https://github.com/org/heard', path: 'env/dev', targetRevision: 'main' },
          destination: { namespace: tenantNamespace },
        },
      });
      return (
        await insertOperation(trx, {
          engineInstanceId,
          resourceType: 'Application',
          resourceId: application.id,
          ownerUserId: tenant.id,
        })
      ).operation;
    });
    const done = await eventually('the operation finished', async () => {
      const row = await getOperation(f.db, operation.id);
      return row?.finished_at ? row : undefined;
    });
    assert.equal(done.state, 'Completed', done.message);
    const app = await f.getApplication(name);
    assert.equal((app?.spec as { source?: { path?: string } } | undefined)?.source?.path, 'env/dev');
    assert.deepEqual(await f.listOperationCrs(), [], 'no Operation CR was needed');
  });

  it('the lock goes with the agent: once it stops, the relay would deliver Operation CRs again', async () => {
    assert.equal(await isAgentListening(f.db, engineInstanceId), true);
    await agent.close();
    await eventually('the lock released', async () => !(await isAgentListening(f.db, engineInstanceId)));
  });
});
