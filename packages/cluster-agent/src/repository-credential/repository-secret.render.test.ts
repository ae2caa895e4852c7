import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import {
  type RepositorySecretInput,
  renderRepositorySecret,
  renderRepositorySecrets,
  repositorySecretDrifted,
} from './repository-secret.render.ts';

const ID = '11111111-2222-3333-4444-555555555555';
const USER = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee';
/** A row with username and password, rendered into Argo CD's namespace. */
const withPassword: RepositorySecretInput = {
  id: ID,
  clusterUserId: USER,
  repositoryUrl: 'https://h/r.git',
  username: 'u',
  password: 'p',
  namespace: 'argocd',
};
const decode = (data: Record<string, string>) =>
  Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));

describe('repository Secret render', () => {
  it('is repo-cred-<id>, labelled as an Argo CD repository, and scoped to the tenant AppProject', () => {
    const secret = renderRepositorySecret(withPassword);
    assert.equal(secret.metadata.name, `repo-cred-${ID}`);
    assert.equal(secret.metadata.namespace, 'argocd');
    assert.equal(secret.metadata.labels?.['argocd.argoproj.io/secret-type'], 'repository');
    assert.equal(secret.metadata.labels?.['managed-gitops.redhat.com/database-id'], ID);
    assert.deepEqual(decode(secret.data), {
      url: 'https://h/r.git',
      project: `app-project-${USER}`,
      username: 'u',
      password: 'p',
    });
  });

  it("a Helm repository's or an OCI registry's Secret says its type, as Argo CD reads it; a Git one has none (Argo CD's default)", () => {
    for (const repositoryType of ['helm', 'oci'] as const) {
      const secret = renderRepositorySecret({ ...withPassword, repositoryUrl: 'https://c', repositoryType });
      assert.equal(decode(secret.data).type, repositoryType);
    }
    assert.equal(
      decode(renderRepositorySecret({ ...withPassword, repositoryType: 'git' }).data).type,
      undefined,
    );
  });

  it('a row has one Secret per tenant AppProject, the same credentials in both', () => {
    const [main, cluster] = renderRepositorySecrets(withPassword);
    assert.equal(main?.metadata.name, `repo-cred-${ID}`);
    assert.equal(cluster?.metadata.name, `repo-cred-${ID}-cluster`);
    assert.equal(cluster?.metadata.labels?.['managed-gitops.redhat.com/database-id'], ID);
    assert.deepEqual(decode(cluster!.data), {
      url: 'https://h/r.git',
      project: `app-project-${USER}-cluster`,
      username: 'u',
      password: 'p',
    });
    assert.equal(decode(main!.data).project, `app-project-${USER}`);
  });

  it('carries sshPrivateKey instead of username/password', () => {
    const secret = renderRepositorySecret({
      id: ID,
      clusterUserId: USER,
      repositoryUrl: 'git@h:r.git',
      sshPrivateKey: 'KEY',
      namespace: 'argocd',
    });
    assert.deepEqual(Object.keys(secret.data).sort(), ['project', 'sshPrivateKey', 'url']);
  });

  it('detects drift in data and labels, including keys someone added', () => {
    const desired = renderRepositorySecret({ ...withPassword, repositoryUrl: 'https://h/r' });
    assert.equal(repositorySecretDrifted(undefined, desired), true);
    assert.equal(repositorySecretDrifted(structuredClone(desired), desired), false);
    const edited = structuredClone(desired);
    edited.data.password = Buffer.from('other').toString('base64');
    assert.equal(repositorySecretDrifted(edited, desired), true);
    const extra = structuredClone(desired);
    extra.data.proxy = 'eA==';
    assert.equal(repositorySecretDrifted(extra, desired), true);
    const relabelled = structuredClone(desired);
    relabelled.metadata.labels = {};
    assert.equal(repositorySecretDrifted(relabelled, desired), true);
  });
});
