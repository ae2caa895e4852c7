import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { followsBranch, sourcesOf } from './application-refresh.ts';

const URL = 'https://git.example/shop/gitops';

describe('which sources a pushed branch concerns', () => {
  it('reads `source` or each of `sources`; anything malformed has none', () => {
    assert.deepEqual(sourcesOf({ source: { repoURL: URL, path: 'a', targetRevision: 'main' } }), [
      { repoURL: URL, targetRevision: 'main' },
    ]);
    assert.deepEqual(
      sourcesOf({ sources: [{ repoURL: URL, chart: 'c' }, { ref: 'values' }, 'x', { repoURL: 3 }] }),
      [{ repoURL: URL, targetRevision: '' }],
    );
    for (const spec of [null, 'x', [], {}, { source: 'x' }, { sources: 'x' }, { source: { repoURL: null } }])
      assert.deepEqual(sourcesOf(spec), []);
  });

  it('the same repository however written, at the branch, HEAD or empty; not another branch, tag or repository', () => {
    const at = (repoURL: string, targetRevision: string) =>
      followsBranch({ repoURL, targetRevision }, URL, 'main');
    assert.equal(at('HTTPS://git.example/shop/gitops.git/', 'main'), true);
    assert.equal(at(URL, ''), true);
    assert.equal(at(URL, 'HEAD'), true);
    assert.equal(at(URL, 'refs/heads/main'), true);
    assert.equal(at(URL, ' main '), true);
    assert.equal(at(URL, 'feature'), false);
    assert.equal(at(URL, 'v1.0.0'), false);
    assert.equal(at('https://git.example/shop/gitops-2', 'main'), false);
  });
});
