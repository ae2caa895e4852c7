import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import {
  createInstanceKeyring,
  generateInstanceKeyPair,
  instanceSealedKeyId,
  sealForInstance,
} from './instance-sealing.ts';
import { SealingError } from './sealing.ts';

describe('sealing for an engine instance (HPKE, X25519)', () => {
  test('what is sealed with an instance public key opens with its private key, under the same context only', async () => {
    const pair = await generateInstanceKeyPair('k1');
    const sealed = await sealForInstance(pair, 'token-value', 'cluster_credentials.bearer_token:row-1');
    assert.equal(instanceSealedKeyId(sealed), 'k1');
    assert.ok(!sealed.includes(Buffer.from('token-value')), 'the plaintext is in the sealed bytes');
    const keyring = createInstanceKeyring([pair]);
    assert.equal(await keyring.open(sealed, 'cluster_credentials.bearer_token:row-1'), 'token-value');
    // Moved to another row or field: refused.
    await assert.rejects(keyring.open(sealed, 'cluster_credentials.bearer_token:row-2'), SealingError);
    await assert.rejects(keyring.open(sealed, 'repository_credentials.password:row-1'), SealingError);
  });

  test('another instance’s private key does not open it, even under the same key id', async () => {
    const mine = await generateInstanceKeyPair('same-id');
    const theirs = await generateInstanceKeyPair('same-id');
    const sealed = await sealForInstance(mine, 'secret', 'ctx');
    await assert.rejects(createInstanceKeyring([theirs]).open(sealed, 'ctx'), {
      code: 'AUTHENTICATION_FAILED',
    });
    await assert.rejects(createInstanceKeyring([]).open(sealed, 'ctx'), { code: 'UNKNOWN_KEY' });
  });

  test('two seals of one value differ, and any changed byte is refused', async () => {
    const pair = await generateInstanceKeyPair('k');
    const a = await sealForInstance(pair, 'v', 'ctx');
    const b = await sealForInstance(pair, 'v', 'ctx');
    assert.notDeepEqual(a, b);
    const keyring = createInstanceKeyring([pair]);
    for (const index of [3, 10, a.length - 1]) {
      const altered = Buffer.from(a);
      altered[index] = (altered[index] ?? 0) ^ 1;
      await assert.rejects(keyring.open(altered, 'ctx'), SealingError);
    }
    // The key id in the header is authenticated too.
    const renamed = Buffer.from(a);
    renamed[2] = 'j'.charCodeAt(0);
    await assert.rejects(createInstanceKeyring([{ ...pair, keyId: 'j' }]).open(renamed, 'ctx'), SealingError);
  });

  test('a value of the backend’s own format, or a truncated one, is refused with a clear code', () => {
    assert.throws(() => instanceSealedKeyId(Buffer.from([1, 1, 65])), { code: 'UNSUPPORTED_VERSION' });
    assert.throws(() => instanceSealedKeyId(Buffer.from([2, 1, 65, 0])), { code: 'MALFORMED' });
  });
});
