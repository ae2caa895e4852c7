/**
 * The admin CLI as a process (src/main.ts, and once through bin/kubectl-gitops) against the test run's real
 * PostgreSQL and API server, with a backend running in-process (packages/backend's fixture) to make real rows and
 * objects: status (with kubectl's -n, -A, -o json|yaml and --context), operations (and retry), instances (and
 * cordon/drain through the GitOpsEngineInstance), doctor, the errors for missing or unreachable configuration,
 * and that no output holds a secret. `instances admit`: instances-admit.int.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_GROUP_VERSION, Label, PlacementMessage, Plural } from '@gitops/api';
import type { Backend } from '@gitops/backend';
import { automatedTestDataSpec, useBackendFixture } from '@gitops/backend/testing';
import {
  createSealer,
  failOperation,
  getEngineInstanceByName,
  getOperation,
  holdDeletion,
  listDueWaitingOperations,
  type OperationRow,
  releaseDeletionHold,
  startOperation,
  upsertClusterUser,
} from '@gitops/db';
import { givenListeningAgentSession, givenRepositoryCredentials } from '@gitops/db/testing';
import { HttpMethod, type KubeObject, kubeRequest, loadKubeConfig } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { beforeAll, describe, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { conditionOf } from './kube.ts';
import { type CliRun, described, runCli, wrapperPath } from './testing/run-cli.ts';

const spec = automatedTestDataSpec;

const f = useBackendFixture();
let backend: Backend;
let tenant: { name: string; uid: string };
let refused: { name: string; uid: string };
let instance: string;
const key = { id: 'cli-test', key: randomBytes(32) };
const keyBase64 = Buffer.from(key.key).toString('base64');
const storedPassword = `password-${randomBytes(12).toString('hex')}`;
/** Every run of this file, for the secret scan at the end. */
const runs: CliRun[] = [];

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: f.database.url,
  KUBECONFIG: process.env.KUBECONFIG,
  GITOPS_ENCRYPTION_KEYS: `${key.id}=${keyBase64}`,
  ...extra,
});

async function cli(args: string[], extra: Record<string, string | undefined> = {}): Promise<CliRun> {
  const run = await runCli(args, env(extra));
  runs.push(run);
  return run;
}
const json = <T>(run: CliRun): T => JSON.parse(run.stdout) as T;

/** The operation announcing the application row of GitOpsDeployment `name` of the tenant. */
async function operationOf(name: string): Promise<OperationRow> {
  return await eventually(`operation of ${name}`, () =>
    f.db
      .selectFrom('operation')
      .selectAll()
      .where('owner_name', '=', name)
      .where('owner_namespace', '=', tenant.name)
      .orderBy('created_at', 'desc')
      .executeTakeFirst(),
  );
}

const engineInstanceObject = (name: string) =>
  kubeRequest(f.kc, {
    method: HttpMethod.GET,
    path: `/apis/${API_GROUP_VERSION}/${Plural.GitOpsEngineInstance}/${name}`,
  }) as Promise<KubeObject>;

beforeAll(async () => {
  backend = await f.startBackend({
    GITOPS_ENGINE_INSTANCE_STATUS_INTERVAL: '1s',
    // Nothing re-announces the operation this file fails on purpose.
    GITOPS_OPERATION_RETRY_INTERVAL: '24h',
  });
  instance = backend.engineInstance().name;
  tenant = await f.createNamespace('cli');
  refused = await f.createNamespace('cli-refused', { [Label.EngineInstance]: 'nowhere' });
  await f.createDeployment(tenant.name, 'app-a', spec);
  await f.createDeployment(tenant.name, 'app-b', spec);
  await f.createDeployment(refused.name, 'app-c', spec);
  await operationOf('app-a');
  await operationOf('app-b');
  // A stored credential sealed under the CLI's key (doctor opens it), of a tenant of no namespace.
  const other = await upsertClusterUser(f.db, { uid: randomUUID(), name: 'cli-sealed' });
  await givenRepositoryCredentials(
    f.db,
    { clusterUserId: other.id, engineInstanceId: backend.engineInstance().id },
    { url: 'https://git.example/private.git', secretName: 'creds' },
    { sealer: createSealer({ keys: [key], activeKeyId: key.id }), password: storedPassword },
  );
  await eventually('the GitOpsEngineInstance', () => engineInstanceObject(instance).catch(() => undefined));
});

