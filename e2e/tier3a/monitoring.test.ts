/**
 * Tier 3a: the monitoring component (manifests/components/monitoring) against a real Prometheus (Debian's
 * `prometheus`, installed by scripts/setup-machine.sh) scraping the backend and the cluster-agent every second.
 * Every query of every dashboard panel returns series; the alerts fire on their fault and resolve after it:
 * the agent stopped (operations pending, an instance without a listening agent), the backend's database
 * connection refused (database unreachable).
 *
 * The rules Prometheus loads are the PrometheusRule's `spec` with two changes for a test's time scale: every
 * `for:` is 1 s, and the thresholds in TEST_THRESHOLDS are lowered (each must be found in the rule as written,
 * so a changed rule fails here rather than silently testing something else).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  freePort,
  type ManagedProcess,
  repoRoot,
  startProcess,
  startTcpProxy,
  type TcpProxy,
  waitFor,
} from '@gitops/local-env';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { get, paths, remove } from '../fixture/kube.ts';
import { type PlayedSystem, startPlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

const componentDir = join(repoRoot, 'manifests', 'components', 'monitoring');

/** Alert → [the threshold as the rule writes it, the one this test uses]. */
const TEST_THRESHOLDS: Record<string, [string, string]> = {
  GitOpsOperationsPending: ['> 600', '> 3'],
};

interface Rule {
  alert?: string;
  expr: string;
  for?: string;
}

async function testRules(): Promise<{ groups: { name: string; rules: Rule[] }[] }> {
  const rule = parse(await readFile(join(componentDir, 'prometheusrule.yaml'), 'utf8')) as {
    spec: { groups: { name: string; rules: Rule[] }[] };
  };
  for (const group of rule.spec.groups) {
    for (const r of group.rules) {
      if (r.for !== undefined) r.for = '1s';
      const threshold = r.alert ? TEST_THRESHOLDS[r.alert] : undefined;
      if (threshold) {
        assert.ok(r.expr.includes(threshold[0]), `${r.alert}: "${threshold[0]}" not in its expr`);
        r.expr = r.expr.replace(threshold[0], threshold[1]);
      }
    }
  }
  return rule.spec;
}

