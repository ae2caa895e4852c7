import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { normaliseRepoUrl, renderAppProject } from './app-project.render.ts';

const tenant = {
  clusterUserId: '11111111-1111-4111-8111-111111111111',
  namespace: 'jane',
  applicationRepoUrls: [
    'https://github.com/Org/Repo.git',
    'https://github.com/org/repo/',
    'https://github.com/org/another',
  ],
  repositoryCredentialUrls: ['https://github.com/org/private'],
  externalEnvironmentIds: ['bbbbbbbb-0000-4000-8000-000000000000', 'aaaaaaaa-0000-4000-8000-000000000000'],
};

describe('renderAppProject', () => {
  it("lists the tenant's normalised, sorted, de-duplicated repos and its destinations", () => {
    assert.deepEqual(renderAppProject(tenant, 'argocd'), {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'AppProject',
      metadata: {
        name: 'app-project-11111111-1111-4111-8111-111111111111',
        namespace: 'argocd',
        labels: { 'managed-gitops.redhat.com/database-id': '11111111-1111-4111-8111-111111111111' },
      },
      spec: {
        sourceRepos: [
          'https://github.com/org/another',
          'https://github.com/org/private',
          'https://github.com/org/repo',
        ],
        destinations: [
          { name: 'in-cluster', namespace: 'jane' },
          { name: 'managed-env-aaaaaaaa-0000-4000-8000-000000000000', namespace: '*' },
          { name: 'managed-env-bbbbbbbb-0000-4000-8000-000000000000', namespace: '*' },
        ],
      },
    });
  });

  it('has no cluster resource whitelist', () => {
    const project = renderAppProject(tenant, 'argocd');
    assert.equal((project!.spec as Record<string, unknown>).clusterResourceWhitelist, undefined);
  });

  it('is undefined (deleted) when the tenant has no application, External environment or credential left', () => {
    assert.equal(
      renderAppProject(
        { ...tenant, applicationRepoUrls: [], repositoryCredentialUrls: [], externalEnvironmentIds: [] },
        'argocd',
      ),
      undefined,
    );
  });

  it('normalises repo URLs like Argo CD compares them', () => {
    assert.equal(normaliseRepoUrl(' https://GitHub.com/Org/Repo.git/ '), 'https://github.com/org/repo');
    assert.equal(normaliseRepoUrl('git@github.com:org/repo.git'), 'git@github.com:org/repo');
  });
});
