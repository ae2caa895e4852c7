import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { chartRepoUrls, sourceRepoUrls } from './application.render.ts';
import { withheldChartRepositories } from './tenant.queries.ts';

const chart = (repoURL: string) => ({ source: { repoURL, chart: 'web', targetRevision: '1.0.0' } });

describe('the repositories of a spec', () => {
  it('every source’s, and among them the chart repositories (a chart, or an oci:// repository)', () => {
    const spec = {
      sources: [
        { repoURL: 'https://charts.example.com', chart: 'web' },
        { repoURL: 'https://github.com/org/values', ref: 'values' },
        { repoURL: 'OCI://registry.example.com/charts/web', path: '.' },
      ],
    };
    assert.deepEqual(sourceRepoUrls(spec), [
      'https://charts.example.com',
      'https://github.com/org/values',
      'OCI://registry.example.com/charts/web',
    ]);
    assert.deepEqual(chartRepoUrls(spec), [
      'https://charts.example.com',
      'OCI://registry.example.com/charts/web',
    ]);
    assert.deepEqual(chartRepoUrls({ source: { repoURL: 'https://github.com/org/repo', path: 'x' } }), []);
    assert.deepEqual(sourceRepoUrls(null), []);
  });
});

describe('withheldChartRepositories', () => {
  it('withholds a chart repository another tenant of the instance has credentials for and this one has not', () => {
    const specs = [chart('https://Charts.example.com/'), chart('https://public.example.com')];
    assert.deepEqual(
      [...withheldChartRepositories(specs, [], ['https://charts.example.com'])],
      ['https://charts.example.com'],
    );
  });

  it('keeps one the tenant has credentials for itself, a public one, and a Git repository with credentials', () => {
    const specs = [
      chart('https://charts.example.com'),
      chart('https://public.example.com'),
      { source: { repoURL: 'https://git.example.com/org/repo.git', path: 'dev' } },
    ];
    const here = ['https://charts.example.com', 'https://git.example.com/org/repo'];
    assert.deepEqual([...withheldChartRepositories(specs, ['https://charts.example.com'], here)], []);
  });
});