/** Every query of the dashboard, with Grafana's `$__rate_interval` given a value. */
async function dashboardQueries(): Promise<{ panel: string; expr: string }[]> {
  const dashboard = JSON.parse(await readFile(join(componentDir, 'dashboard.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[];
  };
  return dashboard.panels.flatMap((p) =>
    p.targets.map((t) => ({ panel: p.title, expr: t.expr.replaceAll('$__rate_interval', '1m') })),
  );
}

interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}

describe('monitoring: dashboard and alerts against a real Prometheus (tier 3a)', () => {
  let f: PlayedSystem;
  let proxy: TcpProxy;
  let dbTarget: { host: string; port: number };
  let prometheus: ManagedProcess | undefined;
  let promUrl: string;
  let work: string;
  let tenant: string;
  const ports = { backend: 0, agent: 0 };
  const promLogs: string[] = [];

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${promUrl}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error}`);
    return body.data;
  };
  const query = (expr: string) =>
    api<{ result: { metric: Record<string, string> }[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
  const alerts = async () => (await api<{ alerts: Alert[] }>('/api/v1/alerts')).alerts;
  const alertState = async (name: string, labels: Record<string, string> = {}) =>
    (await alerts()).find(
      (a) => a.labels.alertname === name && Object.entries(labels).every(([k, v]) => a.labels[k] === v),
    )?.state;

  beforeAll(async () => {
    try {
      execFileSync('prometheus', ['--version'], { stdio: 'ignore' });
    } catch {
      throw new Error("prometheus is not installed: run 'bash scripts/setup-machine.sh' as root");
    }
    f = await startPlayedArgoCdSystem({ start: [] });
    const dbUrl = new URL(f.system.database.url);
    dbTarget = { host: dbUrl.hostname, port: Number(dbUrl.port || 5432) };
    proxy = await startTcpProxy({ target: dbTarget });
    dbUrl.host = `127.0.0.1:${proxy.port}`;
    ports.backend = await freePort();
    ports.agent = await freePort();
    await f.system.start('backend', { HTTP_PORT: String(ports.backend), DATABASE_URL: dbUrl.toString() });
    await f.system.start('cluster-agent', { HTTP_PORT: String(ports.agent) });
    tenant = await f.given.tenant();

    work = await mkdtemp(join(tmpdir(), 'tier3a-prometheus-'));
    await writeFile(join(work, 'rules.yaml'), stringify(await testRules()));
    await writeFile(
      join(work, 'prometheus.yaml'),
      stringify({
        global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
        rule_files: [join(work, 'rules.yaml')],
        scrape_configs: [
          { job_name: 'gitops-backend', static_configs: [{ targets: [`127.0.0.1:${ports.backend}`] }] },
          { job_name: 'gitops-cluster-agent', static_configs: [{ targets: [`127.0.0.1:${ports.agent}`] }] },
        ],
      }),
    );
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    prometheus = startProcess(
      'prometheus',
      'prometheus',
      [
        `--config.file=${join(work, 'prometheus.yaml')}`,
        `--storage.tsdb.path=${join(work, 'data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
      ],
      { onLine: (line) => promLogs.push(line) },
    );
    await waitFor('prometheus /-/ready', async () => (await fetch(`${promUrl}/-/ready`)).ok, {
      process: prometheus,
      timeoutMs: 60_000,
    }).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${promLogs.slice(-20).join('\n')}`);
    });
  }, 300_000);

  afterAll(async () => {
    await prometheus?.stop();
    await f?.system.kill('backend');
    await proxy?.stop();
    await f?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('loads every alert rule of the component', async () => {
    const groups = (await api<{ groups: { rules: { name: string; health: string }[] }[] }>('/api/v1/rules'))
      .groups;
    const rules = groups.flatMap((g) => g.rules);
    assert.equal(rules.length, (await testRules()).groups.flatMap((g) => g.rules).length);
    for (const rule of rules) assert.notEqual(rule.health, 'err', rule.name);
  });

  it('every query of every dashboard panel returns series', async () => {
    // Traffic for the rate and latency panels: a deployment (an operation the agent finishes) and a status
    // change of its Application (the status queues).
    const gd = await f.when.deployed(tenant, 'observed', {
      repoURL: 'https://github.com/example/repo',
      path: 'a',
    });
    const appName = `gitopsdepl-${gd.metadata.uid}`;
    await eventually('the Application', () =>
      get(f.system.kc, paths.application(f.system.argoCdNamespace, appName)),
    );
    await f.argoCd.reportStatus(appName, {
      sync: { status: 'Synced' },
      health: { status: 'Healthy' },
    });
    for (const { panel, expr } of await dashboardQueries()) {
      await eventually(
        `series for "${panel}": ${expr}`,
        async () => (await query(expr)).result.length > 0,
        120_000,
      );
    }
  });

  it('the agent stopped: operations pending and no listening agent fire; started again: both resolve', async () => {
    const instance = { engine_instance: f.system.engineInstanceName };
    assert.equal(await alertState('GitOpsEngineInstanceWithoutAgent', instance), undefined);
    await f.system.kill('cluster-agent');
    // A change while no agent listens: its operation stays Waiting.
    await f.system.createGitOpsDeployment(tenant, 'while-away', {
      source: { repoURL: 'https://github.com/example/repo', path: 'b' },
      destination: {},
      type: 'manual',
    });
    await eventually(
      'GitOpsEngineInstanceWithoutAgent and GitOpsOperationsPending firing',
      async () =>
        (await alertState('GitOpsEngineInstanceWithoutAgent', instance)) === 'firing' &&
        (await alertState('GitOpsOperationsPending', { ...instance, state: 'Waiting' })) === 'firing',
      120_000,
    );
    await f.system.start('cluster-agent', { HTTP_PORT: String(ports.agent) });
    await eventually(
      'both alerts resolved',
      async () =>
        (await alertState('GitOpsEngineInstanceWithoutAgent', instance)) === undefined &&
        (await alertState('GitOpsOperationsPending', instance)) === undefined,
      120_000,
    );
  });

  it("the backend's database refused: database unreachable fires; reachable again: it resolves", async () => {
    assert.equal(await alertState('GitOpsDatabaseUnreachable'), undefined);
    // Close the proxy (new connections refused) and cut what it forwards (the pool's connections die).
    const port = proxy.port;
    proxy.cut();
    await proxy.stop();
    await eventually(
      'GitOpsDatabaseUnreachable firing',
      async () => (await alertState('GitOpsDatabaseUnreachable', { component: 'backend' })) === 'firing',
      120_000,
    );
    proxy = await startTcpProxy({ target: dbTarget, port });
    await eventually(
      'GitOpsDatabaseUnreachable resolved',
      async () => (await alertState('GitOpsDatabaseUnreachable')) === undefined,
      120_000,
    );
    await remove(f.system.kc, paths.gitopsDeployment(tenant, 'while-away')).catch(() => {});
  });
});
