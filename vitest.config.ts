/**
 * The test runner's configuration: one vitest project per package (`packages/<name>/src/**\/*.test.ts`,
 * unit and integration tests together), tier 3a (`e2e/tier3a`), tier 3b (`e2e/tier3b`), tier 4 (`e2e/tier4`) and
 * the chaos tier (`e2e/chaos`). One global
 * setup starts PostgreSQL and the control plane once per run when a selected file needs them
 * (packages/test-support/src/global-setup.ts). Each test file runs in its own process (`forks`), several at
 * once (`GITOPS_TEST_CONCURRENCY`, default 3); every file uses its own database and namespaces.
 * `pnpm test` (scripts/test.ts) chooses the projects and files.
 */
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';

const packages = [
  'api',
  'shared',
  'db',
  'local-env',
  'test-support',
  'appstudio',
  'backend',
  'cluster-agent',
  'rhoas-operator',
  'cli',
];

// Integration tests wait on real processes on small shared machines: generous limits, never a timing assertion.
const project = (name: string, include: string, timeoutMs: number): TestProjectInlineConfiguration => ({
  test: {
    name,
    include: [include],
    pool: 'forks',
    setupFiles: ['packages/test-support/src/worker-setup.ts'],
    testTimeout: timeoutMs,
    hookTimeout: timeoutMs,
  },
});

export default defineConfig({
  test: {
    globalSetup: ['packages/test-support/src/global-setup.ts'],
    pool: 'forks',
    teardownTimeout: 120_000,
    maxWorkers: Number(process.env.GITOPS_TEST_CONCURRENCY ?? 3),
    projects: [
      ...packages.map((name) => project(name, `packages/${name}/src/**/*.test.ts`, 300_000)),
      project('tier3a', 'e2e/tier3a/**/*.test.ts', 300_000),
      project('tier3b', 'e2e/tier3b/**/*.test.ts', 900_000),
      // Tier 4 (`pnpm test:cluster`): its own control plane with a real node; one file at a time.
      project('tier4', 'e2e/tier4/**/*.test.ts', 900_000),
      // The chaos tier (`pnpm test:chaos`): its own PostgreSQL, control plane and Argo CD, which it restarts.
      project('chaos', 'e2e/chaos/**/*.test.ts', 1_200_000),
    ],
  },
});
