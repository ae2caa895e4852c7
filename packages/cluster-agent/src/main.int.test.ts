/** The cluster-agent process (src/main.ts) as `pnpm dev` and the Deployment run it. */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { admitEngineInstance, agentDatabaseUrl, getEngineInstanceByName } from '@gitops/db';
import { eventually } from '@gitops/shared/testing';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type AgentFixture, createAgentFixture } from './testing/agent-fixture.ts';

const mainPath = fileURLToPath(new URL('./main.ts', import.meta.url));

interface Running {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function run(env: Record<string, string>): Running {
  const child = spawn(process.execPath, [mainPath], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (chunk) => {
    text += String(chunk);
  });
  child.stderr?.on('data', (chunk) => {
    text += String(chunk);
  });
  // 'close', not 'exit': only then has everything the process wrote been read into `text`.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output: () => text, exited };
}

describe('cluster-agent process', () => {
  let f: AgentFixture;
  const env = () => f.env({ HTTP_PORT: '0', HTTP_HOST: '127.0.0.1', LOG_LEVEL: 'info' });

  beforeAll(async () => {
    // The Argo CD namespace is created by the second test: the first one checks the agent refuses to start without it.
    f = await createAgentFixture({ prefix: 'agent-main', createArgoCdNamespace: false });
  });

  afterAll(async () => {
    await f?.cleanup();
  });

  it('refuses to start when the Argo CD namespace does not exist, saying so', async () => {
    const agent = run(env());
    assert.equal(await agent.exited, 1);
    assert.match(
      agent.output(),
      new RegExp(`Argo CD namespace ${f.argoCdNamespace} \\(ARGOCD_NAMESPACE\\) does not exist`),
    );
  });

  it('serves /healthz, /readyz and /metrics once synced, exits 0 on SIGTERM, and logs no secret', async () => {
    await f.createNamespace(f.argoCdNamespace);
    // With its instance's own database role, as every agent runs (docs/engine-instances.md).
    const ownEnv = await f.agentEnv({ HTTP_PORT: '0', HTTP_HOST: '127.0.0.1', LOG_LEVEL: 'info' });
    const agent = run(ownEnv);
    try {
      const address = await eventually('health server address', async () => {
        const match = /"address":"(http:\/\/[^"]+)"/.exec(agent.output());
        return match?.[1];
      });
      assert.equal((await fetch(`${address}/healthz`)).status, 200);
      await eventually('ready', async () => ((await fetch(`${address}/readyz`)).ok ? true : undefined));
      const metrics = await (await fetch(`${address}/metrics`)).text();
      assert.match(metrics, /controller_runtime_reconcile_total\{[^}]*controller="cluster-agent-resources"/);
      assert.match(metrics, /# TYPE drift_corrected_total counter/);
      assert.match(metrics, /watch_restarts_total/);
    } finally {
      agent.child.kill('SIGTERM');
    }
    assert.equal(await agent.exited, 0);
    const output = agent.output();
    assert.doesNotMatch(output, new RegExp(f.encryptionKey.replace(/[+/=]/g, '\\$&')));
    for (const url of [f.database.url, ownEnv.DATABASE_URL!]) {
      const password = decodeURIComponent(new URL(url).password);
      if (password) assert.ok(!output.includes(password), 'a database password was logged');
    }
    assert.doesNotMatch(output, /backend's database role/);
    const sessions = await sql<{ usename: string }>`
      select distinct usename from pg_stat_activity where datname = current_database() and usename <> current_user`.execute(
      f.db,
    );
    assert.deepEqual(sessions.rows, [], 'the agent left sessions open');
  });

  it("refuses to start with another engine instance's database role, naming both, and writes nothing", async () => {
    const other = await admitEngineInstance(f.db, {
      name: `other-${f.suffix}`,
      namespaceName: f.argoCdNamespace,
    });
    const mine = `mine-${f.suffix}`;
    const agent = run({
      ...env(),
      ENGINE_INSTANCE_NAME: mine,
      DATABASE_URL: agentDatabaseUrl(f.database.url, other),
    });
    assert.equal(await agent.exited, 1);
    assert.match(
      agent.output(),
      new RegExp(
        `belongs to engine instance \\W+${other.instance.name}\\W+; this agent is configured as engine instance \\W+${mine}\\W`,
      ),
    );
    assert.equal(await getEngineInstanceByName(f.db, mine), undefined);
    const after = await getEngineInstanceByName(f.db, other.instance.name);
    assert.equal(after?.cluster_identity, '', 'the other instance was registered by this agent');
  });

  it("still starts with the backend's role (an upgrade from 0.1.0), and says it should not", async () => {
    const agent = run(env());
    try {
      await eventually('the warning', async () =>
        /backend's database role/.test(agent.output()) ? true : undefined,
      );
    } finally {
      agent.child.kill('SIGTERM');
    }
    await agent.exited;
  });
});
