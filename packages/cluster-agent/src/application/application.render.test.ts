import assert from 'node:assert/strict';
import { TerminalError } from '@gitops/shared';
import { describe, it } from 'vitest';
import {
  applicationProjectName,
  type DestinationEnvironment,
  destinationName,
  environmentOf,
  renderApplication,
} from './application.render.ts';

const automatedSpec = {
  source: { repoURL: 'https://github.com/org/repo', path: 'env/dev', targetRevision: 'main' },
  destination: { namespace: 'jane' },
  syncPolicy: {
    automated: { prune: true, selfHeal: true, allowEmpty: true },
    syncOptions: ['PrunePropagationPolicy=background', 'CreateNamespace=true'],
    retry: { limit: -1, backoff: { duration: '5s', factor: 2, maxDuration: '3m' } },
  },
};

const input = {
  id: '22222222-2222-4222-8222-222222222222',
  name: 'gitopsdepl-uid-1',
  clusterUserId: '11111111-1111-4111-8111-111111111111',
  spec: automatedSpec,
  environment: { kind: 'Workspace' } as const,
  owner: { name: 'my-deployment', namespace: 'jane' },
  namespace: 'argocd',
  rowVersion: new Date('2026-03-01T10:00:00.123Z'),
};

describe('renderApplication', () => {
  it("renders labels, finalizer, project, in-cluster destination and the row's spec", () => {
    assert.deepEqual(renderApplication(input), {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: {
        name: 'gitopsdepl-uid-1',
        namespace: 'argocd',
        labels: {
          'managed-gitops.redhat.com/database-id': input.id,
          'managed-gitops.redhat.com/cluster-user-id': input.clusterUserId,
          'managed-gitops.redhat.com/gitopsdeployment-name': 'my-deployment',
          'managed-gitops.redhat.com/gitopsdeployment-namespace': 'jane',
        },
        annotations: { 'managed-gitops.redhat.com/row-version': '2026-03-01T10:00:00.123Z' },
        finalizers: ['resources-finalizer.argocd.argoproj.io'],
      },
      spec: {
        project: `app-project-${input.clusterUserId}`,
        source: automatedSpec.source,
        destination: { name: 'in-cluster', namespace: 'jane' },
        syncPolicy: automatedSpec.syncPolicy,
      },
    });
  });

  it('an empty targetRevision (HEAD) is left out, as Argo CD leaves it out when it writes the Application', () => {
    const app = renderApplication({
      ...input,
      spec: { ...automatedSpec, source: { ...automatedSpec.source, targetRevision: '' } },
    });
    assert.deepEqual((app.spec as { source: unknown }).source, {
      repoURL: 'https://github.com/org/repo',
      path: 'env/dev',
    });
  });

  it("passes Argo CD's controls through as the backend wrote them: Helm, Kustomize or directory, ignoreDifferences, revisionHistoryLimit", () => {
    const spec = {
      ...automatedSpec,
      source: {
        ...automatedSpec.source,
        helm: {
          valuesObject: { replicas: 2, debug: false },
          parameters: [{ name: 'image.tag', value: 'v2' }],
        },
      },
      ignoreDifferences: [{ group: 'apps', kind: 'Deployment', jsonPointers: ['/spec/replicas'] }],
      revisionHistoryLimit: 3,
    };
    const rendered = renderApplication({ ...input, spec }).spec as Record<string, unknown>;
    assert.deepEqual(rendered.source, spec.source);
    assert.deepEqual(rendered.ignoreDifferences, spec.ignoreDifferences);
    assert.equal(rendered.revisionHistoryLimit, 3);
    // A section that is not an object is a malformed row.
    assert.throws(
      () =>
        renderApplication({
          ...input,
          spec: { ...automatedSpec, source: { ...automatedSpec.source, helm: 'x' } },
        }),
      (err: unknown) => err instanceof TerminalError && /source\.helm/.test(err.message),
    );
  });

  it('renders a chart of a Helm repository and several sources as the backend wrote them, each without an empty targetRevision', () => {
    const chart = { repoURL: 'https://charts.example.com', chart: 'web', targetRevision: '1.2.0' };
    const single = renderApplication({ ...input, spec: { ...automatedSpec, source: chart } }).spec as Record<
      string,
      unknown
    >;
    assert.deepEqual(single.source, chart);
    const sources = [
      { ...chart, helm: { valueFiles: ['$values/web/prod.yaml'] } },
      { repoURL: 'https://github.com/org/values', targetRevision: '', ref: 'values' },
    ];
    const several = renderApplication({ ...input, spec: { ...automatedSpec, source: undefined, sources } })
      .spec as Record<string, unknown>;
    assert.equal(several.source, undefined);
    assert.deepEqual(several.sources, [
      sources[0],
      { repoURL: 'https://github.com/org/values', ref: 'values' },
    ]);
    assert.throws(
      () => renderApplication({ ...input, spec: { ...automatedSpec, sources } }),
      (err: unknown) => err instanceof TerminalError && /exactly one of source and sources/.test(err.message),
    );
  });

  it('a manual deployment without options has no syncPolicy', () => {
    const app = renderApplication({
      ...input,
      spec: { source: automatedSpec.source, destination: { namespace: 'jane' } },
    });
    assert.equal((app.spec as Record<string, unknown>).syncPolicy, undefined);
  });

  it('derives destination.name from the managed environment', () => {
    assert.equal(destinationName({ kind: 'Workspace' }), 'in-cluster');
    assert.equal(
      destinationName({ kind: 'External', id: 'abc', allowsClusterResources: false }),
      'managed-env-abc',
    );
    assert.equal(destinationName({ kind: 'None' }), '');
  });

  it('uses the cluster-resource project only for an External environment that allows cluster resources, or that the Application asks to create its namespace in', () => {
    const withoutCreateNamespace = {
      ...automatedSpec,
      syncPolicy: { ...automatedSpec.syncPolicy, syncOptions: ['PrunePropagationPolicy=background'] },
    };
    const projectOf = (environment: DestinationEnvironment, spec: unknown = withoutCreateNamespace) =>
      (renderApplication({ ...input, spec, environment }).spec as { project: string }).project;
    const main = `app-project-${input.clusterUserId}`;
    const cluster = `app-project-${input.clusterUserId}-cluster`;
    assert.equal(projectOf({ kind: 'External', id: 'abc', allowsClusterResources: true }), cluster);
    assert.equal(projectOf({ kind: 'External', id: 'abc', allowsClusterResources: false }), main);
    // CreateNamespace=true: Argo CD checks the Namespace it creates against the project's whitelist
    assert.equal(
      projectOf({ kind: 'External', id: 'abc', allowsClusterResources: false }, automatedSpec),
      cluster,
    );
    // the tenant's own namespace (in-cluster) never gets cluster-scoped objects, whatever the options
    assert.equal(projectOf({ kind: 'Workspace' }), main);
    assert.equal(projectOf({ kind: 'Workspace' }, automatedSpec), main);
    assert.equal(projectOf({ kind: 'None' }, automatedSpec), main);
    assert.equal(
      applicationProjectName(input.clusterUserId, {
        kind: 'External',
        id: 'x',
        allowsClusterResources: true,
      }),
      cluster,
    );
  });

  it('leaves out informational labels that are not valid label values', () => {
    const app = renderApplication({ ...input, owner: { name: 'x'.repeat(100), namespace: 'jane' } });
    assert.equal(app.metadata.labels?.['managed-gitops.redhat.com/gitopsdeployment-name'], undefined);
  });

  it('a malformed spec is a TerminalError naming the field', () => {
    for (const spec of [
      null,
      'x',
      {},
      { source: { path: 'p' }, destination: { namespace: 'n' } },
      { ...automatedSpec, project: 'evil' },
    ]) {
      assert.throws(
        () => renderApplication({ ...input, spec }),
        (err: unknown) => err instanceof TerminalError && /malformed application spec/.test(err.message),
      );
    }
  });
});

