import assert from 'node:assert/strict';
import { normalizeRepositoryUrl } from '@gitops/shared';
import { describe, it } from 'vitest';
import { allowsClusterResources } from '../argocd.ts';
import { renderAppProject, renderClusterAppProject } from './app-project.render.ts';

const tenant = {
  clusterUserId: '11111111-1111-4111-8111-111111111111',
  namespace: 'jane',
  applicationRepoUrls: [
    'https://github.com/Org/Repo.git',
    'https://github.com/org/repo/',
    'https://github.com/org/another',
  ],
  repositoryCredentialUrls: ['https://github.com/org/private'],
  clusterSecretEnvironmentIds: [
    'bbbbbbbb-0000-4000-8000-000000000000',
    'aaaaaaaa-0000-4000-8000-000000000000',
    'cccccccc-0000-4000-8000-000000000000',
  ],
  clusterScopedEnvironmentIds: [
    'cccccccc-0000-4000-8000-000000000000',
    'aaaaaaaa-0000-4000-8000-000000000000',
  ],
  namespaceCreatingEnvironmentIds: [] as string[],
};

/** The tenant's repos as both its projects list them: normalised, sorted, de-duplicated. */
const sourceRepos = [
  'https://github.com/org/another',
  'https://github.com/org/private',
  'https://github.com/org/repo',
];
/** A project of the tenant in Argo CD's namespace, labelled with the tenant's database id. */
const appProject = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'AppProject',
  metadata: {
    name,
    namespace: 'argocd',
    labels: { 'managed-gitops.redhat.com/database-id': '11111111-1111-4111-8111-111111111111' },
  },
  spec,
});

describe('renderAppProject', () => {
  it("lists the tenant's normalised, sorted, de-duplicated repos and its destinations", () => {
    assert.deepEqual(
      renderAppProject(tenant, 'argocd'),
      appProject('app-project-11111111-1111-4111-8111-111111111111', {
        sourceRepos,
        destinations: [
          { name: 'in-cluster', namespace: 'jane' },
          { name: 'managed-env-aaaaaaaa-0000-4000-8000-000000000000', namespace: '*' },
          { name: 'managed-env-bbbbbbbb-0000-4000-8000-000000000000', namespace: '*' },
          { name: 'managed-env-cccccccc-0000-4000-8000-000000000000', namespace: '*' },
        ],
      }),
    );
  });

  it('leaves out a withheld repository (a private chart repository without own credentials), yet the project stays while applications use it', () => {
    const charts = 'https://charts.example.com';
    const withheld = {
      ...tenant,
      applicationRepoUrls: [`${charts}/`],
      repositoryCredentialUrls: [],
      clusterSecretEnvironmentIds: [],
      withheldRepoUrls: [charts],
    };
    assert.deepEqual(
      (renderAppProject(withheld, 'argocd')?.spec as { sourceRepos?: string[] } | undefined)?.sourceRepos,
      [],
    );
    // with its own credentials for it, the tenant's project lists it
    const own = { ...withheld, repositoryCredentialUrls: [charts] };
    assert.deepEqual(
      (renderAppProject(own, 'argocd')?.spec as { sourceRepos?: string[] } | undefined)?.sourceRepos,
      [charts],
    );
  });

  it('has no cluster resource whitelist, whatever the environments allow (it lists in-cluster)', () => {
    const project = renderAppProject(tenant, 'argocd');
    assert.equal((project!.spec as Record<string, unknown>).clusterResourceWhitelist, undefined);
  });

  it('is undefined (deleted) when the tenant has no application, External environment or credential left', () => {
    assert.equal(
      renderAppProject(
        {
          ...tenant,
          applicationRepoUrls: [],
          repositoryCredentialUrls: [],
          clusterSecretEnvironmentIds: [],
          clusterScopedEnvironmentIds: [],
          namespaceCreatingEnvironmentIds: [],
        },
        'argocd',
      ),
      undefined,
    );
  });

  it('the cluster-resource project lists only the environments that allow cluster resources, never in-cluster', () => {
    assert.deepEqual(
      renderClusterAppProject(tenant, 'argocd'),
      appProject('app-project-11111111-1111-4111-8111-111111111111-cluster', {
        sourceRepos,
        destinations: [
          { name: 'managed-env-aaaaaaaa-0000-4000-8000-000000000000', namespace: '*' },
          { name: 'managed-env-cccccccc-0000-4000-8000-000000000000', namespace: '*' },
        ],
        clusterResourceWhitelist: [{ group: '*', kind: '*' }],
      }),
    );
  });

  it('has no cluster-resource project (deleted) when no environment allows cluster resources', () => {
    assert.equal(
      renderClusterAppProject({ ...tenant, clusterScopedEnvironmentIds: [] }, 'argocd'),
      undefined,
    );
    // an id that is not one of the tenant's External environments is ignored
    assert.equal(
      renderClusterAppProject(
        { ...tenant, clusterScopedEnvironmentIds: ['dddddddd-0000-4000-8000-000000000000'] },
        'argocd',
      ),
      undefined,
    );
  });

  it('the cluster-resource project also lists an environment deployed through with CreateNamespace=true', () => {
    const project = renderClusterAppProject(
      {
        ...tenant,
        clusterScopedEnvironmentIds: ['cccccccc-0000-4000-8000-000000000000'],
        namespaceCreatingEnvironmentIds: [
          'bbbbbbbb-0000-4000-8000-000000000000',
          'cccccccc-0000-4000-8000-000000000000',
          // not one of the tenant's External environments: ignored
          'dddddddd-0000-4000-8000-000000000000',
        ],
      },
      'argocd',
    );
    assert.deepEqual((project!.spec as Record<string, unknown>).destinations, [
      { name: 'managed-env-bbbbbbbb-0000-4000-8000-000000000000', namespace: '*' },
      { name: 'managed-env-cccccccc-0000-4000-8000-000000000000', namespace: '*' },
    ]);
    const onlyNamespaces = renderClusterAppProject(
      {
        ...tenant,
        clusterScopedEnvironmentIds: [],
        namespaceCreatingEnvironmentIds: ['bbbbbbbb-0000-4000-8000-000000000000'],
      },
      'argocd',
    );
    assert.deepEqual((onlyNamespaces!.spec as Record<string, unknown>).destinations, [
      { name: 'managed-env-bbbbbbbb-0000-4000-8000-000000000000', namespace: '*' },
    ]);
  });

  it('an environment allows cluster resources without a namespaces list or with clusterResources', () => {
    assert.equal(allowsClusterResources({ namespaces: [], clusterResources: false }), true);
    assert.equal(allowsClusterResources({ namespaces: ['a'], clusterResources: true }), true);
    assert.equal(allowsClusterResources({ namespaces: ['a'], clusterResources: false }), false);
  });

  it('normalises repo URLs like Argo CD compares them', () => {
    assert.equal(normalizeRepositoryUrl(' https://GitHub.com/Org/Repo.git/ '), 'https://github.com/org/repo');
    assert.equal(normalizeRepositoryUrl('git@github.com:org/repo.git'), 'git@github.com:org/repo');
  });
});
