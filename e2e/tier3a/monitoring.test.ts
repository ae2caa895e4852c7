/**
 * Tier 3a: the monitoring component (manifests/components/monitoring) against a real Prometheus (Debian's
 * `prometheus`, installed by scripts/setup-machine.sh) scraping the backend and the cluster-agent every second.
 * Every query of every dashboard panel returns series; every alert fires on its fault, caused for real, and
 * resolves after it: the agent stopped (operations pending, an instance without a listening agent), the
 * backend's database connection refused (database unreachable, reconcile errors), an admission policy of the
 * cluster refusing the agent's Applications (operations failing), a transaction holding a lock on
 * application_state (status lag), a provisioned namespace's ServiceAccount deleted so its short token cannot be
 * renewed (token expiring).
 *
 * The rules Prometheus loads are the PrometheusRule's `spec` with two changes for a test's time scale: every
 * `for:` is 1 s, and the thresholds and range windows in TEST_CHANGES are lowered (each must be found in the rule
 * as written, so a changed rule fails here rather than silently testing something else).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  confirmDeletionHolds,
  deleteApplication,
  getApplicationByName,
  getEngineInstanceByName,
} from '@gitops/db';
import {
  freePort,
  type ManagedProcess,
  repoRoot,
  startProcess,
  startTcpProxy,
  type TcpProxy,
  waitFor,
} from '@gitops/local-env';
import { HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { create, get, paths, remove } from '../fixture/kube.ts';
import {
  exampleSource,
  type PlayedSystem,
  startPlayedArgoCdSystem,
  syncedAndHealthy,
} from '../fixture/played-argo-cd.ts';
import { randomSuffix } from '../fixture/system.ts';

const componentDir = join(repoRoot, 'manifests', 'components', 'monitoring');
const SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';
const ADMISSION = '/apis/admissionregistration.k8s.io/v1';
const APPSTUDIO = '/apis/appstudio.redhat.com/v1alpha1';

/** Alert → [text of its expr as the rule writes it, what this test uses instead] (every occurrence). */
const TEST_CHANGES: Record<string, [string, string][]> = {
  GitOpsOperationsPending: [['> 600', '> 3']],
  GitOpsOperationsFailing: [['[15m]', '[20s]']],
  GitOpsReconcileErrors: [['[5m]', '[20s]']],
  GitOpsStatusLag: [
    ['[5m]', '[20s]'],
    ['> 30', '> 3'],
  ],
  // The backend below asks for 10 min tokens and renews them within 580 s of expiry: 560 s left means the
  // renewal has been failing for 20 s (as 14 days do for 1 year tokens renewed within 30 days of expiry).
  GitOpsNamespaceProvisionerTokenExpiring: [['< 14 * 86400', '< 560']],
};
/** The backend's token times that go with GitOpsNamespaceProvisionerTokenExpiring's test threshold. */
const TOKEN_ENV = {
  GITOPS_NAMESPACE_PROVISIONER_TOKEN_LIFETIME: '10m',
  GITOPS_NAMESPACE_PROVISIONER_TOKEN_RENEW_BEFORE: '580s',
  GITOPS_NAMESPACE_PROVISIONER_TOKEN_CHECK_INTERVAL: '1s',
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
      for (const [written, used] of (r.alert && TEST_CHANGES[r.alert]) || []) {
        assert.ok(r.expr.includes(written), `${r.alert}: "${written}" not in its expr`);
        r.expr = r.expr.replaceAll(written, used);
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
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
}

/**
 * Target labels the Prometheus Operator gives every series it scrapes through the base's ServiceMonitor
 * (manifests/components/monitoring/servicemonitor.yaml): a metric label of the same name is renamed `exported_<name>`.
 */
const operatorLabels = (service: string) => ({ namespace: 'gitops-service', service, endpoint: 'http' });

describe('monitoring: dashboard and alerts against a real Prometheus (tier 3a)', () => {
  let f: PlayedSystem;
  let proxy: TcpProxy;
  let dbTarget: { host: string; port: number };
  let prometheus: ManagedProcess | undefined;
  let promUrl: string;
  let work: string;
  let tenant: string;
  const ports = { backend: 0, agent: 0 };
  /** The agent gives an operation up after 2 attempts (10 by default, minutes apart). */
  const agentEnv = () => ({ HTTP_PORT: String(ports.agent), OPERATION_MAX_ATTEMPTS: '2' });
  /** Cluster-scoped objects a test made (deleted in afterAll too, should it fail before it does). */
  const clusterObjects: string[] = [];
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
  const alertOf = async (name: string, labels: Record<string, string> = {}) =>
    (await alerts()).find(
      (a) => a.labels.alertname === name && Object.entries(labels).every(([k, v]) => a.labels[k] === v),
    );
  const alertState = async (name: string, labels: Record<string, string> = {}) =>
    (await alertOf(name, labels))?.state;

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
    await f.system.start('backend', {
      HTTP_PORT: String(ports.backend),
      DATABASE_URL: dbUrl.toString(),
      ...TOKEN_ENV,
    });
    await f.system.start('cluster-agent', agentEnv());
    tenant = await f.given.tenant();

    work = await mkdtemp(join(tmpdir(), 'tier3a-prometheus-'));
    await writeFile(join(work, 'rules.yaml'), stringify(await testRules()));
    await writeFile(
      join(work, 'prometheus.yaml'),
      stringify({
        global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
        rule_files: [join(work, 'rules.yaml')],
        scrape_configs: [
          {
            job_name: 'gitops-backend',
            static_configs: [
              { targets: [`127.0.0.1:${ports.backend}`], labels: operatorLabels('gitops-backend-metrics') },
            ],
          },
          {
            job_name: 'gitops-cluster-agent',
            static_configs: [
              {
                targets: [`127.0.0.1:${ports.agent}`],
                labels: operatorLabels('gitops-cluster-agent-metrics'),
              },
            ],
          },
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
    for (const path of clusterObjects) await remove(f.system.kc, path).catch(() => {});
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
    const gd = await f.when.deployed(tenant, 'observed', exampleSource('a'));
    const appName = (await f.expect.application(gd)).metadata.name;
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
      source: exampleSource('b'),
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
    await f.system.start('cluster-agent', agentEnv());
    await eventually(
      'both alerts resolved',
      async () =>
        (await alertState('GitOpsEngineInstanceWithoutAgent', instance)) === undefined &&
        (await alertState('GitOpsOperationsPending', instance)) === undefined,
      120_000,
    );
  });

  it("the backend's database refused: database unreachable and reconcile errors fire; reachable again: both resolve", async () => {
    const backend = { component: 'backend' };
    assert.equal(await alertState('GitOpsDatabaseUnreachable'), undefined);
    assert.equal(await alertState('GitOpsReconcileErrors', backend), undefined);
    // Close the proxy (new connections refused) and cut what it forwards (the pool's connections die).
    const port = proxy.port;
    proxy.cut();
    await proxy.stop();
    // A change meanwhile: the backend's reconciles of it fail (and are retried) while the database refuses.
    const gd = await f.when.deployed(tenant, 'during-outage', exampleSource('c'));
    await eventually(
      'GitOpsDatabaseUnreachable and GitOpsReconcileErrors firing',
      async () =>
        (await alertState('GitOpsDatabaseUnreachable', backend)) === 'firing' &&
        (await alertState('GitOpsReconcileErrors', backend)) === 'firing',
      120_000,
    );
    proxy = await startTcpProxy({ target: dbTarget, port });
    // The change goes through once the database answers; then no reconcile fails any more.
    await eventually('the Application of the change', () =>
      get(f.system.kc, paths.application(f.system.argoCdNamespace, `gitopsdepl-${gd.metadata.uid}`)),
    );
    await eventually(
      'GitOpsDatabaseUnreachable and GitOpsReconcileErrors resolved',
      async () =>
        (await alertState('GitOpsDatabaseUnreachable')) === undefined &&
        (await alertState('GitOpsReconcileErrors', backend)) === undefined,
      120_000,
    );
    await remove(f.system.kc, paths.gitopsDeployment(tenant, 'while-away')).catch(() => {});
  });

  it("an admission policy refuses the agent's Applications: operations failing fires; the policy gone: it resolves", async () => {
    const applications = { resource_type: 'Application' };
    assert.equal(await alertState('GitOpsOperationsFailing', applications), undefined);
    // A change freeze of the cluster: a ValidatingAdmissionPolicy that denies new Applications in the
    // instance's Argo CD namespace.
    const policy = `e2e-freeze-${randomSuffix()}`;
    const message = `a change freeze denies new Applications (${policy})`;
    await create(f.system.kc, `${ADMISSION}/validatingadmissionpolicies`, {
      metadata: { name: policy },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': f.system.argoCdNamespace } },
          resourceRules: [
            {
              apiGroups: ['argoproj.io'],
              apiVersions: ['*'],
              operations: ['CREATE'],
              resources: ['applications'],
            },
          ],
        },
        validations: [{ expression: 'false', message }],
      },
    });
    clusterObjects.push(`${ADMISSION}/validatingadmissionpolicies/${policy}`);
    await create(f.system.kc, `${ADMISSION}/validatingadmissionpolicybindings`, {
      metadata: { name: policy },
      spec: { policyName: policy, validationActions: ['Deny'] },
    });
    clusterObjects.push(`${ADMISSION}/validatingadmissionpolicybindings/${policy}`);
    // In force once the API server has loaded it: an Application (dry run) is refused.
    const refused = async () => {
      try {
        await kubeRequest(f.system.kc, {
          method: HttpMethod.POST,
          path: paths.applications(f.system.argoCdNamespace),
          query: { dryRun: 'All' },
          body: {
            apiVersion: 'argoproj.io/v1alpha1',
            kind: 'Application',
            metadata: { name: 'dry-run' },
            spec: { project: 'default', destination: {}, source: { repoURL: 'https://example.com/r' } },
          },
        });
        return false;
      } catch (error) {
        if (String(error).includes(message)) return true;
        throw error;
      }
    };
    await eventually('the policy in force', refused);

    const gd = await f.when.deployed(tenant, 'frozen', exampleSource('d'));
    try {
      await eventually(
        'GitOpsOperationsFailing firing',
        async () => (await alertState('GitOpsOperationsFailing', applications)) === 'firing',
        120_000,
      );
      assert.ok(
        f.logs.some((line) => line.startsWith('[cluster-agent]') && line.includes('operation failed')),
        'the agent logged the failed operation',
      );
    } finally {
      // The freeze lifted (also when the alert did not fire: the next tests need Applications).
      for (const path of clusterObjects.splice(0).reverse()) await remove(f.system.kc, path);
    }
    await eventually('the policy lifted', async () => !(await refused()));
    // The deployment changed again: its Application is made, and nothing fails any more.
    await f.when.edited(gd, { source: exampleSource('e') });
    await eventually('the Application of the deployment', () =>
      get(f.system.kc, paths.application(f.system.argoCdNamespace, `gitopsdepl-${gd.metadata.uid}`)),
    );
    await eventually(
      'GitOpsOperationsFailing resolved',
      async () => (await alertState('GitOpsOperationsFailing')) === undefined,
      120_000,
    );
  });

  it('a transaction holds a lock on application_state: status lag fires; committed: it resolves', async () => {
    const agentQueue = { component: 'cluster-agent', name: 'cluster-agent-application-status' };
    assert.equal(await alertState('GitOpsStatusLag', agentQueue), undefined);
    const gd = await f.when.deployed(tenant, 'lagging', exampleSource('f'));
    const appName = (await f.expect.application(gd)).metadata.name;
    await f.argoCd.reportStatus(appName, { sync: { status: 'Synced' }, health: { status: 'Healthy' } });
    await f.expect.deployment(gd).is('Synced and Healthy', syncedAndHealthy);

    // A long transaction (a manual session, a migration) locks application_state against writes.
    const holder = new pg.Client({ connectionString: f.system.database.url });
    const observer = new pg.Client({ connectionString: f.system.database.url });
    await holder.connect();
    await observer.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE application_state IN SHARE MODE');
      // Argo CD's status changes (a settled state, written at once): the agent's write of it waits for the
      // lock ...
      await f.argoCd.reportStatus(appName, { sync: { status: 'Synced' }, health: { status: 'Degraded' } });
      await eventually('the agent waiting for the lock on application_state', async () => {
        const { rows } = await observer.query<{ waiting: number }>(
          `SELECT count(*)::int AS waiting FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
           WHERE c.relname = 'application_state' AND NOT l.granted`,
        );
        return rows[0]?.waiting === 1;
      });
      // ... and the next change waits in the status queue behind it, as long as the transaction stays open.
      await f.argoCd.reportStatus(appName, { sync: { status: 'OutOfSync' }, health: { status: 'Degraded' } });
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      await holder.query('COMMIT');
    } finally {
      await holder.end();
      await observer.end();
    }
    await f.expect.deployment(gd).is('Degraded', (status) => status.health?.status === 'Degraded');
    await eventually(
      'GitOpsStatusLag firing',
      async () => (await alertState('GitOpsStatusLag', agentQueue)) === 'firing',
      120_000,
    );
    await eventually(
      'GitOpsStatusLag resolved',
      async () => (await alertState('GitOpsStatusLag')) === undefined,
      120_000,
    );
  });

  it("a provisioned namespace's ServiceAccount deleted: its token is not renewed and token expiring fires; back: it resolves", async () => {
    // A DeploymentTargetClaim provisioned a namespace, a ServiceAccount there and a kubeconfig Secret holding
    // its 10 min token (TOKEN_ENV).
    const className = `e2e-monitoring-${randomSuffix()}`;
    await create(f.system.kc, `${APPSTUDIO}/deploymenttargetclasses`, {
      apiVersion: 'appstudio.redhat.com/v1alpha1',
      kind: 'DeploymentTargetClass',
      metadata: { name: className },
      spec: { provisioner: 'managed-gitops.redhat.com/namespace', reclaimPolicy: 'Delete' },
    });
    clusterObjects.push(`${APPSTUDIO}/deploymenttargetclasses/${className}`);
    const claimPath = `${APPSTUDIO}/namespaces/${tenant}/deploymenttargetclaims/expiring-dtc`;
    await create(f.system.kc, `${APPSTUDIO}/namespaces/${tenant}/deploymenttargetclaims`, {
      apiVersion: 'appstudio.redhat.com/v1alpha1',
      kind: 'DeploymentTargetClaim',
      metadata: { name: 'expiring-dtc', labels: { [SHARD_LABEL]: f.system.shard } },
      spec: { deploymentTargetClassName: className },
    });
    const target = await eventually(
      'the provisioned target Bound',
      async () => {
        const t = await get(
          f.system.kc,
          `${APPSTUDIO}/namespaces/${tenant}/deploymenttargets/expiring-dtc-dt`,
        );
        return (t?.status as { phase?: string } | undefined)?.phase === 'Bound' ? t : undefined;
      },
      120_000,
    );
    const provisioned = (target.spec as { kubernetesCredentials: { defaultNamespace: string } })
      .kubernetesCredentials.defaultNamespace;
    const labels = { deployment_target_namespace: tenant, deployment_target: 'expiring-dtc-dt' };
    assert.equal(await alertState('GitOpsNamespaceProvisionerTokenExpiring', labels), undefined);

    // Without its ServiceAccount, the token cannot be renewed when due: it runs towards its expiry.
    const serviceAccounts = `/api/v1/namespaces/${provisioned}/serviceaccounts`;
    await remove(f.system.kc, `${serviceAccounts}/gitops-deployer`);
    await eventually(
      'GitOpsNamespaceProvisionerTokenExpiring firing',
      async () => (await alertState('GitOpsNamespaceProvisionerTokenExpiring', labels)) === 'firing',
      120_000,
    );
    assert.ok(
      f.logs.some((line) => line.includes('provisioned namespace token renewal failed')),
      'the backend logged the failed renewal',
    );
    assert.match(
      (await alertOf('GitOpsNamespaceProvisionerTokenExpiring', labels))?.annotations.summary ?? '',
      new RegExp(`DeploymentTarget ${tenant}/expiring-dtc-dt expires`),
    );

    // The ServiceAccount back: the next round renews the token, and the alert resolves.
    await create<KubeObject>(f.system.kc, serviceAccounts, { metadata: { name: 'gitops-deployer' } });
    await eventually(
      'GitOpsNamespaceProvisionerTokenExpiring resolved',
      async () => (await alertState('GitOpsNamespaceProvisionerTokenExpiring')) === undefined,
      120_000,
    );
    await remove(f.system.kc, claimPath);
    await eventually(
      'the claim and its namespace gone',
      async () =>
        (await get(f.system.kc, claimPath)) === undefined &&
        (await get(f.system.kc, paths.namespace(provisioned))) === undefined,
      120_000,
    );
  });
  it('an application row removed by hand (as a restored database lacks it): deletions held fires; confirmed: it resolves', async () => {
    const instance = { engine_instance: f.system.engineInstanceName };
    assert.equal(await alertState('GitOpsDeletionsHeld', instance), undefined);
    const gd = await f.when.deployed(tenant, 'held', exampleSource('h'));
    const appName = `gitopsdepl-${gd.metadata.uid}`;
    const app = await eventually('the Application', () =>
      get<KubeObject>(f.system.kc, paths.application(f.system.argoCdNamespace, appName)),
    );
    const row = await getApplicationByName(f.system.database.db, appName);
    assert.ok(row);
    // The row goes without the backend's proof of a deletion; the agent's next drift resync (at its start)
    // finds the Application without a row.
    await deleteApplication(f.system.database.db, row.id, { proven: false });
    await f.system.kill('cluster-agent');
    await f.system.start('cluster-agent', agentEnv());
    await eventually(
      'GitOpsDeletionsHeld firing',
      async () => (await alertState('GitOpsDeletionsHeld', instance)) === 'firing',
      120_000,
    );
    const kept = await get<KubeObject>(f.system.kc, paths.application(f.system.argoCdNamespace, appName));
    assert.equal(kept?.metadata.uid, app.metadata.uid, 'the Application was deleted or re-created');
    assert.equal(kept?.metadata.deletionTimestamp, undefined, 'the Application is being deleted');
    assert.match(
      (await alertOf('GitOpsDeletionsHeld', instance))?.annotations.description ?? '',
      new RegExp(`kubectl gitops instances confirm-deletions ${f.system.engineInstanceName}`),
    );

    // An operator confirms (what `kubectl gitops instances confirm-deletions` does): the delete goes ahead.
    const registered = await getEngineInstanceByName(f.system.database.db, f.system.engineInstanceName);
    assert.ok(registered);
    assert.equal((await confirmDeletionHolds(f.system.database.db, registered.id)).length, 1);
    await eventually(
      'GitOpsDeletionsHeld resolved',
      async () => (await alertState('GitOpsDeletionsHeld', instance)) === undefined,
      120_000,
    );
    await eventually('the Application deleted', async () =>
      (await get(f.system.kc, paths.application(f.system.argoCdNamespace, appName))) ? undefined : true,
    );
    await remove(f.system.kc, paths.gitopsDeployment(tenant, 'held'));
  });
});
