/**
 * `kubectl gitops instances admit <name> --namespace <argocd-namespace> [--secret <name>]` as a process against
 * the test run's real PostgreSQL and API server: the connection string it prints logs in as the instance's role
 * (`select session_user`), `-o json` gives name, role and URL, running it again issues a new password (the old
 * one no longer logs in), `--secret` writes a Secret whose DATABASE_URL logs in and never prints the password,
 * and a Secret that cannot be written leaves the role's password as it was.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { FieldManager } from '@gitops/api';
import {
  createDb,
  dropEngineInstanceRole,
  engineInstanceRoleName,
  getEngineInstanceByName,
  sessionRole,
} from '@gitops/db';
import { createTestDatabase, type TestDatabase } from '@gitops/db/testing';
import { HttpMethod, type KubeConfig, type KubeObject, kubeRequest, loadKubeConfig } from '@gitops/shared';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type CliRun, described, runCli } from './testing/run-cli.ts';

let testDb: TestDatabase;
let kc: KubeConfig;
const suffix = randomUUID().slice(0, 8);
const namespace = `argocd-admit-${suffix}`;
const instance = `admit-${suffix}`;

const cli = (args: string[]): Promise<CliRun> =>
  runCli(args, { DATABASE_URL: testDb.url, KUBECONFIG: process.env.KUBECONFIG });
/** `kubectl gitops instances admit <instance> ...args`. */
const admit = (...args: string[]): Promise<CliRun> => cli(['instances', 'admit', instance, ...args]);
const json = <T>(run: CliRun): T => JSON.parse(run.stdout) as T;

/** Who `url` logs in as: `select session_user` (and the instance its role is bound to). */
async function loginOf(url: string): Promise<{ role: string; engineInstanceId: string | undefined }> {
  const db = createDb(url, { max: 1, applicationName: 'cli-admit-test' });
  try {
    const { role, engineInstanceId } = await sessionRole(db);
    return { role, engineInstanceId };
  } finally {
    await db.destroy();
  }
}

async function refusedLogin(url: string): Promise<void> {
  await assert.rejects(loginOf(url), { code: '28P01' }, 'password authentication fails');
}

async function secretUrl(name: string): Promise<{ url: string; object: KubeObject }> {
  const object = (await kubeRequest(kc, {
    method: HttpMethod.GET,
    path: `/api/v1/namespaces/${namespace}/secrets/${name}`,
  })) as KubeObject & { data?: Record<string, string> };
  const encoded = object.data?.url;
  assert.ok(encoded, 'the Secret has url (the agent reads it as DATABASE_URL)');
  return { url: Buffer.from(encoded, 'base64').toString('utf8'), object };
}

const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);

beforeAll(async () => {
  testDb = await createTestDatabase();
  kc = loadKubeConfig(process.env.KUBECONFIG);
  await kubeRequest(kc, {
    method: HttpMethod.POST,
    path: '/api/v1/namespaces',
    body: { metadata: { name: namespace } },
  });
});

afterAll(async () => {
  // Roles are the server's, not the test database's: drop the one this file made.
  const row = await getEngineInstanceByName(testDb.db, instance);
  if (row) await dropEngineInstanceRole(testDb.db, row.id);
  await testDb.destroy();
  await kubeRequest(kc, { method: HttpMethod.DELETE, path: `/api/v1/namespaces/${namespace}` }).catch(
    () => {},
  );
});

