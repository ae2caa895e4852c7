import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'vitest';
import { diffDatabaseTypes } from './schema-codegen.ts';
import { useTestDatabase } from './testing/per-file-database.ts';

const testDb = useTestDatabase({ max: 1 });

test('database.generated.ts matches the migrated schema', async () => {
  const committed = fileURLToPath(new URL('./database.generated.ts', import.meta.url));
  const diff = await diffDatabaseTypes(testDb.url, committed);
  assert.equal(
    diff,
    undefined,
    `database.generated.ts is out of date; run node packages/db/scripts/generate-types.ts\n${diff}`,
  );
});
