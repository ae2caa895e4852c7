/**
 * Tier 3a: the service behind a real PgBouncer in transaction mode (docs/database-connections.md). The backend
 * and two agent replicas of one engine instance run with `DATABASE_URL` through PgBouncer (prepared statements
 * off) and `DATABASE_SESSION_ADDRESS` pointing past it, at PostgreSQL. GitOpsDeployments converge; PostgreSQL
 * sees every pooled session as one of PgBouncer's, never more than its `max_db_connections`, none holding an
 * advisory lock; LISTEN and the locks are direct sessions, the agent's with its instance's own role; the standby
 * takes over on its direct lock session.
 *
 * It starts its own PostgreSQL (checking passwords with scram-sha-256, which PgBouncer's `auth_query` login of
 * the instances' roles needs) and its own PgBouncer: Debian's `pgbouncer` (scripts/setup-machine.sh). Without
 * the binary it fails, naming the package.
 */
import assert from 'node:assert/strict';
import { AGENT_ACTIVE_LOCK_CLASS, AGENT_LISTENING_LOCK_CLASS } from '@gitops/db';
import { prepareTemplateDatabase } from '@gitops/db/testing';
import {
  findPgBouncerBinary,
  type PgBouncer,
  type PostgresServer,
  startPgBouncer,
  startPostgres,
} from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { GitOpsDeployment } from '../fixture/kube.ts';
import { type PlayedSystem, startPlayedArgoCdSystem, syncedAndHealthy } from '../fixture/played-argo-cd.ts';

/** PgBouncer's sessions with PostgreSQL for the whole database, all roles together. */
const MAX_DB_CONNECTIONS = 4;

