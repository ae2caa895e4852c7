import { randomBytes } from 'node:crypto';
import { Aes256Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from '@hpke/core';
import { SealingError } from './sealing.ts';

/**
 * Sealing for one engine instance (migration 0013, docs/threat-model.md): the backend seals a credential with
 * the instance's public key and only that instance's agent, which holds the private key on its own cluster,
 * opens it. HPKE (RFC 9180) in base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and AES-256-GCM, from
 * the maintained `@hpke/core`: nothing of our own but the byte layout.
 *
 * Sealed format, version 2 (lengths in bytes):
 *
 *   | 1: version (0x02) | 1: key id length L (1..255) | L: key id, UTF-8 | 32: HPKE enc | n: ciphertext + 16: tag |
 *
 * The header and the caller's `context` (which credential field of which row, e.g.
 * `cluster_credentials.bearer_token:<id>`) are the AEAD's additional data, so a value moved to another row,
 * field or key id does not open. Errors name the key id, never a value.
 */

const VERSION = 2;
const ENC_LENGTH = 32;
const KEY_LENGTH = 32;
const INFO = new TextEncoder().encode('gitops-service engine instance credentials v2');

const suite = new CipherSuite({
  kem: new DhkemX25519HkdfSha256(),
  kdf: new HkdfSha256(),
  aead: new Aes256Gcm(),
});

/** An instance's key pair: raw X25519 keys (32 bytes each). */
export interface InstanceKeyPair {
  keyId: string;
  publicKey: Buffer;
  privateKey: Buffer;
}

/** A new key pair; its id says when it was made (and is unique enough to never be reused by one instance). */
export async function generateInstanceKeyPair(
  keyId = `${new Date().toISOString().slice(0, 10)}-${randomBytes(4).toString('hex')}`,
): Promise<InstanceKeyPair> {
  const pair = await suite.kem.generateKeyPair();
  return {
    keyId,
    publicKey: Buffer.from(await suite.kem.serializePublicKey(pair.publicKey)),
    privateKey: Buffer.from(await suite.kem.serializePrivateKey(pair.privateKey)),
  };
}

function header(keyId: string): Buffer {
  const id = Buffer.from(keyId, 'utf8');
  if (id.length < 1 || id.length > 255) throw new SealingError('MALFORMED', 'key id must be 1..255 bytes');
  return Buffer.concat([Buffer.from([VERSION, id.length]), id]);
}

const additionalData = (head: Buffer, context: string) =>
  new Uint8Array(Buffer.concat([head, Buffer.from(context, 'utf8')]));

const arrayBufferOf = (bytes: Uint8Array): ArrayBuffer =>
  bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;

/** Seals `plaintext` for the instance whose public key is `key`. */
export async function sealForInstance(
  key: { keyId: string; publicKey: Uint8Array },
  plaintext: string,
  context: string,
): Promise<Buffer> {
  if (key.publicKey.length !== KEY_LENGTH) {
    throw new SealingError('MALFORMED', `public key ${key.keyId} is not a 32-byte X25519 key`);
  }
  const head = header(key.keyId);
  const recipientPublicKey = await suite.kem.deserializePublicKey(arrayBufferOf(key.publicKey));
  const { ct, enc } = await suite.seal(
    { recipientPublicKey, info: INFO },
    new TextEncoder().encode(plaintext),
    additionalData(head, context),
  );
  return Buffer.concat([head, Buffer.from(enc), Buffer.from(ct)]);
}

/** The key id a value sealed for an instance names (its header only). */
export function instanceSealedKeyId(sealed: Uint8Array): string {
  const bytes = Buffer.from(sealed);
  if (bytes.length < 2 || bytes[0] !== VERSION) {
    throw new SealingError('UNSUPPORTED_VERSION', 'not a value sealed for an engine instance');
  }
  const length = bytes[1] ?? 0;
  if (length < 1 || bytes.length < 2 + length + ENC_LENGTH + 16) {
    throw new SealingError('MALFORMED', 'sealed value is truncated');
  }
  return bytes.subarray(2, 2 + length).toString('utf8');
}

/** The private keys an agent holds, by id; opens what was sealed for its instance. */
export interface InstanceKeyring {
  keyIds(): string[];
  open(sealed: Uint8Array, context: string): Promise<string>;
}

export function createInstanceKeyring(
  keys: readonly { keyId: string; privateKey: Uint8Array }[],
): InstanceKeyring {
  const byId = new Map(keys.map((key) => [key.keyId, key.privateKey]));
  return {
    keyIds: () => [...byId.keys()],
    async open(sealed, context) {
      const keyId = instanceSealedKeyId(sealed);
      const privateKey = byId.get(keyId);
      if (!privateKey)
        throw new SealingError('UNKNOWN_KEY', `no private key ${keyId} on this engine instance`);
      const bytes = Buffer.from(sealed);
      const headLength = 2 + (bytes[1] ?? 0);
      const head = bytes.subarray(0, headLength);
      const enc = bytes.subarray(headLength, headLength + ENC_LENGTH);
      const ct = bytes.subarray(headLength + ENC_LENGTH);
      try {
        const recipientKey = await suite.kem.deserializePrivateKey(arrayBufferOf(privateKey));
        const plain = await suite.open(
          { recipientKey, enc: arrayBufferOf(enc), info: INFO },
          arrayBufferOf(ct),
          additionalData(head, context),
        );
        return new TextDecoder().decode(plain);
      } catch {
        throw new SealingError(
          'AUTHENTICATION_FAILED',
          `a value sealed with engine instance key ${keyId} did not open (altered, or sealed for another row or instance)`,
        );
      }
    },
  };
}
