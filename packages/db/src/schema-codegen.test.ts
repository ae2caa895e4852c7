import assert from 'node:assert/strict';
import { test } from 'vitest';
import { enumValuesOfCheck } from './schema-codegen.ts';

test('an IN (...) CHECK constraint yields its values, in order', () => {
  assert.deepEqual(
    enumValuesOfCheck(
      "CHECK ((state = ANY (ARRAY['Waiting'::text, 'In_Progress'::text, 'Completed'::text])))",
    ),
    ['Waiting', 'In_Progress', 'Completed'],
  );
});

test('a nullable IN (...) CHECK constraint yields its values', () => {
  assert.deepEqual(
    enumValuesOfCheck(
      "CHECK (((outcome IS NULL) OR (outcome = ANY (ARRAY['Succeeded'::text, 'it''s'::text]))))",
    ),
    ['Succeeded', "it's"],
  );
});

test('other CHECK constraints yield nothing', () => {
  assert.equal(enumValuesOfCheck("CHECK ((jsonb_typeof(spec) = 'object'::text))"), undefined);
  assert.equal(enumValuesOfCheck('CHECK ((char_length(message) <= 2000))'), undefined);
});
