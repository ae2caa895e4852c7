import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, test } from 'vitest';
import { diffDatabaseTypes } from './schema-codegen.ts';
import { createTestDatabase, type TestDatabase } from './testing/test-database.ts';

let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await createTestDatabase({ max: 1 });
});
afterAll(async () => {
  await testDb?.destroy();
});

test('database.generated.ts matches the migrated schema', async () => {
  const committed = fileURLToPath(new URL('./database.generated.ts', import.meta.url));
  const diff = await diffDatabaseTypes(testDb.url, committed);
  assert.equal(
    diff,
    undefined,
    `database.generated.ts is out of date; run node packages/db/scripts/generate-types.ts\n${diff}`,
  );
});
