/**
 * Vitest setup file, run in every worker before each test file: puts what the global setup provided
 * (KUBECONFIG, GITOPS_TEST_DATABASE_URL, ...) into `process.env`, where the tests, the fixtures and the
 * processes they start read it. Nothing is provided to unit-only runs.
 */
import { inject } from 'vitest';

Object.assign(process.env, inject('gitopsTestEnv') ?? {});
