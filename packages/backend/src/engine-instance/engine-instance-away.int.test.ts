/**
 * An engine instance whose agents are all away: a GitOpsDeployment whose change has waited longer than
 * GITOPS_ENGINE_INSTANCE_AWAY_AFTER says so in ErrorOccurred, naming the instance; nothing is lost, and once an
 * agent takes the change the condition resolves. (The backend fixture runs no agent: the test plays it.)
 */
import assert from 'node:assert/strict';
import { PlacementMessage } from '@gitops/api';
import { completeOperation, startOperation } from '@gitops/db';
import { givenListeningAgentSession } from '@gitops/db/testing';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, test } from 'vitest';
import type { Backend } from '../app.ts';
import { automatedTestDataSpec, useBackendFixture } from '../testing/backend-fixture.ts';

const spec = automatedTestDataSpec;

describe('an engine instance without agents', () => {
  const f = useBackendFixture();
  let backend: Backend;

  beforeAll(async () => {
    backend = await f.startBackend({ GITOPS_ENGINE_INSTANCE_AWAY_AFTER: '2s' });
  });

  const errorOccurred = (namespace: string, name: string) =>
    f
      .getDeployment(namespace, name)
      .then((live) => live && (live.status?.conditions ?? []).find((c) => c.type === 'ErrorOccurred'));

  test('a change waiting longer than GITOPS_ENGINE_INSTANCE_AWAY_AFTER says the instance is away; an agent taking it resolves that', async () => {
    const tenant = await f.createNamespace('away');
    const cr = await f.createDeployment(tenant.name, 'waiting', spec);
    const application = await f.applicationOf(cr);
    const condition = await eventually('ErrorOccurred says the instance is away', async () => {
      const c = await errorOccurred(tenant.name, 'waiting');
      return c?.status === 'True' ? c : undefined;
    });
    assert.equal(condition.message, PlacementMessage.instanceAway(backend.engineInstance().name, 0));
    const operation = await f.db
      .selectFrom('operation')
      .selectAll()
      .where('resource_id', '=', application.id)
      .executeTakeFirstOrThrow();
    assert.equal(operation.state, 'Waiting', 'nothing is lost: the change waits');

    // An agent is back (it listens) and takes the change.
    const agent = await givenListeningAgentSession(f.database.url, backend.engineInstance().id);
    try {
      assert.equal((await startOperation(f.db, operation.id)).status, 'started');
      assert.ok(await completeOperation(f.db, operation.id, ''));
      await eventually('ErrorOccurred resolved', async () =>
        (await errorOccurred(tenant.name, 'waiting'))?.status === 'False' ? true : undefined,
      );
    } finally {
      await agent.end();
    }
  });

  test('while an agent listens, a change that waits long is not reported (the agent is busy, not away)', async () => {
    const agent = await givenListeningAgentSession(f.database.url, backend.engineInstance().id);
    try {
      const tenant = await f.createNamespace('busy');
      await f.createDeployment(tenant.name, 'busy', spec);
      // Several of the backend's looks (every second here) pass while the change waits with an agent listening.
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      assert.equal((await errorOccurred(tenant.name, 'busy'))?.status ?? 'absent', 'absent');
    } finally {
      await agent.end();
    }
  });
});
