import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { formatAge, formatTable, oneLine, redactingWriter } from './output.ts';

describe('output', () => {
  test('tables pad every column but the last to its widest cell', () => {
    assert.equal(
      formatTable(
        ['NAME', 'STATE', 'MESSAGE'],
        [
          ['a', 'Waiting', ''],
          ['longer-name', 'Failed', 'why'],
        ],
      ),
      ['NAME          STATE     MESSAGE', 'a             Waiting', 'longer-name   Failed    why'].join('\n'),
    );
  });

  test("ages in kubectl's units", () => {
    const now = Date.parse('2026-01-02T00:00:00Z');
    const ago = (ms: number) => new Date(now - ms);
    assert.equal(formatAge(ago(5_000), now), '5s');
    assert.equal(formatAge(ago(119_000), now), '119s');
    assert.equal(formatAge(ago(30 * 60_000), now), '30m');
    assert.equal(formatAge(ago(5 * 3_600_000), now), '5h');
    assert.equal(formatAge(ago(72 * 3_600_000), now), '3d');
    assert.equal(formatAge(null, now), '-');
  });

  test('one line, cut with an ellipsis', () => {
    assert.equal(oneLine('a\n  b', 10), 'a b');
    assert.equal(oneLine('abcdefghijkl', 5), 'abcd…');
  });

  test('the writer removes configured secrets and secret-looking text', () => {
    const written: string[] = [];
    const write = redactingWriter(
      (text) => written.push(text),
      () => ['s3cr3t-key-material'],
    );
    write('key s3cr3t-key-material and postgres://u:pw@host/db and Authorization: Bearer abc.def');
    assert.equal(
      written[0],
      'key [REDACTED] and postgres://u:[REDACTED]@host/db and Authorization: Bearer [REDACTED]',
    );
  });
});
