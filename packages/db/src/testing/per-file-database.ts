import { afterAll, beforeAll } from 'vitest';
import { createTestDatabase, type TestDatabase } from './test-database.ts';

/**
 * The test file's own database, as most integration test files want it: cloned (createTestDatabase) before
 * the file's first test and dropped after its last, through vitest's beforeAll/afterAll. Call it at the top
 * of the file (or of a describe); read `db`, `url` and `name` inside hooks and tests, once it exists.
 */
export function useTestDatabase(options: { max?: number } = {}): TestDatabase {
  let current: TestDatabase | undefined;
  beforeAll(async () => {
    current = await createTestDatabase(options);
  });
  afterAll(async () => {
    await current?.destroy();
  });
  const created = (): TestDatabase => {
    if (!current) throw new Error('the test database exists only from beforeAll to afterAll');
    return current;
  };
  return {
    get name() {
      return created().name;
    },
    get url() {
      return created().url;
    },
    get db() {
      return created().db;
    },
    destroy: () => created().destroy(),
  };
}
