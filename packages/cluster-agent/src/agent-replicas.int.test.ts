/**
 * Two agent replicas of one engine instance: one is active, the other waits as the standby (ready, doing
 * nothing) and takes over once the active one's lock session is gone; the one that lost it stops.
 */
import assert from 'node:assert/strict';
import { AGENT_ACTIVE_LOCK_CLASS, type ClusterUserRow } from '@gitops/db';
import { createMetricsRegistry, createSilentLogger } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type Agent, buildAgent } from './app.ts';
import { type AgentFixture, createAgentFixture } from './testing/agent-fixture.ts';

describe('cluster-agent replicas', () => {
  let f: AgentFixture;
  let tenant: ClusterUserRow;
  let tenantNamespace: string;
  const agents: Agent[] = [];

  beforeAll(async () => {
    f = await createAgentFixture({ prefix: 'replicas' });
    tenantNamespace = `replicas-tenant-${f.suffix}`;
    await f.createNamespace(tenantNamespace);
  });
  afterAll(async () => {
    for (const agent of agents) await agent.close().catch(() => undefined);
    await f?.cleanup();
  });

  /** An agent of the fixture's instance, started without waiting for it to become active. */
  async function replica(onActiveLost?: () => void) {
    // With the instance's own database role, as every agent runs.
    const config = await f.withOwnRole(f.config({ OPERATION_SWEEP_INTERVAL: '500ms' }));
    const agent = buildAgent(config, {
      logger: createSilentLogger(),
      registry: createMetricsRegistry({ defaultMetrics: false }),
      ...(onActiveLost ? { onActiveLost } : {}),
    });
    agents.push(agent);
    const started = agent.start();
    started.catch(() => undefined);
    return { agent, started };
  }

  /** What the backend writes for a new GitOpsDeployment; resolves with the Application's name. */
  async function deploy(): Promise<string> {
    const engineInstanceId = (await f.db.selectFrom('engine_instance').select('id').executeTakeFirstOrThrow())
      .id;
    return (await f.givenDeployment(tenant, tenantNamespace, engineInstanceId)).application.name;
  }

  /** The pid of the session holding the active lock (exactly one). */
  async function holder(): Promise<number> {
    const rows = await sql<{ pid: number }>`
      select pid from pg_locks where locktype = 'advisory' and granted and classid = ${AGENT_ACTIVE_LOCK_CLASS}
        and database = (select oid from pg_database where datname = current_database())`.execute(f.db);
    assert.equal(rows.rows.length, 1, 'exactly one session holds the active lock');
    return rows.rows[0]!.pid;
  }

  it('a lost lock session is taken again; with a standby waiting, the standby takes over at once and the old active one stops', async () => {
    let stoppedFirst = 0;
    const first = await replica(() => stoppedFirst++);
    await first.started;
    assert.equal(first.agent.isActive(), true);
    tenant = await f.givenTenant(tenantNamespace);
    const one = await deploy();
    await eventually('the active replica applies the Application', () => f.getApplication(one));

    // Alone, it loses its session (a PostgreSQL restart, a cut connection): it takes the lock again.
    const before = await holder();
    await sql`select pg_terminate_backend(${before})`.execute(f.db);
    await eventually('the replica holds the lock again on a new session', async () =>
      first.agent.isActive() && (await holder()) !== before ? true : undefined,
    );
    const two = await deploy();
    await eventually('the Application of the next deployment', () => f.getApplication(two));

    // A second replica waits, ready, as the standby (blocked on the lock inside PostgreSQL).
    const second = await replica();
    await eventually('the second replica waits as the standby, ready', () =>
      second.agent.ready() && !second.agent.isActive() ? true : undefined,
    );
    const three = await deploy();
    await eventually('the active replica still does the work', () => f.getApplication(three));

    // The active replica's session goes (as when its process is killed): the standby has the lock at once,
    // and the old one, back on a new session, finds it taken and stops.
    await sql`select pg_terminate_backend(${await holder()})`.execute(f.db);
    await eventually('the standby became active', () => (second.agent.isActive() ? true : undefined), 30_000);
    await second.started;
    await eventually('the replica that found the lock taken stopped', () =>
      !first.agent.ready() && !first.agent.isActive() && stoppedFirst === 1 ? true : undefined,
    );
    const four = await deploy();
    await eventually('the new active replica applies the next Application', () => f.getApplication(four));
    await eventually('every operation completed, none lost in the handover', async () => {
      const operations = await f.db.selectFrom('operation').select('state').execute();
      return operations.every((o) => o.state === 'Completed') ? true : undefined;
    });
  });
});
