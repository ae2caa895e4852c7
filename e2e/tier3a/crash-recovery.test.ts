/** Tier 3a: crashes (SIGKILL) of either process lose nothing; malformed rows fail one operation, not the agent. */
import assert from 'node:assert/strict';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, it } from 'vitest';
import { type GitOpsDeployment, get, list, mergePatch, paths, remove } from '../fixture/kube.ts';
import { exampleSource, usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

describe('crash recovery (tier 3a)', () => {
  const f = usePlayedArgoCdSystem({ start: [] });
  let tenant: string;

  beforeAll(async () => {
    tenant = await f.given.tenant();
  });

  /** Waits until no operation is Waiting or In_Progress, then checks that none Failed. */
  async function everyOperationCompleted() {
    await eventually('every operation to be terminal', async () => {
      const open = await f.system.db
        .selectFrom('operation')
        .select('id')
        .where('state', 'in', ['Waiting', 'In_Progress'])
        .execute();
      return open.length === 0 ? true : undefined;
    });
    const failed = await f.system.db
      .selectFrom('operation')
      .select(['id', 'message'])
      .where('state', '=', 'Failed')
      .execute();
    assert.deepEqual(failed, []);
  }

  const applicationFor = (gd: GitOpsDeployment) => f.expect.application(gd);
  /** `count` automated deployments `<prefix>-<i>` of the paths `<prefix>/<i>`, created one after the other. */
  async function deployments(prefix: string, count: number): Promise<GitOpsDeployment[]> {
    const created: GitOpsDeployment[] = [];
    for (let i = 0; i < count; i++) {
      created.push(
        await f.system.createGitOpsDeployment(tenant, `${prefix}-${i}`, {
          source: exampleSource(`${prefix}/${i}`),
          type: 'automated',
        }),
      );
    }
    return created;
  }
  /** Waits until operation row `id` is in `state`; returns the row. */
  const operationIn = (id: string, state: 'Completed' | 'Failed') =>
    eventually(`operation ${id} ${state}`, async () => {
      const row = await f.system.db
        .selectFrom('operation')
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirst();
      return row?.state === state ? row : undefined;
    });

  it('a backend killed after committing, before any Operation CR exists, delivers the operation after restart', async () => {
    // The relay is off: the reconcile commits rows + operation, but no Operation CR is ever created. That is
    // exactly the state a SIGKILL between commit and CR creation leaves behind.
    await f.system.start('backend', { GITOPS_RELAY_ENABLED: 'false' });
    const gd = await f.system.createGitOpsDeployment(tenant, 'committed-only', {
      source: exampleSource('committed'),
      type: 'automated',
    });
    const operation = await eventually('the committed operation row', () =>
      f.system.db
        .selectFrom('operation')
        .selectAll()
        .where('owner_uid', '=', gd.metadata.uid ?? '')
        .executeTakeFirst(),
    );
    assert.equal(operation.delivered_at, null);
    assert.deepEqual(await list(f.system.kc, paths.operations(f.system.argoCdNamespace)), []);
    await f.system.kill('backend');

    await f.system.start('backend');
    await f.system.start('cluster-agent');
    const app = await applicationFor(gd);
    assert.equal(app.spec.source.path, 'committed');
    const finished = await operationIn(operation.id, 'Completed');
    assert.equal(finished.message.includes('password'), false);
  });

  it('an agent killed mid-operation finishes every operation after restart', async () => {
    const created = await deployments('burst', 10);
    // Kill the agent as soon as it has started working on the burst.
    await eventually('the agent to pick up work', async () => {
      const rows = await f.system.db
        .selectFrom('operation')
        .select('state')
        .where('owner_name', 'like', 'burst-%')
        .execute();
      return rows.some((r) => r.state !== 'Waiting') ? true : undefined;
    });
    await f.system.kill('cluster-agent');
    await f.system.start('cluster-agent');
    for (const gd of created) await applicationFor(gd);
    await everyOperationCompleted();
  });

  it('two agent replicas: the standby waits; SIGKILL of the active one and the standby finishes every operation', async () => {
    // The first replica is the active one (earlier tests left the agent running); the second waits, ready.
    if (!f.system.isRunning('cluster-agent')) await f.system.start('cluster-agent');
    await f.system.start('cluster-agent-2');
    const metric = async (name: 'cluster-agent' | 'cluster-agent-2') =>
      /^gitops_agent_active(?:\{[^}]*\})? 1$/m.test(await f.system.metrics(name));
    assert.equal(await metric('cluster-agent'), true, 'the first replica is active');
    assert.equal(await metric('cluster-agent-2'), false, 'the second replica waits as the standby');

    const created = await deployments('failover', 6);
    await f.system.kill('cluster-agent');
    await eventually('the standby became the active agent', () => metric('cluster-agent-2'), 30_000);
    for (const gd of created) await applicationFor(gd);
    await everyOperationCompleted();
    // The killed replica comes back (as a kubelet restarts it) and waits as the standby now.
    await f.system.start('cluster-agent');
    assert.equal(await metric('cluster-agent'), false);
    await f.system.kill('cluster-agent-2');
    await eventually('the first replica is active again', () => metric('cluster-agent'), 30_000);
  });

  it('a backend killed while deployments churn converges after restart: deletes and updates made meanwhile are applied', async () => {
    const gds = await deployments('churn', 4);
    for (const gd of gds) await applicationFor(gd);
    await f.system.kill('backend');
    // While the backend is down: delete two, update one.
    await remove(f.system.kc, paths.gitopsDeployment(tenant, 'churn-0'));
    await remove(f.system.kc, paths.gitopsDeployment(tenant, 'churn-1'));
    await mergePatch(f.system.kc, paths.gitopsDeployment(tenant, 'churn-2'), {
      spec: { source: { path: 'churn/2-updated' } },
    });
    await f.system.start('backend');
    for (const gone of gds.slice(0, 2)) await f.expect.noApplication(gone);
    await eventually('the update made while the backend was down', async () => {
      const app = await applicationFor(gds[2] as GitOpsDeployment);
      return app.spec.source.path === 'churn/2-updated' ? true : undefined;
    });
    assert.equal((await applicationFor(gds[3] as GitOpsDeployment)).spec.source.path, 'churn/3');
  });

  it('a malformed application row fails its operation with a message and the agent keeps working', async () => {
    const tenantRow = await f.system.db
      .selectFrom('cluster_user')
      .selectAll()
      .where('namespace_name', '=', tenant)
      .executeTakeFirstOrThrow();
    const engine = await f.system.db
      .selectFrom('engine_instance')
      .selectAll()
      .where('name', '=', f.system.engineInstanceName)
      .executeTakeFirstOrThrow();
    const bad = await f.system.db
      .insertInto('application')
      .values({
        name: 'gitopsdepl-malformed',
        cluster_user_id: tenantRow.id,
        engine_instance_id: engine.id,
        managed_environment_id: null,
        spec: JSON.stringify({ source: 42, destination: 'nowhere' }),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const operation = await f.system.db
      .insertInto('operation')
      .values({ engine_instance_id: engine.id, resource_type: 'Application', resource_id: bad.id })
      .returning('id')
      .executeTakeFirstOrThrow();
    // (the malformed row fails its operation)
    const failed = await operationIn(operation.id, 'Failed');
    assert.notEqual(failed.message, '');
    assert.equal(
      await get(f.system.kc, paths.application(f.system.argoCdNamespace, 'gitopsdepl-malformed')),
      undefined,
    );

    // Still working: a new deployment gets its Application, and neither process crashed.
    const next = await f.system.createGitOpsDeployment(tenant, 'after-malformed', {
      source: exampleSource('after'),
      type: 'automated',
    });
    await applicationFor(next);
    assert.deepEqual(f.system.crashes, []);
  });
});
