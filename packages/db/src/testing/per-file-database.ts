import { useFixture } from '@gitops/shared/testing';
import { createTestDatabase, type TestDatabase } from './test-database.ts';

/**
 * The test file's own database, as most integration test files want it: cloned (createTestDatabase) before
 * the file's first test and dropped after its last (useFixture). Call it at the top of the file (or of a
 * describe); read `db`, `url` and `name` inside hooks and tests, once it exists.
 */
export const useTestDatabase = (options: { max?: number } = {}): TestDatabase =>
  useFixture(
    () => createTestDatabase(options),
    (database) => database.destroy(),
  );
