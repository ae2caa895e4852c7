/**
 * `@gitops/db/testing`: test databases (a migrated template per run, a clone per test file) and the rows
 * the integration tests build on. Not part of `@gitops/db`'s production exports.
 */
export * from './interleaving.ts';
export * from './per-file-database.ts';
export * from './statements.ts';
export * from './test-database.ts';
export * from './test-fixtures.ts';
