/**
 * Tier 3a: GitOpsDeploymentRepositoryCredential → validated against a real Git HTTPS server (git
 * http-backend behind basic auth) → project-scoped Argo CD repository Secret, with backend and cluster-agent
 * running as separate processes.
 */

import assert from 'node:assert/strict';
import { repositoryCredential } from '@gitops/api/testing';
import { type GitServer, startGitServer } from '@gitops/local-env';
import type { KubeObject } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  create,
  GROUP_VERSION,
  get,
  list,
  mergePatch,
  paths,
  type RepositoryCredential,
  remove,
} from '../fixture/kube.ts';
import { usePlayedArgoCdSystem } from '../fixture/played-argo-cd.ts';

const BACKEND_SHARD_LABEL = 'managed-gitops.redhat.com/backend-shard';
const SECRET_TYPE = 'managed-gitops.redhat.com/repository-credential';
const PASSWORD = 'first-Pa55word-9d1c';
const ROTATED_PASSWORD = 'rotated-Pa55word-4e7a';
const WRONG_PASSWORD = 'wrong-Pa55word-77f0';

interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

const repoCredPath = (ns: string, name?: string) =>
  `/apis/${GROUP_VERSION}/namespaces/${ns}/gitopsdeploymentrepositorycredentials${name ? `/${name}` : ''}`;
const secretPath = (ns: string, name?: string) => `/api/v1/namespaces/${ns}/secrets${name ? `/${name}` : ''}`;
const decode = (data: Record<string, string> | undefined) =>
  Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );

/** [type, status, reason] of each condition, in order. */
const summary = (rc: RepositoryCredential | undefined) =>
  (rc?.status?.conditions ?? []).map((c) => [c.type, c.status, c.reason]);

const VALID = [
  ['ErrorOccurred', 'False', 'RepositoryCredentialUpToDate'],
  ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl'],
  ['ValidRepositoryCredential', 'True', 'RepositoryCredentialUpToDate'],
];
const failed = (reason: string) => [
  ['ErrorOccurred', 'True', reason],
  ['ValidRepositoryURL', 'False', reason],
  ['ValidRepositoryCredential', 'False', reason],
];

