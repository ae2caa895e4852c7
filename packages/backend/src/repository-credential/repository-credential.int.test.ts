import assert from 'node:assert/strict';
import { API_GROUP_VERSION } from '@gitops/api';
import { repositoryCredential } from '@gitops/api/testing';
import { completeOperation, failOperation, startOperation } from '@gitops/db';
import { type GitServer, startGitServer } from '@gitops/local-env';
import { HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, test } from 'vitest';
import type { Backend } from '../app.ts';
import { BACKEND_SHARD_LABEL } from '../config.ts';
import { type BackendFixture, createBackendFixture } from '../testing/backend-fixture.ts';
import { SealContext } from './repository-credential.store.ts';

const PASSWORD = 'int-Pa55word-1';
const ROTATED = 'int-Pa55word-2';

describe('RepositoryCredential reconciler', () => {
  let f: BackendFixture;
  let backend: Backend;
  let git: GitServer;
  let tenant: { name: string; uid: string };
  let previousCa: string | undefined;

  beforeAll(async () => {
    git = await startGitServer();
    await git.createRepository('team', { username: 'jane', password: PASSWORD });
    previousCa = process.env.GIT_SSL_CAINFO;
    process.env.GIT_SSL_CAINFO = git.caFile; // the in-process backend's git ls-remote trusts the test server
    f = await createBackendFixture();
    backend = await f.startBackend();
    tenant = await f.createNamespace();
  });
  afterAll(async () => {
    await f?.cleanup();
    await git?.stop();
    if (previousCa === undefined) delete process.env.GIT_SSL_CAINFO;
    else process.env.GIT_SSL_CAINFO = previousCa;
  });

  const crPath = (name = '') =>
    `/apis/${API_GROUP_VERSION}/namespaces/${tenant.name}/gitopsdeploymentrepositorycredentials${name ? `/${name}` : ''}`;
  const secretPath = (name = '') => `/api/v1/namespaces/${tenant.name}/secrets${name ? `/${name}` : ''}`;
  const operationsOf = (resourceId: string) => f.operationsOf(resourceId);
  const rowOfCr = (uid: string) => f.repositoryCredentialsRowOf(uid);
  /** The user's Secret with the credentials, of the type this service reads. */
  const createCredentialsSecret = (name: string, stringData: Record<string, string>) =>
    kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: secretPath(),
      body: { metadata: { name }, type: 'managed-gitops.redhat.com/repository-credential', stringData },
    });
  /** A RepositoryCredential, labelled for this fixture's backend shard. */
  const createCredential = async (name: string, spec: { repository: string; secret: string }) =>
    (await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: crPath(),
      body: repositoryCredential(name, spec, { labels: { [BACKEND_SHARD_LABEL]: f.runLabel } }),
    })) as KubeObject;

  test('one transaction writes the sealed row, its mapping and a RepositoryCredentials operation owned by the CR; a rotation writes one more', async () => {
    await createCredentialsSecret('team-creds', { username: 'jane', password: PASSWORD });
    const cr = await createCredential('team', { repository: git.url('team'), secret: 'team-creds' });
    const row = await rowOfCr(cr.metadata.uid!);
    assert.equal(row.repository_url, git.url('team'));
    assert.equal(row.normalized_repository_url, git.url('team').replace(/\.git$/, ''));
    assert.equal(row.secret_name, 'team-creds');
    assert.ok(row.password_sealed && !row.password_sealed.toString('latin1').includes(PASSWORD));
    assert.equal(backend.sealer.openString(row.password_sealed, SealContext.password), PASSWORD);
    assert.equal(backend.sealer.openString(row.username_sealed!, SealContext.username), 'jane');
    assert.equal(row.ssh_private_key_sealed, null);

    const operations = await operationsOf(row.id);
    assert.equal(operations.length, 1);
    assert.equal(operations[0]!.resource_type, 'RepositoryCredentials');
    assert.equal(operations[0]!.owner_kind, 'GitOpsDeploymentRepositoryCredential');
    assert.equal(operations[0]!.owner_uid, cr.metadata.uid);
    assert.equal(operations[0]!.owner_user_id, row.cluster_user_id);

    // The valid triple, then a rotation: exactly one more operation, the row holds the new password.
    await eventually('valid conditions', async () => {
      const live = (await kubeRequest(f.kc, { method: HttpMethod.GET, path: crPath('team') })) as {
        status?: { conditions?: { type: string; status: string }[] };
      };
      return live.status?.conditions?.[2]?.status === 'True';
    });
    // What the agent does with the operation (a Waiting one would be reused by the next change).
    assert.equal((await startOperation(f.db, operations[0]!.id)).status, 'started');
    assert.ok(await completeOperation(f.db, operations[0]!.id, ''));
    git.setPassword('team', 'jane', ROTATED);
    await kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: secretPath('team-creds'),
      body: { stringData: { password: ROTATED } },
      contentType: 'application/merge-patch+json',
    });
    await eventually('rotated row', async () => {
      const current = await rowOfCr(cr.metadata.uid!);
      return backend.sealer.openString(current.password_sealed!, SealContext.password) === ROTATED;
    });
    const rotated = await operationsOf(row.id);
    assert.equal(rotated.length, 2);
    assert.equal((await startOperation(f.db, rotated[1]!.id)).status, 'started');
    assert.ok(await completeOperation(f.db, rotated[1]!.id, ''));

    // Deleting the CR deletes the row (and its mapping) and announces it.
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: crPath('team') });
    await eventually('row deleted', async () => {
      const gone = await f.db
        .selectFrom('repository_credentials')
        .select('id')
        .where('id', '=', row.id)
        .executeTakeFirst();
      return gone === undefined;
    });
    const afterDelete = await operationsOf(row.id);
    assert.equal(afterDelete.length, 3);
    assert.equal(afterDelete[2]!.owner_uid, cr.metadata.uid);
    const mapping = await f.db
      .selectFrom('api_cr_mapping')
      .select('id')
      .where('cr_uid', '=', cr.metadata.uid!)
      .executeTakeFirst();
    assert.equal(mapping, undefined);
  });

  const conditionsOf = async (name: string) => {
    const live = (await kubeRequest(f.kc, { method: HttpMethod.GET, path: crPath(name) })) as {
      status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
    };
    return (live.status?.conditions ?? []).map((c) => [c.type, c.status, c.reason, c.message]);
  };
  /** The three conditions once the first (ErrorOccurred) has `reason`. */
  const firstReasonBecomes = (name: string, reason: string) =>
    eventually(`${name}: ErrorOccurred reason ${reason}`, async () => {
      const conditions = await conditionsOf(name);
      if (conditions[0]?.[2] !== reason) throw new Error(`conditions: ${JSON.stringify(conditions)}`);
      return conditions;
    });

  test("the public API document's YAML works: a Secret without a type (url, username, password) and spec.url; editing that Secret is seen at once", async () => {
    await git.createRepository('documented', { username: 'jane', password: PASSWORD });
    // As the document shows them: no `type` (the API server makes it Opaque), a `url` key next to the credentials.
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: secretPath(),
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'private-repo-creds-secret' },
        stringData: { url: git.url('documented'), username: 'jane', password: PASSWORD },
      },
    });
    const cr = (await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: crPath(),
      body: {
        apiVersion: API_GROUP_VERSION,
        kind: 'GitOpsDeploymentRepositoryCredential',
        metadata: { name: 'private-repo-creds', labels: { [BACKEND_SHARD_LABEL]: f.runLabel } },
        spec: { url: git.url('documented'), secret: 'private-repo-creds-secret' },
      },
    })) as KubeObject;
    const valid = [
      ['ErrorOccurred', 'False', 'RepositoryCredentialUpToDate', 'RepositoryCredentials are Valid'],
      ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl', `Repository ${git.url('documented')} exists`],
      [
        'ValidRepositoryCredential',
        'True',
        'RepositoryCredentialUpToDate',
        'RepositoryCredentials are Valid',
      ],
    ];
    assert.deepEqual(await firstReasonBecomes('private-repo-creds', 'RepositoryCredentialUpToDate'), valid);
    const row = await rowOfCr(cr.metadata.uid!);
    assert.equal(backend.sealer.openString(row.password_sealed!, SealContext.password), PASSWORD);
    assert.equal(backend.sealer.openString(row.username_sealed!, SealContext.username), 'jane');

    // A valid credential is re-validated only every 10 min: only the Secret's watch event can bring this.
    await kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: secretPath('private-repo-creds-secret'),
      body: { stringData: { password: 'not-the-password' } },
      contentType: 'application/merge-patch+json',
    });
    const rejected = await firstReasonBecomes('private-repo-creds', 'InvalidCredentials');
    assert.deepEqual(
      rejected.map((c) => c.slice(0, 3)),
      [
        ['ErrorOccurred', 'True', 'InvalidCredentials'],
        ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl'],
        ['ValidRepositoryCredential', 'False', 'InvalidCredentials'],
      ],
    );

    // An Opaque Secret without the documented keys is still refused, naming what is missing.
    await kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: secretPath(),
      body: { metadata: { name: 'unrelated-opaque' }, stringData: { token: 'abc' } },
    });
    await createCredential('unrelated', { repository: git.url('documented'), secret: 'unrelated-opaque' });
    const message =
      "Secret 'unrelated-opaque' is invalid: it must contain username and password, or sshPrivateKey";
    assert.deepEqual(await firstReasonBecomes('unrelated', 'SecretInvalidType'), [
      ['ErrorOccurred', 'True', 'SecretInvalidType', message],
      ['ValidRepositoryURL', 'False', 'SecretInvalidType', message],
      ['ValidRepositoryCredential', 'False', 'SecretInvalidType', message],
    ]);
  });

  test('a Failed RepositoryCredentials operation is reported in ErrorOccurred; the validation conditions stay', async () => {
    await createCredentialsSecret('failing-creds', { username: 'jane', password: ROTATED });
    const cr = await createCredential('failing', { repository: git.url('team'), secret: 'failing-creds' });
    const row = await rowOfCr(cr.metadata.uid!);
    const [operation] = await operationsOf(row.id);
    assert.equal((await startOperation(f.db, operation!.id)).status, 'started');
    assert.ok(await failOperation(f.db, operation!.id, 'the repository Secret could not be applied'));
    const conditions = await eventually('ErrorOccurred from the failed operation', async () => {
      const live = (await kubeRequest(f.kc, { method: HttpMethod.GET, path: crPath('failing') })) as {
        status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
      };
      const list = live.status?.conditions ?? [];
      return list[0]?.reason === 'ErrorOccurred' ? list : undefined;
    });
    assert.deepEqual(
      conditions.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        [
          'ErrorOccurred',
          'True',
          'ErrorOccurred',
          'the Argo CD repository Secret could not be updated: the repository Secret could not be applied',
        ],
        ['ValidRepositoryURL', 'True', 'ValidRepositoryUrl', `Repository ${git.url('team')} exists`],
        [
          'ValidRepositoryCredential',
          'True',
          'RepositoryCredentialUpToDate',
          'RepositoryCredentials are Valid',
        ],
      ],
    );
  });
  test("a replica whose cache still shows an earlier RepositoryCredential of the name leaves the current one's row alone", async () => {
    await git.createRepository('again', { username: 'joe', password: PASSWORD });
    await createCredentialsSecret('again-creds', { username: 'joe', password: PASSWORD });
    const first = await createCredential('again', { repository: git.url('again'), secret: 'again-creds' });
    const firstRow = await rowOfCr(first.metadata.uid!);
    // Replica B holds the first incarnation; its watch then stops, so nothing newer reaches it.
    const b = await f.startBackend();
    await eventually('replica B caches it', () =>
      b.repositoryCredentials.informer.get(tenant.name, 'again') ? true : undefined,
    );
    await b.repositoryCredentials.informer.stop();
    await b.repositoryCredentials.queue.whenIdle();
    await kubeRequest(f.kc, { method: HttpMethod.DELETE, path: crPath('again') });
    await eventually('the first row deleted', async () =>
      (await f.db
        .selectFrom('repository_credentials')
        .select('id')
        .where('id', '=', firstRow.id)
        .executeTakeFirst())
        ? undefined
        : true,
    );
    const second = await createCredential('again', { repository: git.url('again'), secret: 'again-creds' });
    const secondRow = await rowOfCr(second.metadata.uid!);

    b.repositoryCredentials.enqueueAll();
    await b.repositoryCredentials.queue.whenIdle();
    await f.stopBackend(b);
    const left = await f.db
      .selectFrom('repository_credentials')
      .selectAll()
      .where('id', '=', secondRow.id)
      .executeTakeFirst();
    assert.deepEqual(left, secondRow, "B deleted the current RepositoryCredential's row");
  });
});