describe('environmentOf', () => {
  const id = '44444444-4444-4444-8444-444444444444';
  const scope = (namespaces: string[], cluster_resources: boolean) => ({ namespaces, cluster_resources });

  it('no environment: none; a Workspace without credentials: the host cluster', () => {
    assert.deepEqual(environmentOf(undefined), { kind: 'None' });
    assert.deepEqual(environmentOf({ id, kind: 'Workspace' }), { kind: 'Workspace' });
  });

  it('External, or a Workspace with credentials (on another cluster): through its cluster Secret', () => {
    assert.deepEqual(environmentOf({ id, kind: 'External', credentials: scope([], false) }), {
      kind: 'External',
      id,
      allowsClusterResources: true,
    });
    assert.deepEqual(environmentOf({ id, kind: 'External', credentials: scope(['a'], false) }), {
      kind: 'External',
      id,
      allowsClusterResources: false,
    });
    assert.deepEqual(environmentOf({ id, kind: 'External', credentials: scope(['a'], true) }), {
      kind: 'External',
      id,
      allowsClusterResources: true,
    });
    assert.deepEqual(environmentOf({ id, kind: 'Workspace', credentials: scope(['jane'], false) }), {
      kind: 'External',
      id,
      allowsClusterResources: false,
    });
    // External without stored credentials: never cluster-scoped.
    assert.deepEqual(environmentOf({ id, kind: 'External' }), {
      kind: 'External',
      id,
      allowsClusterResources: false,
    });
  });
});