describe('kubectl gitops status', () => {
  test("a tenant's deployments with their instance and latest operation, from the API server and the database", async () => {
    const run = await cli(['status', tenant.name]);
    assert.equal(run.code, 0, described(run));
    assert.match(run.stdout, new RegExp(`tenant placed on engine instance ${instance}`));
    assert.match(run.stdout, /NAME\s+SYNC\s+HEALTH\s+INSTANCE\s+LAST OPERATION\s+AGE/);
    assert.match(run.stdout, new RegExp(`app-a\\s+-\\s+-\\s+${instance}\\s+Waiting`));
    assert.match(run.stdout, new RegExp(`app-b\\s+-\\s+-\\s+${instance}\\s+Waiting`));

    const view = json<{
      tenant: { placedOn: string };
      deployments: { name: string; engineInstance: string; lastOperation: { id: string; state: string } }[];
    }>(await cli(['status', tenant.name, '-o', 'json']));
    assert.equal(view.tenant.placedOn, instance);
    const a = view.deployments.find((d) => d.name === 'app-a');
    assert.equal(a?.engineInstance, instance);
    assert.equal(a?.lastOperation.id, (await operationOf('app-a')).id);
    assert.equal(a?.lastOperation.state, 'Waiting');
  });

  test('a deployment that could not be placed shows its ErrorOccurred message', async () => {
    await eventually('ErrorOccurred of app-c', async () => {
      const live = await f.getDeployment(refused.name, 'app-c');
      const conditions = (live?.status as { conditions?: { type: string; status: string }[] })?.conditions;
      return conditions?.some((c) => c.type === 'ErrorOccurred' && c.status === 'True') || undefined;
    });
    const run = await cli(['status', refused.name, '-o', 'wide']);
    assert.equal(run.code, 0, described(run));
    assert.match(run.stdout, /no tenant in the database yet|tenant not placed on an engine instance yet/);
    assert.ok(run.stdout.includes(PlacementMessage.unknownInstance('nowhere')), described(run));
  });

  test('-n, and -o json and -o yaml: the same fields', async () => {
    const byFlag = await cli(['status', '-n', tenant.name]);
    assert.equal(byFlag.code, 0, described(byFlag));
    assert.match(
      byFlag.stdout,
      new RegExp(`^namespace ${tenant.name}: tenant placed on engine instance ${instance}\n`),
    );
    assert.match(byFlag.stdout, new RegExp(`app-a\\s+-\\s+-\\s+${instance}\\s+Waiting`));
    const long = await cli(['status', `--namespace=${tenant.name}`]);
    assert.equal(long.stdout.split('\n')[0], byFlag.stdout.split('\n')[0]);

    type View = {
      namespace: string;
      tenant: { placedOn: string };
      deployments: { name: string; engineInstance: string; lastOperation: { id: string } }[];
    };
    const summary = (view: View) => ({
      namespace: view.namespace,
      placedOn: view.tenant.placedOn,
      deployments: view.deployments.map((d) => [d.name, d.engineInstance, d.lastOperation.id]),
    });
    const asJson = await cli(['status', '-n', tenant.name, '-o', 'json']);
    const asYaml = await cli(['-o', 'yaml', 'status', '-n', tenant.name]);
    assert.equal(asYaml.code, 0, described(asYaml));
    assert.doesNotMatch(asYaml.stdout, /^\{/, 'YAML, not JSON');
    const fromYaml = parseYaml(asYaml.stdout) as View;
    assert.deepEqual(summary(fromYaml), summary(json<View>(asJson)));
    assert.deepEqual(summary(fromYaml).deployments, [
      ['app-a', instance, (await operationOf('app-a')).id],
      ['app-b', instance, (await operationOf('app-b')).id],
    ]);

    const wide = await cli(['status', '-n', tenant.name, '-o', 'wide']);
    assert.match(
      wide.stdout,
      /NAME\s+SYNC\s+HEALTH\s+INSTANCE\s+LAST OPERATION\s+AGE\s+APPLICATION\s+OPERATION\s+ERROR/,
    );
    assert.ok(wide.stdout.includes((await operationOf('app-a')).id), described(wide));
  });

  test('-A: every namespace with GitOpsDeployments, with a NAMESPACE column', async () => {
    const table = await cli(['status', '-A']);
    assert.equal(table.code, 0, described(table));
    assert.match(table.stdout, /^NAMESPACE\s+NAME\s+SYNC\s+HEALTH\s+INSTANCE/);
    assert.match(
      table.stdout,
      new RegExp(`^${tenant.name}\\s+app-a\\s+-\\s+-\\s+${instance}\\s+Waiting`, 'm'),
    );
    assert.match(table.stdout, new RegExp(`^${tenant.name}\\s+app-b\\s`, 'm'));
    assert.match(table.stdout, new RegExp(`^${refused.name}\\s+app-c\\s`, 'm'));

    const all = parseYaml((await cli(['status', '--all-namespaces', '-o', 'yaml'])).stdout) as {
      namespaces: {
        namespace: string;
        tenant: { placedOn: string } | null;
        deployments: { name: string }[];
      }[];
    };
    const ours = all.namespaces.find((n) => n.namespace === tenant.name);
    assert.equal(ours?.tenant?.placedOn, instance);
    assert.deepEqual(
      ours?.deployments.map((d) => d.name),
      ['app-a', 'app-b'],
    );
    assert.deepEqual(
      all.namespaces.find((n) => n.namespace === refused.name)?.deployments.map((d) => d.name),
      ['app-c'],
    );
  });

  test("--context selects that context of the kubeconfig for every call; without a namespace, the context's", async () => {
    // The test's kubeconfig with its context renamed, a current context whose API server does not answer, and
    // a third context naming the tenant's namespace.
    const dir = await mkdtemp(join(tmpdir(), 'cli-context-'));
    try {
      const original = parseYaml(await readFile(process.env.KUBECONFIG!, 'utf8')) as {
        clusters: { name: string; cluster: Record<string, unknown> }[];
        users: { name: string }[];
        contexts: { name: string; context: { cluster: string; user: string } }[];
        'current-context': string;
      };
      const real = original.contexts.find((c) => c.name === original['current-context'])!.context;
      const file = join(dir, 'kubeconfig');
      await writeFile(
        file,
        JSON.stringify({
          ...original,
          clusters: [...original.clusters, { name: 'nowhere', cluster: { server: 'https://127.0.0.1:1' } }],
          contexts: [
            { name: 'nowhere', context: { cluster: 'nowhere', user: real.user } },
            { name: 'the-test-cluster', context: real },
            { name: 'the-tenant', context: { ...real, namespace: tenant.name } },
          ],
          'current-context': 'nowhere',
        }),
      );
      const unreachable = await cli(['status', '-n', tenant.name, '--kubeconfig', file]);
      assert.equal(unreachable.code, 2, described(unreachable));
      assert.match(unreachable.stderr, /cannot reach the Kubernetes API server https:\/\/127\.0\.0\.1:1/);

      const chosen = await cli(['status', '-n', tenant.name, '--context', 'the-test-cluster'], {
        KUBECONFIG: file,
      });
      assert.equal(chosen.code, 0, described(chosen));
      assert.match(chosen.stdout, new RegExp(`tenant placed on engine instance ${instance}`));

      const byContext = json<{ namespace: string }>(
        await cli(['status', '-o', 'json', '--kubeconfig', file, '--context=the-tenant']),
      );
      assert.equal(byContext.namespace, tenant.name);

      const unknown = await cli(['status', '-n', tenant.name, '--kubeconfig', file, '--context', 'staging']);
      assert.equal(unknown.code, 2, described(unknown));
      assert.match(
        unknown.stderr,
        /^kubectl gitops status: --context staging: kubeconfig .* has no context "staging" \(it has: nowhere, the-test-cluster, the-tenant\) \(--kubeconfig\)\n$/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('an unknown namespace is exit code 1 with one line', async () => {
    const run = await cli(['status', `no-such-${randomUUID().slice(0, 8)}`]);
    assert.equal(run.code, 1, described(run));
    assert.match(run.stderr, /^kubectl gitops status: namespace no-such-\w+ does not exist\n$/);
  });
});

describe('kubectl gitops operations', () => {
  let failed: OperationRow;

  test('lists operations unfinished for longer than --stuck, and Failed ones with why and whether an agent listens', async () => {
    const waiting = await operationOf('app-b');
    const stuck = json<{ operations: { id: string; state: string; agentListening: boolean }[] }>(
      await cli(['operations', '--stuck=0s', '--instance', instance, '-o', 'json']),
    );
    assert.ok(
      stuck.operations.some((o) => o.id === waiting.id && o.state === 'Waiting' && !o.agentListening),
    );
    const fresh = await cli(['operations', '--instance', instance]);
    assert.equal(fresh.code, 0, described(fresh));
    assert.match(
      fresh.stdout,
      /^no operations of engine instance \S+ Waiting or In_Progress for more than 5m, or Failed\n$/,
    );

    // The agent gives up on app-a's operation.
    const op = await operationOf('app-a');
    assert.equal((await startOperation(f.db, op.id)).status, 'started');
    failed = (await failOperation(
      f.db,
      op.id,
      'failed after 10 attempts: the repository cannot be reached',
    ))!;
    const table = await cli(['operations']);
    assert.equal(table.code, 0, described(table));
    assert.match(
      table.stdout,
      new RegExp(
        `${failed.id}\\s+Failed\\s+\\d+s\\s+${instance}\\s+AWAY\\s+Application/${failed.resource_id}\\s+GitOpsDeployment ${tenant.name}/app-a\\s+1\\s+failed after 10 attempts: the repository cannot be reached`,
      ),
    );
    assert.match(table.stdout, /retry: kubectl gitops operations retry <id> \| --all-failed/);

    const agent = await givenListeningAgentSession(f.database.url, backend.engineInstance().id);
    try {
      const listed = json<{ operations: { id: string; agentListening: boolean; owner: { name: string } }[] }>(
        await cli(['operations', '--failed', '-o', 'json']),
      );
      assert.deepEqual(
        listed.operations.map((o) => [o.id, o.agentListening, o.owner.name]),
        [[failed.id, true, 'app-a']],
      );
    } finally {
      await agent.end();
    }
    const elsewhere = json<{ operations: unknown[] }>(
      await cli(['operations', '--failed', '--instance', 'elsewhere', '-o', 'json']),
    );
    assert.deepEqual(elsewhere.operations, []);
  });

  test('-n: the operations whose owner is in that namespace', async () => {
    type Listed = { operations: { id: string; owner: { namespace: string } | null }[] };
    const mine = json<Listed>(
      await cli(['operations', '--stuck=0s', '--failed', '-n', tenant.name, '-o', 'json']),
    );
    assert.ok(mine.operations.length >= 1, JSON.stringify(mine));
    assert.ok(mine.operations.every((o) => o.owner?.namespace === tenant.name));
    assert.ok(mine.operations.some((o) => o.id === failed.id));
    const none = await cli(['operations', '--stuck=0s', '-n', refused.name]);
    assert.equal(none.code, 0, described(none));
    assert.match(none.stdout, new RegExp(`^no operations of namespace ${refused.name} `));
    const wide = await cli(['operations', '--failed', '-n', tenant.name, '-o', 'wide']);
    assert.match(wide.stdout, /ID\s+STATE\s+AGE\s+UPDATED\s+LAST ATTEMPT\s+INSTANCE/);
    const elsewhere = await cli(['operations', 'retry', '--all-failed', '-n', refused.name]);
    assert.equal(elsewhere.code, 0, described(elsewhere));
    assert.match(elsewhere.stdout, new RegExp(`^no Failed operations of namespace ${refused.name}\n$`));
    assert.equal((await getOperation(f.db, failed.id))?.state, 'Failed', 'another namespace is not retried');
  });

  test('retry puts a Failed operation back to Waiting, due now, where the agent sweep finds it', async () => {
    const run = await cli(['operations', 'retry', failed.id]);
    assert.equal(run.code, 0, described(run));
    assert.match(run.stdout, new RegExp(`${failed.id}: retried: Waiting again, due now`));
    const row = (await getOperation(f.db, failed.id))!;
    assert.equal(row.state, 'Waiting');
    assert.equal(row.attempts, 0);
    const due = await listDueWaitingOperations(f.db, backend.engineInstance().id, {
      dueForMs: 0,
      limit: 100,
    });
    assert.ok(
      due.some((o) => o.id === failed.id),
      'the agent sweep finds it',
    );

    const none = await cli(['operations', 'retry', '--all-failed']);
    assert.equal(none.code, 0, described(none));
    assert.match(none.stdout, /no Failed operations/);
  });

  test('retry --all-failed; an operation In_Progress or unknown is not retried (exit 1); a malformed id is exit 2', async () => {
    const op = await operationOf('app-a');
    await startOperation(f.db, op.id);
    await failOperation(f.db, op.id, 'failed again');
    const all = json<{ results: { id: string; status: string }[] }>(
      await cli(['operations', 'retry', '--all-failed', '--instance', instance, '-o', 'json']),
    );
    assert.deepEqual(all.results, [{ id: op.id, status: 'retried', state: 'Waiting' }]);

    await startOperation(f.db, op.id);
    const running = await cli(['operations', 'retry', op.id, randomUUID()]);
    assert.equal(running.code, 1, described(running));
    assert.match(running.stdout, /not retried: In_Progress/);
    assert.match(running.stdout, /not found/);
    const malformed = await cli(['operations', 'retry', 'abc']);
    assert.equal(malformed.code, 2, described(malformed));
    assert.match(malformed.stderr, /'abc' is not an operation id/);
  });
});

describe('kubectl gitops instances', () => {
  const cordonedInDb = async () => (await getEngineInstanceByName(f.db, instance))?.cordoned;

  test('lists every engine instance with its agents, load and cordon', async () => {
    const run = await cli(['instances']);
    assert.equal(run.code, 0, described(run));
    assert.match(
      run.stdout,
      new RegExp(`${instance}\\s+${f.argoCdNamespace}\\s+\\S+\\s+0\\s+false\\s+1\\s+2\\s+false\\s+-`),
    );
    const view = json<{
      instances: { name: string; tenants: number; object: { cordoned: boolean } | null }[];
    }>(await cli(['instances', '-o', 'json']));
    assert.deepEqual(
      view.instances.map((i) => [i.name, i.tenants, i.object?.cordoned]),
      [[instance, 1, false]],
    );
    const wide = await cli(['instances', '-n', f.argoCdNamespace, '-o', 'wide']);
    assert.match(wide.stdout, /APPLICATIONS\s+RELEASING\s+CORDONED\s+DRAIN\s+AVAILABLE\s+ROLE\s+KEY/);
    assert.match(wide.stdout, new RegExp(`^${instance}\\s+${f.argoCdNamespace}\\s`, 'm'));
    const other = await cli(['instances', '-n', 'no-such-namespace']);
    assert.match(other.stdout, /^no engine instance of namespace no-such-namespace\n$/);
  });

  test('cordon and uncordon patch spec.cordoned of the GitOpsEngineInstance, and the backend applies it', async () => {
    const cordon = await cli(['instances', 'cordon', instance, '--wait']);
    assert.equal(cordon.code, 0, described(cordon));
    assert.match(cordon.stdout, new RegExp(`engine instance ${instance}: spec.cordoned set to true`));
    assert.match(cordon.stdout, /the backend has applied it/);
    assert.equal(((await engineInstanceObject(instance)).spec as { cordoned?: boolean }).cordoned, true);
    await eventually('cordoned in the database', async () => (await cordonedInDb()) === true || undefined);
    const again = await cli(['instances', 'cordon', instance]);
    assert.match(again.stdout, /spec.cordoned is already true/);

    const uncordon = await cli(['instances', 'uncordon', instance, '--wait']);
    assert.equal(uncordon.code, 0, described(uncordon));
    await eventually('uncordoned in the database', async () => (await cordonedInDb()) === false || undefined);
  });

  test('holds lists the deletes the deletion guard holds (DeletionsHeld on the object); confirm-deletions lets them go', async () => {
    const row = await getEngineInstanceByName(f.db, instance);
    assert.ok(row);
    const applicationId = randomUUID();
    // What the agent records when it holds a delete (deletion-guard.ts).
    await holdDeletion(f.db, {
      applicationId,
      engineInstanceId: row.id,
      clusterUserId: undefined,
      applicationName: 'gitopsdepl-held',
      reason: 'Unproven',
      message: 'Application gitopsdepl-held is not deleted: held for the test',
    });
    const holds = await cli(['instances', 'holds', instance]);
    assert.equal(holds.code, 0, described(holds));
    assert.match(holds.stdout, /^APPLICATION\s+REASON\s+HELD AT\s+CONFIRMED\n/);
    assert.match(holds.stdout, /^gitopsdepl-held\s+Unproven\s+\S+\s+no$/m);
    assert.match(holds.stdout, new RegExp(`kubectl gitops instances confirm-deletions ${instance}`));
    const held = await eventually('DeletionsHeld True on the GitOpsEngineInstance', async () => {
      const condition = conditionOf(await engineInstanceObject(instance), 'DeletionsHeld');
      return condition?.status === 'True' ? condition : undefined;
    });
    assert.match(held.message ?? '', /holds the deletion of 1 Argo CD Application /);

    const confirm = await cli(['instances', 'confirm-deletions', instance, '-o', 'json']);
    assert.equal(confirm.code, 0, described(confirm));
    const confirmed = json<{ name: string; confirmed: { application: string; confirmed: boolean }[] }>(
      confirm,
    );
    assert.deepEqual(
      confirmed.confirmed.map((c) => [c.application, c.confirmed]),
      [['gitopsdepl-held', true]],
    );
    const nothingLeft = await cli(['instances', 'confirm-deletions', instance]);
    assert.match(nothingLeft.stdout, /no unconfirmed deletion to confirm/);
    await eventually('DeletionsHeld False once none waits for a confirmation', async () =>
      conditionOf(await engineInstanceObject(instance), 'DeletionsHeld')?.status === 'False'
        ? true
        : undefined,
    );
    const unknown = await cli(['instances', 'holds', `no-such-${randomUUID().slice(0, 8)}`]);
    assert.equal(unknown.code, 1, described(unknown));
    await releaseDeletionHold(f.db, applicationId);
  });

  test('drain and undrain patch spec.drain; an unknown instance is exit code 1', async () => {
    const drain = await cli(['instances', 'drain', instance]);
    assert.equal(drain.code, 0, described(drain));
    assert.equal(((await engineInstanceObject(instance)).spec as { drain?: boolean }).drain, true);
    const undrain = await cli(['instances', 'undrain', instance, '-o', 'json']);
    assert.deepEqual(json(undrain), {
      name: instance,
      action: 'undrain',
      changed: true,
      spec: { drain: false },
    });
    assert.equal(((await engineInstanceObject(instance)).spec as { drain?: boolean }).drain, false);
    // A drain cordons the instance; the operator lifts it.
    const uncordon = await cli(['instances', 'uncordon', instance, '--wait']);
    assert.equal(uncordon.code, 0, described(uncordon));

    const unknown = await cli(['instances', 'cordon', `no-such-${randomUUID().slice(0, 8)}`]);
    assert.equal(unknown.code, 1, described(unknown));
    assert.match(unknown.stderr, /there is no GitOpsEngineInstance 'no-such-\w+'/);
  });
});

describe('kubectl gitops doctor', () => {
  const configMap = (name: string, data: Record<string, string>) =>
    kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: `/api/v1/namespaces/${f.argoCdNamespace}/configmaps`,
      body: { metadata: { name }, data },
    });

  test('fails when no agent listens and Argo CD is not configured, then passes every check', async () => {
    const failing = await cli(['doctor']);
    assert.equal(failing.code, 1, described(failing));
    assert.match(failing.stdout, /^OK {4}api-server: /m);
    assert.match(
      failing.stdout,
      /^OK {4}crd gitopsengineinstances\.managed-gitops\.redhat\.com: Established/m,
    );
    assert.match(failing.stdout, /^OK {4}migrations: every migration of this version is applied$/m);
    assert.match(failing.stdout, new RegExp(`^FAIL  instance ${instance}: no agent listens`, 'm'));
    assert.match(
      failing.stdout,
      new RegExp(`^FAIL  argocd ${instance}: ${f.argoCdNamespace}/argocd-cmd-params-cm does not exist`, 'm'),
    );

    await configMap('argocd-cmd-params-cm', { 'controller.resource.health.persist': 'true' });
    await configMap('argocd-cm', { 'resource.respectRBAC': 'normal' });
    const agent = await givenListeningAgentSession(f.database.url, backend.engineInstance().id);
    try {
      const passing = await cli(['doctor']);
      assert.equal(passing.code, 0, described(passing));
      assert.doesNotMatch(passing.stdout, /^(FAIL|WARN)/m);
      for (const check of [
        'database: reachable',
        "encryption-keys: 1 configured ('cli-test'), active 'cli-test'",
        "sealed-values 'cli-test': 1 values (repository_credentials.password_sealed) under the active key",
        `instance ${instance}: an agent listens`,
        `gitopsengineinstance ${instance}: exists`,
        `argocd ${instance}: argocd-cmd-params-cm controller.resource.health.persist: "true"`,
        `argocd ${instance} rbac: argocd-cm resource.respectRBAC: normal`,
      ]) {
        assert.ok(passing.stdout.includes(`OK    ${check}`), `${check}\n${described(passing)}`);
      }
      const checks = json<{ ok: boolean; checks: { name: string; status: string }[] }>(
        await cli(['doctor', '-o', 'json']),
      );
      assert.equal(checks.ok, true);
      assert.ok(checks.checks.filter((c) => c.name.startsWith('crd ')).length >= 6);
    } finally {
      await agent.end();
    }
  });

  test('a stored value under a key the CLI does not have fails; an unreachable database is exit code 2', async () => {
    const otherKey = `other=${randomBytes(32).toString('base64')}`;
    const wrongKey = await cli(['doctor'], { GITOPS_ENCRYPTION_KEYS: otherKey });
    assert.equal(wrongKey.code, 1, described(wrongKey));
    assert.match(
      wrongKey.stdout,
      /^FAIL {2}sealed-values 'cli-test': 1 values .* does not open: UNKNOWN_KEY/m,
    );

    const down = await cli(['doctor'], { DATABASE_URL: 'postgres://gitops:hunter2-db@127.0.0.1:1/gitops' });
    assert.equal(down.code, 2, described(down));
    assert.match(
      down.stdout,
      /^FAIL {2}database: cannot reach the database of DATABASE_URL \(postgres:\/\/gitops@127\.0\.0\.1:1\/gitops\): /m,
    );
    assert.match(down.stdout, /^OK {4}api-server: /m);
    assert.ok(!(down.stdout + down.stderr).includes('hunter2-db'));
  });
});

describe('errors and secrets', () => {
  test('missing or unreachable configuration: one line naming it, exit code 2, no stack trace', async () => {
    const cases: [string[], Record<string, string | undefined>, RegExp][] = [
      [
        ['operations'],
        { DATABASE_URL: undefined },
        /^kubectl gitops operations: DATABASE_URL is not set: .*\n$/,
      ],
      [
        ['operations'],
        { DATABASE_URL: 'postgres://gitops:hunter2-db@127.0.0.1:1/gitops' },
        /^kubectl gitops operations: cannot reach the database of DATABASE_URL \(postgres:\/\/gitops@127\.0\.0\.1:1\/gitops\): .*\n$/,
      ],
      [
        ['instances', 'cordon', instance],
        { KUBECONFIG: undefined, HOME: '/nonexistent' },
        /^kubectl gitops instances: no kubeconfig: set KUBECONFIG \(or pass --kubeconfig <file>\).*\n$/,
      ],
      [
        ['status', tenant.name],
        { KUBECONFIG: '/nonexistent/kubeconfig' },
        /^kubectl gitops status: cannot load kubeconfig \/nonexistent\/kubeconfig \(KUBECONFIG\): .*\n$/,
      ],
      [['bogus'], {}, /^kubectl gitops: unknown command 'bogus'/],
      [['reseal', '--stuck=1m'], {}, /^kubectl gitops reseal: does not take --stuck/],
      [['status', '-n', 'x', '--bogus'], {}, /^kubectl gitops status: unknown option '--bogus'\n/],
    ];
    for (const [args, extra, expected] of cases) {
      const run = await cli(args, extra);
      assert.equal(run.code, 2, described(run));
      assert.equal(run.stdout, '', described(run));
      assert.match(run.stderr, expected, described(run));
      assert.doesNotMatch(run.stderr, /^\s+at /m, 'no stack trace');
    }
  });

  test('bin/kubectl-gitops runs the CLI with the project Node (what kubectl runs as `kubectl gitops`)', async () => {
    const run = await runCli(['instances', '-o', 'json'], env(), { command: wrapperPath });
    runs.push(run);
    assert.equal(run.code, 0, described(run));
    assert.equal(json<{ instances: { name: string }[] }>(run).instances[0]?.name, instance);
    const help = await runCli(['--', '--help'], env(), { command: wrapperPath });
    assert.equal(help.code, 0, described(help));
    assert.match(help.stdout, /kubectl gitops operations retry <id>\.\.\. \| --all-failed/);
  });

  test('no output of any command holds a secret: database password, keys, stored values, kubeconfig credentials', async () => {
    const kc = loadKubeConfig(process.env.KUBECONFIG);
    const secrets = [
      keyBase64,
      storedPassword,
      'hunter2-db',
      ...kc.users.flatMap((u) => [u.token, u.keyData, u.password].filter((v): v is string => Boolean(v))),
    ];
    const password = new URL(f.database.url).password;
    assert.ok(runs.length >= 20, `${runs.length} runs`);
    for (const run of runs) {
      const output = run.stdout + run.stderr;
      for (const secret of secrets) assert.ok(!output.includes(secret), `a secret in: ${described(run)}`);
      if (password)
        assert.ok(!output.includes(`:${password}@`), `the database password in: ${described(run)}`);
    }
  });
});
