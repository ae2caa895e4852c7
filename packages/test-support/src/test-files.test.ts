import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { hasOwnInfrastructure, isUnitTestFile, needsArgoCd } from './test-files.ts';

describe('test file tiers', () => {
  it('starts nothing for unit tests and everything for integration and e2e tests', () => {
    assert.equal(isUnitTestFile('/repo/packages/shared/src/logger.test.ts'), true);
    assert.equal(isUnitTestFile('/repo/packages/backend/src/status/deployment-status.test.ts'), true);
    assert.equal(isUnitTestFile('/repo/packages/db/src/schema.int.test.ts'), false);
    assert.equal(isUnitTestFile('/repo/e2e/tier3a/status.test.ts'), false);
    assert.equal(isUnitTestFile('/repo/e2e/tier3b/deploy.test.ts'), false);
  });

  it('builds Argo CD only for tier 3b', () => {
    assert.equal(needsArgoCd('/repo/e2e/tier3b/deploy.test.ts'), true);
    assert.equal(needsArgoCd('/repo/e2e/tier3a/status.test.ts'), false);
    assert.equal(needsArgoCd('/repo/packages/backend/src/main.int.test.ts'), false);
  });

  it('leaves tier 4 and the chaos tier to start their own infrastructure', () => {
    assert.equal(hasOwnInfrastructure('/repo/e2e/tier4/cluster.test.ts'), true);
    assert.equal(hasOwnInfrastructure('/repo/e2e/chaos/chaos.test.ts'), true);
    assert.equal(hasOwnInfrastructure('/repo/e2e/tier3b/deploy.test.ts'), false);
    assert.equal(hasOwnInfrastructure('/repo/packages/local-env/src/control-plane.int.test.ts'), false);
  });
});
