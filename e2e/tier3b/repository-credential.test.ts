/**
 * Tier 3b, scenario 7: a private repository behind HTTP basic auth (the local HTTPS Git server), read by a
 * real Argo CD with the tenant's GitOpsDeploymentRepositoryCredential and by nobody else.
 */

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createGitRepo, manifest, startGitServer } from '@gitops/local-env';
import { useFixture } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import { syncedAndHealthy, useRealSystem } from '../fixture/real-argo-cd.ts';

const PASSWORD = 'tier3b-Pa55word-c0ffee';

describe('tier 3b: a private repository with a RepositoryCredential and a real Argo CD', () => {
  const git = useFixture(
    () => startGitServer(),
    (server) => server.stop(),
  );
  const f = useRealSystem(async () => ({
    trustedCertificates: { '127.0.0.1': await readFile(git.caFile, 'utf8') },
    caFile: git.caFile,
  }));

  it('deploys with the tenant’s credential; another tenant on the same URL without one cannot read it', async ({
    annotate,
  }) => {
    // Given a private repository (basic auth) holding a ConfigMap
    await createGitRepo(git.reposDir, 'private', {
      'dev/config.yaml': manifest.configMap('private-config', { secret: 'only-for-owners' }),
    });
    git.setPassword('private', 'jane', PASSWORD);
    const url = git.url('private');
    // and a tenant with a RepositoryCredential for it
    const owner = await f.given.tenant('owner');
    await f.given.repositoryCredential(
      owner,
      'private',
      { repository: url },
      { name: 'git-creds', credentials: { username: 'jane', password: PASSWORD } },
    );

    // When the tenant deploys from it
    const gd = await f.when.deployed(owner, 'private-app', { repoURL: url, path: 'dev' });
    // Then Argo CD reads it with the credential and deploys it
    await f.expect.deployment(gd).is('Synced/Healthy', syncedAndHealthy);
    const cm = await f.expect.object(owner, 'ConfigMap', 'private-config');
    assert.equal(cm.data?.secret, 'only-for-owners');

    // When another tenant deploys the same URL without a credential of its own
    const intruder = await f.given.tenant('intruder');
    const stolen = await f.when.deployed(intruder, 'stolen', { repoURL: url, path: 'dev' });
    // Then Argo CD cannot read it: a ComparisonError about authentication, and nothing is deployed
    const status = await f.expect
      .deployment(stolen)
      .is('a ComparisonError', (s) =>
        (s.conditions ?? []).some((c) => c.type === 'ComparisonError' && c.status === 'True'),
      );
    const condition = status.conditions?.find((c) => c.type === 'ComparisonError');
    await annotate(`Argo CD said: ${condition?.message}`);
    assert.match(condition?.message ?? '', /authentication required/);
    assert.notEqual(status.sync?.status, 'Synced');
    assert.equal(await f.expect.readObject(intruder, 'ConfigMap', 'private-config'), undefined);
    // and the password appears in no log line of any process
    assert.equal(f.logs.filter((l) => l.includes(PASSWORD)).length, 0);
  });
});
