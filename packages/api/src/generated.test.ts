import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'vitest';

const generator = fileURLToPath(new URL('../scripts/generate-types.ts', import.meta.url));

test('types.generated.ts is exactly what the CRDs generate (generate-types --check reports no difference)', async () => {
  const result = await promisify(execFile)(process.execPath, [generator, '--check']).catch(
    (error: { code?: number; stdout?: string; stderr?: string }) => error,
  );
  assert.equal(result.stderr, '', `generate-types --check reported a difference:\n${result.stderr}`);
  assert.match(String(result.stdout), /is up to date/);
});