describe('behind PgBouncer in transaction mode (tier 3a)', () => {
  let postgres: PostgresServer | undefined;
  let bouncer: PgBouncer | undefined;
  let f: PlayedSystem;
  let tenant: string;
  const bouncerLog: string[] = [];
  // The test database comes from this file's own PostgreSQL, not the run's (createTestDatabase reads these).
  const runDatabase = {
    url: process.env.GITOPS_TEST_DATABASE_URL,
    template: process.env.GITOPS_TEST_TEMPLATE_DATABASE,
  };

  beforeAll(async () => {
    await findPgBouncerBinary(); // fails at once, naming the package, when it is not installed
    postgres = await startPostgres({ forceEmbedded: true, authMethod: 'scram-sha-256' });
    const template = 'gitops_template_pgbouncer';
    await prepareTemplateDatabase(postgres.url, template);
    bouncer = await startPgBouncer({
      postgresUrl: postgres.url,
      defaultPoolSize: 2,
      maxDbConnections: MAX_DB_CONNECTIONS,
      log: (line) => bouncerLog.push(line),
    });
    await bouncer.prepareDatabase(template);
    process.env.GITOPS_TEST_DATABASE_URL = postgres.url;
    process.env.GITOPS_TEST_TEMPLATE_DATABASE = template;
    f = await startPlayedArgoCdSystem({ start: [] });
    const direct = new URL(postgres.url);
    const env = {
      // The agents' DATABASE_URL is this one with their instance's role (system.ts, as `instances admit` does).
      DATABASE_URL: bouncer.urlOf(f.system.database.url),
      DATABASE_SESSION_ADDRESS: `${direct.hostname}:${direct.port}`,
      GITOPS_DATABASE_PREPARED_STATEMENTS: 'false',
    };
    await f.system.start('backend', env);
    await f.system.start('cluster-agent', env);
    await f.system.start('cluster-agent-2', env); // the standby: it waits on the active lock
    tenant = await f.given.tenant();
  });

  afterAll(async () => {
    await f?.stop();
    await bouncer?.stop();
    await postgres?.stop();
    process.env.GITOPS_TEST_DATABASE_URL = runDatabase.url;
    process.env.GITOPS_TEST_TEMPLATE_DATABASE = runDatabase.template;
  });

  /** Deploys, plays Argo CD's sync, and waits for the GitOpsDeployment to be Synced and Healthy. */
  async function converges(gds: GitOpsDeployment[]): Promise<void> {
    for (const gd of gds) {
      const app = await f.expect.application(gd);
      await f.argoCd.reportStatus(app.metadata.name, {
        sync: { status: 'Synced', revision: 'abc123' },
        health: { status: 'Healthy' },
      });
    }
    for (const gd of gds) await f.expect.deployment(gd).is('Synced and Healthy', syncedAndHealthy);
  }

  const agentRole = async () => {
    const row = await f.system.db
      .selectFrom('engine_instance')
      .select('db_role')
      .where('name', '=', f.system.engineInstanceName)
      .executeTakeFirstOrThrow();
    assert.ok(row.db_role, 'the instance has its own role');
    return row.db_role;
  };

  it('GitOpsDeployments converge with every pool through PgBouncer', async () => {
    const gds: GitOpsDeployment[] = [];
    for (let i = 0; i < 4; i++) {
      gds.push(
        await f.when.deployed(tenant, `pooled-${i}`, {
          repoURL: 'https://github.com/example/repo',
          path: `pooled/${i}`,
        }),
      );
    }
    await converges(gds);
  });

  it("PostgreSQL sees the pools as PgBouncer's sessions, at most max_db_connections, and LISTEN and the locks as direct sessions", async () => {
    const role = await agentRole();
    const database = f.system.database.name;
    // Asserted until it holds (a pool's session may be opening or closing): the last failure is reported.
    await eventually(
      'the sessions of the database to be as expected',
      async () => {
        const servers = (await bouncer?.servers())?.filter((s) => s.database === database) ?? [];
        const pooled = new Set(servers.map((s) => s.pid));
        const { rows } = await sql<{ pid: number; role: string; application: string }>`
          select pid, usename::text as role, application_name as application from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid()`.execute(f.system.db);
        // PgBouncer's sessions carry the pools, the agent's with its own role, never more than the cap.
        assert.ok(servers.length >= 1 && servers.length <= MAX_DB_CONNECTIONS, JSON.stringify(servers));
        for (const pid of pooled)
          assert.ok(
            rows.some((r) => r.pid === pid),
            `PgBouncer's session ${pid}`,
          );
        const users = [...new Set(servers.map((s) => s.user))];
        assert.ok(users.includes('postgres'), `the backend's pool among ${users.join(', ')}`);
        assert.ok(users.includes(role), `the agent's pool, with its own role, among ${users.join(', ')}`);
        // Every other session is one that must be direct (and the test's own pool, system.db).
        assert.deepEqual(
          rows
            .filter((r) => !pooled.has(r.pid) && r.application !== 'gitops-test')
            .map((r) => `${r.application} ${r.role}`)
            .sort(),
          [
            'gitops-backend-listen postgres',
            `gitops-cluster-agent-active ${role}`, // the active replica's lock
            `gitops-cluster-agent-active ${role}`, // the standby, waiting on it
            `gitops-cluster-agent-listen ${role}`,
          ],
        );
        // Session state only on those: a session-level advisory lock (held outside a transaction) is the agent's
        // active lock on its lock session and its listening lock on its LISTEN session, none on a pooled one.
        const { rows: locks } = await sql<{ pid: number; classid: number; application: string }>`
          select l.pid, l.classid::int as classid, a.application_name as application
          from pg_locks l join pg_stat_activity a on a.pid = l.pid
          where l.locktype = 'advisory' and l.granted and a.xact_start is null
            and a.datname = current_database()`.execute(f.system.db);
        assert.deepEqual(
          locks.filter((l) => pooled.has(l.pid)),
          [],
          'no pooled session holds an advisory lock',
        );
        assert.deepEqual(
          locks.map((l) => `${l.classid} ${l.application}`).sort(),
          [
            `${AGENT_ACTIVE_LOCK_CLASS} gitops-cluster-agent-active`,
            `${AGENT_LISTENING_LOCK_CLASS} gitops-cluster-agent-listen`,
          ].sort(),
        );
        return true;
      },
      30_000,
    );
  });

  it('the standby takes over on its direct lock session and serves through PgBouncer', async () => {
    await f.system.kill('cluster-agent');
    const gd = await f.when.deployed(tenant, 'after-takeover', {
      repoURL: 'https://github.com/example/repo',
      path: 'after-takeover',
    });
    await converges([gd]);
    const metrics = await f.system.metrics('cluster-agent-2');
    assert.match(metrics, /^gitops_agent_active(\{[^}]*\})? 1$/m);
    assert.deepEqual(f.system.crashes, []);
    assert.equal(
      bouncerLog.some((line) => /prepared statement|unsupported startup parameter/i.test(line)),
      false,
      bouncerLog.join('\n'),
    );
  });
});