describe('GitOpsDeploymentRepositoryCredential (tier 3a)', () => {
  const f = usePlayedArgoCdSystem({ start: [] });
  let git: GitServer;
  let tenantA: string;
  let tenantB: string;

  beforeAll(async () => {
    git = await startGitServer();
    await git.createRepository('private', { username: 'jane', password: PASSWORD });
    await git.createRepository('rotating', { username: 'jane', password: PASSWORD });
    await f.system.start('backend', { GIT_SSL_CAINFO: git.caFile });
    await f.system.start('cluster-agent');
    tenantA = await f.given.tenant();
    tenantB = await f.given.tenant();
  });
  afterAll(async () => {
    await git?.stop();
  });

  const createSecret = (ns: string, name: string, stringData: Record<string, string>, type = SECRET_TYPE) =>
    create(f.system.kc, secretPath(ns), { metadata: { name }, type, stringData });
  const createRepoCred = (ns: string, name: string, spec: Record<string, string>) =>
    create<RepositoryCredential>(
      f.system.kc,
      repoCredPath(ns),
      repositoryCredential(name, spec as unknown as Parameters<typeof repositoryCredential>[1], {
        labels: { [BACKEND_SHARD_LABEL]: f.system.shard },
      }),
    );
  const conditionsBecome = (ns: string, name: string, expected: string[][]) =>
    eventually(`${ns}/${name} conditions ${JSON.stringify(expected)}`, async () => {
      const rc = await get<RepositoryCredential>(f.system.kc, repoCredPath(ns, name));
      return JSON.stringify(summary(rc)) === JSON.stringify(expected) ? rc : undefined;
    });
  const rowOf = (ns: string, name: string) =>
    eventually(`repository_credentials row of ${ns}/${name}`, () =>
      f.system.db
        .selectFrom('api_cr_mapping')
        .innerJoin(
          'repository_credentials',
          'repository_credentials.id',
          'api_cr_mapping.repository_credentials_id',
        )
        .select(['repository_credentials.id', 'repository_credentials.cluster_user_id'])
        .where('cr_namespace', '=', ns)
        .where('cr_name', '=', name)
        .executeTakeFirst(),
    );
  const repoSecret = (id: string) =>
    get<Secret>(f.system.kc, secretPath(f.system.argoCdNamespace, `repo-cred-${id}`));
  const repoSecretGone = (id: string, what = 'repository Secret deleted') =>
    eventually(what, async () => ((await repoSecret(id)) ? undefined : true));
  /**
   * Given jane's Secret `<name>-creds` and a RepositoryCredential `name` of `repository` with it: valid, with its
   * row and its Argo CD repository Secret. Returns the row.
   */
  async function validCredential(name: string, repository = 'private') {
    await createSecret(tenantA, `${name}-creds`, { username: 'jane', password: PASSWORD });
    await createRepoCred(tenantA, name, { repository: git.url(repository), secret: `${name}-creds` });
    await conditionsBecome(tenantA, name, VALID);
    const row = await rowOf(tenantA, name);
    await eventually('repository Secret', () => repoSecret(row.id));
    return row;
  }

  it('valid credentials: the valid triple, and a project-scoped Argo CD repository Secret with them', async () => {
    await createSecret(tenantA, 'private-creds', { username: 'jane', password: PASSWORD });
    await createRepoCred(tenantA, 'private', { repository: git.url('private'), secret: 'private-creds' });
    const rc = await conditionsBecome(tenantA, 'private', VALID);
    const conditions = rc.status!.conditions!;
    assert.equal(conditions[0]!.message, 'RepositoryCredentials are Valid');
    assert.equal(conditions[1]!.message, `Repository ${git.url('private')} exists`);

    const row = await rowOf(tenantA, 'private');
    const secret = await eventually('repository Secret', () => repoSecret(row.id));
    assert.equal(secret.metadata.labels?.['argocd.argoproj.io/secret-type'], 'repository');
    assert.equal(secret.metadata.labels?.['managed-gitops.redhat.com/database-id'], row.id);
    assert.deepEqual(decode(secret.data), {
      url: git.url('private'),
      username: 'jane',
      password: PASSWORD,
      project: `app-project-${row.cluster_user_id}`,
    });
    const project = await eventually('AppProject with the repository', async () => {
      const p = await get<KubeObject & { spec?: { sourceRepos?: string[] } }>(
        f.system.kc,
        paths.appProject(f.system.argoCdNamespace, `app-project-${row.cluster_user_id}`),
      );
      return p?.spec?.sourceRepos?.includes(git.url('private').replace(/\.git$/, '')) ? p : undefined;
    });
    // The tenant's own project, listing the repository once, normalised (no .git), as Argo CD compares URLs.
    assert.equal(project.metadata.labels?.['managed-gitops.redhat.com/database-id'], row.cluster_user_id);
    const normalised = git.url('private').replace(/\.git$/, '');
    assert.equal(project.spec?.sourceRepos?.filter((r) => r === normalised).length, 1);
  });

  it('a wrong password is InvalidCredentials with ValidRepositoryURL True; fixing the Secret makes it valid', async () => {
    await createSecret(tenantA, 'wrong-creds', { username: 'jane', password: WRONG_PASSWORD });
    await createRepoCred(tenantA, 'wrong', { repository: git.url('private'), secret: 'wrong-creds' });
    const rc = await conditionsBecome(tenantA, 'wrong', [
      ['ErrorOccurred', 'True', 'InvalidCredentials'],
      ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl'],
      ['ValidRepositoryCredential', 'False', 'InvalidCredentials'],
    ]);
    assert.equal(rc.status!.conditions![1]!.message, `Repository ${git.url('private')} exists`);
    await mergePatch(f.system.kc, secretPath(tenantA, 'wrong-creds'), { stringData: { password: PASSWORD } });
    await conditionsBecome(tenantA, 'wrong', VALID);
  });

  it('an unknown repository is InvalidRepositoryUrl (spec.url alias accepted)', async () => {
    await createSecret(tenantA, 'unknown-creds', { username: 'jane', password: PASSWORD });
    await createRepoCred(tenantA, 'unknown', { url: git.url('does-not-exist'), secret: 'unknown-creds' });
    await conditionsBecome(tenantA, 'unknown', failed('InvalidRepositoryUrl'));
  });

  it('a missing Secret is SecretNotFound until the Secret is created', async () => {
    await createRepoCred(tenantA, 'later', { repository: git.url('private'), secret: 'later-creds' });
    await conditionsBecome(tenantA, 'later', failed('SecretNotFound'));
    await createSecret(tenantA, 'later-creds', { username: 'jane', password: PASSWORD });
    await conditionsBecome(tenantA, 'later', VALID);
  });

  it('a Secret of another type is SecretInvalidType; an empty secret name is SecretNotSpecified', async () => {
    // Opaque (no type) is accepted, as the public API document shows it; a basic-auth Secret is not.
    await createSecret(
      tenantA,
      'basic-auth-creds',
      { username: 'jane', password: PASSWORD },
      'kubernetes.io/basic-auth',
    );
    await createRepoCred(tenantA, 'basic-auth', {
      repository: git.url('private'),
      secret: 'basic-auth-creds',
    });
    await conditionsBecome(tenantA, 'basic-auth', failed('SecretInvalidType'));
    await createRepoCred(tenantA, 'unnamed', { repository: git.url('private'), secret: '' });
    await conditionsBecome(tenantA, 'unnamed', failed('SecretNotSpecified'));
  });

  it("tenant A cannot use tenant B's Secret: references resolve in the own namespace only", async () => {
    await createSecret(tenantB, 'b-only-creds', { username: 'jane', password: PASSWORD });
    await createRepoCred(tenantA, 'borrow', { repository: git.url('private'), secret: 'b-only-creds' });
    await conditionsBecome(tenantA, 'borrow', failed('SecretNotFound'));
    const rows = await f.system.db
      .selectFrom('api_cr_mapping')
      .select('repository_credentials_id')
      .where('cr_namespace', '=', tenantA)
      .where('cr_name', '=', 'borrow')
      .execute();
    assert.deepEqual(rows, []);
  });

  it('a password rotation reaches the Argo CD Secret; deleting the CR removes it', async () => {
    const row = await validCredential('rotating', 'rotating');

    git.setPassword('rotating', 'jane', ROTATED_PASSWORD);
    await mergePatch(f.system.kc, secretPath(tenantA, 'rotating-creds'), {
      stringData: { password: ROTATED_PASSWORD },
    });
    await eventually('rotated password in the Argo CD Secret', async () => {
      const secret = await repoSecret(row.id);
      return decode(secret?.data).password === ROTATED_PASSWORD ? secret : undefined;
    });
    await conditionsBecome(tenantA, 'rotating', VALID);

    await remove(f.system.kc, repoCredPath(tenantA, 'rotating'));
    await repoSecretGone(row.id);
  });

  it('delete and re-create with the same name is a new object: the old repository Secret goes, a new one comes', async () => {
    await createSecret(tenantA, 'again-creds', { username: 'jane', password: PASSWORD });
    const first = await createRepoCred(tenantA, 'again', {
      repository: git.url('private'),
      secret: 'again-creds',
    });
    await conditionsBecome(tenantA, 'again', VALID);
    const oldRow = await rowOf(tenantA, 'again');
    await eventually('first repository Secret', () => repoSecret(oldRow.id));
    await remove(f.system.kc, repoCredPath(tenantA, 'again'));
    await eventually('first CR gone', async () =>
      (await get(f.system.kc, repoCredPath(tenantA, 'again'))) ? undefined : true,
    );
    const second = await createRepoCred(tenantA, 'again', {
      repository: git.url('private'),
      secret: 'again-creds',
    });
    assert.notEqual(second.metadata.uid, first.metadata.uid);
    await conditionsBecome(tenantA, 'again', VALID);
    const newRow = await eventually('row of the new incarnation', async () => {
      const row = await rowOf(tenantA, 'again');
      return row.id !== oldRow.id ? row : undefined;
    });
    await eventually('new repository Secret', () => repoSecret(newRow.id));
    await repoSecretGone(oldRow.id, 'old repository Secret deleted');
  });

  it('deleting the user Secret removes the Argo CD Secret and reports SecretNotFound', async () => {
    const row = await validCredential('doomed');
    await remove(f.system.kc, secretPath(tenantA, 'doomed-creds'));
    await conditionsBecome(tenantA, 'doomed', failed('SecretNotFound'));
    await repoSecretGone(row.id);
  });

  it('the agent repairs a hand-edited or deleted repository Secret and deletes orphans carrying our label', async () => {
    const row = await validCredential('drift');

    await mergePatch(f.system.kc, secretPath(f.system.argoCdNamespace, `repo-cred-${row.id}`), {
      data: {
        password: Buffer.from('tampered').toString('base64'),
        extra: Buffer.from('x').toString('base64'),
      },
    });
    await eventually('edited repository Secret repaired', async () => {
      const data = decode((await repoSecret(row.id))?.data);
      return data.password === PASSWORD && data.extra === undefined ? true : undefined;
    });
    await remove(f.system.kc, secretPath(f.system.argoCdNamespace, `repo-cred-${row.id}`));
    await eventually('deleted repository Secret re-created', async () =>
      decode((await repoSecret(row.id))?.data).password === PASSWORD ? true : undefined,
    );

    const orphanId = '00000000-0000-4000-8000-0000000000aa';
    await create(f.system.kc, secretPath(f.system.argoCdNamespace), {
      metadata: {
        name: `repo-cred-${orphanId}`,
        labels: {
          'argocd.argoproj.io/secret-type': 'repository',
          'managed-gitops.redhat.com/database-id': orphanId,
        },
      },
      stringData: { url: 'https://example.com/orphan' },
    });
    await repoSecretGone(orphanId, 'orphan deleted');
  });

  it('no password appears in any log line, Event, condition or operation message', async () => {
    const secrets = [PASSWORD, ROTATED_PASSWORD, WRONG_PASSWORD];
    for (const line of f.system.logs) {
      for (const s of secrets)
        assert.ok(!line.includes(s), `a log line contains a password: ${line.slice(0, 80)}`);
    }
    for (const ns of [tenantA, tenantB]) {
      const events = await list<KubeObject & { message?: string }>(
        f.system.kc,
        `/api/v1/namespaces/${ns}/events`,
      );
      if (ns === tenantA) assert.ok(events.length > 0, 'the RepositoryCredentials recorded Events');
      for (const e of events) for (const s of secrets) assert.ok(!(e.message ?? '').includes(s));
      const crs = await list<RepositoryCredential>(f.system.kc, repoCredPath(ns));
      for (const cr of crs) {
        const text = JSON.stringify(cr.status ?? {});
        for (const s of secrets) assert.ok(!text.includes(s));
      }
    }
    const operations = await f.system.db.selectFrom('operation').select('message').execute();
    assert.ok(operations.length > 0);
    for (const op of operations) for (const s of secrets) assert.ok(!op.message.includes(s));
  });
});
