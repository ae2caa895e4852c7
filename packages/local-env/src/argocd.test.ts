import assert from 'node:assert/strict';
import { test } from 'vitest';
import { argoCdBuildVersion } from './argocd.ts';
import { ARGOCD_VERSION } from './binaries.ts';

test('the Argo CD CRDs installed in the control plane come from the release tools/argocd builds', async () => {
  assert.equal(await argoCdBuildVersion(), ARGOCD_VERSION);
});
