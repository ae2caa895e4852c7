import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'vitest';
import { createSealer, decodeSealingKey, SEALED_FORMAT_VERSION, SealingError } from './sealing.ts';

const oldKey = { id: 'key-2025', key: randomBytes(32) };
const newKey = { id: 'key-2026', key: randomBytes(32) };
const secret = 'sha256~super-secret-bearer-token';

function assertSealingError(fn: () => unknown, code: SealingError['code']): SealingError {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof SealingError, `expected a SealingError, got ${String(caught)}`);
  assert.equal(caught.code, code);
  assert.ok(!caught.message.includes(secret), 'error message must not contain the plaintext');
  assert.ok(
    !caught.message.includes(oldKey.key.toString('base64')),
    'error message must not contain key material',
  );
  assert.ok(
    !caught.message.includes(newKey.key.toString('base64')),
    'error message must not contain key material',
  );
  return caught;
}

describe('sealing', () => {
  const sealer = createSealer({ keys: [newKey], activeKeyId: newKey.id });

  test('a sealed string opens to the same string', () => {
    assert.equal(sealer.openString(sealer.seal(secret)), secret);
  });

  test('a sealed Buffer opens to the same bytes, including empty input', () => {
    const bytes = randomBytes(1000);
    assert.deepEqual(sealer.open(sealer.seal(bytes)), bytes);
    assert.deepEqual(sealer.open(sealer.seal(Buffer.alloc(0))), Buffer.alloc(0));
  });

  test('the sealed value is version | key id length | key id | nonce | ciphertext | tag, never the plaintext', () => {
    const sealed = sealer.seal(secret);
    assert.equal(sealed[0], SEALED_FORMAT_VERSION);
    assert.equal(sealed[1], newKey.id.length);
    assert.equal(sealed.subarray(2, 2 + newKey.id.length).toString('utf8'), newKey.id);
    assert.equal(sealed.length, 2 + newKey.id.length + 12 + Buffer.byteLength(secret) + 16);
    assert.ok(!sealed.includes(Buffer.from(secret)));
    assert.equal(sealer.keyIdOf(sealed), newKey.id);
  });

  test('sealing the same plaintext twice gives different values (random nonce)', () => {
    assert.notDeepEqual(sealer.seal(secret), sealer.seal(secret));
  });

  test('a value sealed with a rotated-out key still opens while that key is configured', () => {
    const before = createSealer({ keys: [oldKey], activeKeyId: oldKey.id });
    const sealedWithOld = before.seal(secret);
    const rotated = createSealer({ keys: [oldKey, newKey], activeKeyId: newKey.id });
    assert.equal(rotated.openString(sealedWithOld), secret);
    assert.equal(rotated.needsResealing(sealedWithOld), true);
    const resealed = rotated.seal(rotated.open(sealedWithOld));
    assert.equal(rotated.needsResealing(resealed), false);
    assert.equal(rotated.keyIdOf(resealed), newKey.id);
  });

  test('a value whose key was removed fails with UNKNOWN_KEY naming the key id', () => {
    const sealedWithOld = createSealer({ keys: [oldKey], activeKeyId: oldKey.id }).seal(secret);
    const error = assertSealingError(() => sealer.open(sealedWithOld), 'UNKNOWN_KEY');
    assert.match(error.message, /key-2025/);
  });

  test('flipping a bit in any byte of nonce, ciphertext or tag fails authentication', () => {
    const sealed = sealer.seal(secret);
    const headerLength = 2 + newKey.id.length;
    for (let index = headerLength; index < sealed.length; index++) {
      const tampered = Buffer.from(sealed);
      tampered[index]! ^= 0x01;
      assertSealingError(() => sealer.open(tampered), 'AUTHENTICATION_FAILED');
    }
  });

  test('changing the key id to another configured key fails authentication', () => {
    // Same-length ids, so the only change is which key the header names.
    const keyA = { id: 'key-a', key: randomBytes(32) };
    const keyB = { id: 'key-b', key: randomBytes(32) };
    const both = createSealer({ keys: [keyA, keyB], activeKeyId: keyA.id });
    const sealed = both.seal(secret);
    const tampered = Buffer.from(sealed);
    tampered.write('key-b', 2, 'utf8');
    assertSealingError(() => both.open(tampered), 'AUTHENTICATION_FAILED');
  });

  test('a wrong version byte or a truncated value is rejected', () => {
    const sealed = sealer.seal(secret);
    const wrongVersion = Buffer.from(sealed);
    wrongVersion[0] = 2;
    assertSealingError(() => sealer.open(wrongVersion), 'UNSUPPORTED_VERSION');
    assertSealingError(() => sealer.open(sealed.subarray(0, 20)), 'MALFORMED');
    assertSealingError(() => sealer.open(Buffer.alloc(0)), 'MALFORMED');
    const zeroLengthId = Buffer.from(sealed);
    zeroLengthId[1] = 0;
    assertSealingError(() => sealer.open(zeroLengthId), 'MALFORMED');
  });

  test('a value sealed for one context does not open in another', () => {
    const sealed = sealer.seal(secret, 'cluster_credentials.bearer_token');
    assert.equal(sealer.openString(sealed, 'cluster_credentials.bearer_token'), secret);
    assertSealingError(() => sealer.open(sealed, 'repository_credentials.password'), 'AUTHENTICATION_FAILED');
    assertSealingError(() => sealer.open(sealed), 'AUTHENTICATION_FAILED');
  });

  test('changing the caller key bytes after createSealer has no effect', () => {
    const key = randomBytes(32);
    const own = createSealer({ keys: [{ id: 'k', key }], activeKeyId: 'k' });
    const sealed = own.seal(secret);
    key.fill(0);
    assert.equal(own.openString(sealed), secret);
  });

  test('invalid configurations are rejected', () => {
    assert.throws(
      () => createSealer({ keys: [{ id: 'short', key: randomBytes(16) }], activeKeyId: 'short' }),
      /32 bytes/,
    );
    assert.throws(() => createSealer({ keys: [newKey, newKey], activeKeyId: newKey.id }), /twice/);
    assert.throws(() => createSealer({ keys: [newKey], activeKeyId: 'missing' }), /not among/);
    assert.throws(
      () => createSealer({ keys: [{ id: '', key: randomBytes(32) }], activeKeyId: '' }),
      /key id/,
    );
    assert.throws(() =>
      createSealer({ keys: [{ id: 'x'.repeat(256), key: randomBytes(32) }], activeKeyId: 'x' }),
    );
  });

  test('decodeSealingKey accepts 32 base64 bytes only', () => {
    const key = randomBytes(32);
    assert.deepEqual(decodeSealingKey(`${key.toString('base64')}\n`), key);
    assert.throws(() => decodeSealingKey(randomBytes(31).toString('base64')), SealingError);
  });
});
