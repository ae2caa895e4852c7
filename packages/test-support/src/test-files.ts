/** Which selected test files need which infrastructure (the global setup starts only what they need). */

/** A unit test: `*.test.ts` outside e2e/ and not `*.int.test.ts`. It needs no PostgreSQL, no API server. */
export const isUnitTestFile = (file: string): boolean =>
  file.endsWith('.test.ts') && !file.endsWith('.int.test.ts') && !file.includes('/e2e/');

/** Tier 3b runs a real Argo CD: its binary must be built first. */
export const needsArgoCd = (file: string): boolean => file.includes('/e2e/tier3b/');

/**
 * Tier 4 (a control plane in cluster mode with a real node) and the chaos tier (a PostgreSQL, a control plane
 * and an Argo CD that it restarts) start their own infrastructure: none from the global setup.
 */
export const hasOwnInfrastructure = (file: string): boolean =>
  file.includes('/e2e/tier4/') || file.includes('/e2e/chaos/');