describe('kubectl gitops instances admit', () => {
  let printedUrl: string;
  let role: string;

  test("prints the agent's connection string once: it logs in as the instance's role", async () => {
    const run = await admit('--namespace', namespace);
    assert.equal(run.code, 0, described(run));
    const row = await getEngineInstanceByName(testDb.db, instance);
    assert.ok(row, 'the instance is registered');
    role = engineInstanceRoleName(row.id);
    assert.equal(row.db_role, role);
    assert.equal(row.namespace_name, namespace);

    assert.match(
      run.stdout,
      new RegExp(
        `^engine instance ${instance} \\(Argo CD namespace ${namespace}\\) admitted: database role ${role}, with a new password\n`,
      ),
    );
    const line = /^DATABASE_URL=(postgres\S+)$/m.exec(run.stdout);
    assert.ok(line, described(run));
    printedUrl = line[1]!;
    assert.equal(decodeURIComponent(new URL(printedUrl).username), role);
    assert.equal(new URL(printedUrl).host, new URL(testDb.url).host);
    assert.match(
      run.stdout,
      /store it as the agent's DATABASE_URL \(manifests\/base: Secret gitops-service-agent-database, key url\)/,
    );
    assert.match(run.stdout, /running admit again issues a new password \(the old one stops working/);
    assert.equal(run.stdout.split(passwordOf(printedUrl)).length, 2, 'the password appears once');
    const backendPassword = new URL(testDb.url).password;
    if (backendPassword)
      assert.ok(!run.stdout.includes(`:${backendPassword}@`), "not the backend's password");

    assert.deepEqual(await loginOf(printedUrl), { role, engineInstanceId: row.id });
  });

  test('-o json: name, role and the URL; again is a new password, and the old one no longer logs in', async () => {
    const run = await admit('-n', namespace, '-o', 'json');
    assert.equal(run.code, 0, described(run));
    const admitted = json<{ name: string; role: string; databaseUrl: string }>(run);
    assert.deepEqual(Object.keys(admitted).sort(), ['databaseUrl', 'name', 'role']);
    assert.equal(admitted.name, instance);
    assert.equal(admitted.role, role);
    assert.notEqual(passwordOf(admitted.databaseUrl), passwordOf(printedUrl));
    assert.equal((await loginOf(admitted.databaseUrl)).role, role);
    await refusedLogin(printedUrl);
    printedUrl = admitted.databaseUrl;
  });

  test('--secret writes the Secret (server-side apply) whose url logs in; the password is never printed', async () => {
    const run = await admit('--namespace', namespace, '--secret', 'agent-db');
    assert.equal(run.code, 0, described(run));
    const { url, object } = await secretUrl('agent-db');
    assert.equal((await loginOf(url)).role, role);
    await refusedLogin(printedUrl);
    const password = passwordOf(url);
    assert.ok(!(run.stdout + run.stderr).includes(password), described(run));
    assert.ok(!(run.stdout + run.stderr).includes('DATABASE_URL=postgres'), described(run));
    assert.match(
      run.stdout,
      new RegExp(`^secret/agent-db in namespace ${namespace}: url written \\(server-side apply`, 'm'),
    );
    const managers = (object.metadata.managedFields ?? []) as { manager?: string; operation?: string }[];
    assert.ok(
      managers.some((m) => m.manager === FieldManager.Cli && m.operation === 'Apply'),
      JSON.stringify(managers),
    );

    // Again, -o json: the Secret is updated in place; its name, never the URL.
    const again = await admit('-n', namespace, '--secret', 'agent-db', '-o', 'json');
    assert.equal(again.code, 0, described(again));
    assert.deepEqual(json(again), { name: instance, role, secret: { namespace, name: 'agent-db' } });
    const updated = await secretUrl('agent-db');
    assert.notEqual(passwordOf(updated.url), password);
    assert.ok(!(again.stdout + again.stderr).includes(passwordOf(updated.url)));
    assert.equal((await loginOf(updated.url)).role, role);
    await refusedLogin(url);
    printedUrl = updated.url;
  });

  test('a Secret that cannot be written, or another namespace for the instance: exit 1, the password unchanged', async () => {
    const missing = `no-such-${suffix}`;
    const run = await admit('--namespace', missing, '--secret', 'agent-db');
    assert.equal(run.code, 1, described(run));
    assert.match(
      run.stderr,
      new RegExp(
        `^kubectl gitops instances: cannot write Secret ${missing}/agent-db: .*nothing was changed\n$`,
      ),
    );
    assert.equal((await loginOf(printedUrl)).role, role, 'the password in the Secret still logs in');

    const other = await admit('--namespace', `other-${suffix}`);
    assert.equal(other.code, 1, described(other));
    assert.match(
      other.stderr,
      new RegExp(`is registered for Argo CD namespace "${namespace}", not "other-${suffix}"`),
    );
    assert.ok(!other.stdout.includes('DATABASE_URL'), described(other));
    assert.equal((await loginOf(printedUrl)).role, role);

    const stray = await admit('-n', namespace, '--secret-namespace', 'default');
    assert.equal(stray.code, 2, described(stray));
    assert.match(stray.stderr, /--secret-namespace goes with --secret/);

    const usage = await admit();
    assert.equal(usage.code, 2, described(usage));
    assert.match(usage.stderr, /usage: kubectl gitops instances admit <name> --namespace <argocd-namespace>/);
  });

  test("--secret-namespace: the Secret goes where the agent's Pod reads it (manifests/base: gitops-service)", async () => {
    const name = `agent-db-${suffix}`;
    try {
      const run = await admit('-n', namespace, '--secret', name, '--secret-namespace', 'default');
      assert.equal(run.code, 0, described(run));
      assert.match(run.stdout, new RegExp(`^secret/${name} in namespace default: url written`, 'm'));
      const object = (await kubeRequest(kc, {
        method: HttpMethod.GET,
        path: `/api/v1/namespaces/default/secrets/${name}`,
      })) as KubeObject & {
        data?: Record<string, string>;
      };
      const url = Buffer.from(object.data?.url ?? '', 'base64').toString('utf8');
      assert.equal((await loginOf(url)).role, role);
      printedUrl = url;
    } finally {
      await kubeRequest(kc, {
        method: HttpMethod.DELETE,
        path: `/api/v1/namespaces/default/secrets/${name}`,
      }).catch(() => {});
    }
  });

  test('rotate-key asks the instance for a new key (the database says so until its agent publishes one); an unknown name is refused', async () => {
    const run = await cli(['instances', 'rotate-key', instance]);
    assert.equal(run.code, 0, described(run));
    assert.match(run.stdout, new RegExp(`^engine instance ${instance}: a new key is asked for`, 'm'));
    const row = await getEngineInstanceByName(testDb.db, instance);
    assert.ok(row?.key_rotation_requested_at, 'the request is recorded');
    const listed = await cli(['instances', '-o', 'json']);
    const shown = json<{ instances: { name: string; role: string | null; keyRotationRequested: boolean }[] }>(
      listed,
    );
    assert.deepEqual(
      shown.instances.filter((i) => i.name === instance).map((i) => [i.role, i.keyRotationRequested]),
      [[role, true]],
    );
    const unknown = await cli(['instances', 'rotate-key', `nobody-${suffix}`]);
    assert.equal(unknown.code, 1, described(unknown));
    assert.match(unknown.stderr, /no engine instance nobody-\S+ is registered/);
  });
});
