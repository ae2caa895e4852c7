import { createCipheriv, createDecipheriv, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';

/**
 * Sealing of secrets stored in PostgreSQL (`*_sealed` bytea columns) with AES-256-GCM.
 *
 * Sealed format, version 1 (all lengths in bytes):
 *
 *   | 1: version (0x01) | 1: key id length L (1..255) | L: key id, UTF-8 | 12: nonce | n: ciphertext | 16: tag |
 *
 * The header (version, L, key id) and an optional caller `context` (e.g. 'cluster_credentials.bearer_token')
 * are authenticated as GCM additional data, so changing the key id or moving a value to another column is
 * detected like any other tampering. The nonce is random per seal: with 96-bit random nonces one key may
 * seal about 2^32 values before the collision risk matters, far beyond what this service stores.
 *
 * Rotation: configure the new key as active and keep the old one; values sealed with the old key still open,
 * `needsResealing` tells which ones to rewrite; once none is left the old key can be removed.
 *
 * Errors never contain plaintext or key material, only the failure and the key id.
 */

/**
 * The `context` (additional authenticated data) of every sealed column, so a value cannot be moved to
 * another column. The backend seals and the cluster-agent opens with these: both import them from here.
 */
export const SealContext = {
  /** `cluster_credentials.bearer_token_sealed` */
  bearerToken: 'cluster_credentials.bearer_token',
  /** `repository_credentials.username_sealed` */
  username: 'repository_credentials.username',
  /** `repository_credentials.password_sealed` */
  password: 'repository_credentials.password',
  /** `repository_credentials.ssh_private_key_sealed` */
  sshPrivateKey: 'repository_credentials.ssh_private_key',
} as const;
export type SealContext = (typeof SealContext)[keyof typeof SealContext];

export const SEALED_FORMAT_VERSION = 1;
const NONCE_LENGTH = 12;
const TAG_LENGTH = 16;
const KEY_LENGTH = 32;
const MAX_KEY_ID_LENGTH = 255;

export interface SealingKey {
  /** Stored in every sealed value; printable, 1-255 bytes of UTF-8, e.g. '2026-01'. */
  id: string;
  /** 32 random bytes. */
  key: Uint8Array;
}

export interface SealerConfig {
  keys: readonly SealingKey[];
  /** The key new values are sealed with. */
  activeKeyId: string;
}

export type SealingErrorCode = 'MALFORMED' | 'UNSUPPORTED_VERSION' | 'UNKNOWN_KEY' | 'AUTHENTICATION_FAILED';

export class SealingError extends Error {
  readonly code: SealingErrorCode;

  constructor(code: SealingErrorCode, message: string) {
    super(message);
    this.name = 'SealingError';
    this.code = code;
  }
}

export interface Sealer {
  readonly activeKeyId: string;
  /** Encrypts with the active key. `context` must be given again to open the value. */
  seal(plaintext: string | Uint8Array, context?: string): Buffer;
  /** Decrypts and authenticates; throws SealingError if the value was altered or its key is unknown. */
  open(sealed: Uint8Array, context?: string): Buffer;
  /** `open` decoded as UTF-8. */
  openString(sealed: Uint8Array, context?: string): string;
  /** The id of the key a value was sealed with (reads the header only). */
  keyIdOf(sealed: Uint8Array): string;
  /** True when the value was not sealed with the active key (or in an older format). */
  needsResealing(sealed: Uint8Array): boolean;
}

interface Header {
  version: number;
  keyId: string;
  /** Bytes of version + length + key id: the additional authenticated data prefix. */
  headerLength: number;
}

function readHeader(sealed: Uint8Array): Header {
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  if (bytes.length < 2) throw new SealingError('MALFORMED', 'sealed value is too short');
  const version = bytes[0]!;
  if (version !== SEALED_FORMAT_VERSION) {
    throw new SealingError('UNSUPPORTED_VERSION', `sealed value has unsupported format version ${version}`);
  }
  const keyIdLength = bytes[1]!;
  const headerLength = 2 + keyIdLength;
  if (keyIdLength === 0 || bytes.length < headerLength + NONCE_LENGTH + TAG_LENGTH) {
    throw new SealingError('MALFORMED', 'sealed value is truncated');
  }
  const keyId = bytes.subarray(2, headerLength).toString('utf8');
  return { version, keyId, headerLength };
}

function additionalData(header: Buffer, context: string | undefined): Buffer {
  return context === undefined ? header : Buffer.concat([header, Buffer.from(context, 'utf8')]);
}

/** Decodes a key given as base64 (e.g. from a Kubernetes Secret), checking that it is 32 bytes. */
export function decodeSealingKey(base64: string): Buffer {
  const key = Buffer.from(base64.trim(), 'base64');
  if (key.length !== KEY_LENGTH) {
    throw new SealingError('MALFORMED', `sealing key must be ${KEY_LENGTH} bytes, base64 encoded`);
  }
  return key;
}

/** Creates a sealer. Validates the configuration; key bytes are copied, later changes to them have no effect. */
export function createSealer(config: SealerConfig): Sealer {
  const keys = new Map<string, KeyObject>();
  for (const { id, key } of config.keys) {
    const idLength = Buffer.byteLength(id, 'utf8');
    if (idLength === 0 || idLength > MAX_KEY_ID_LENGTH) {
      throw new Error(`sealing key id must be 1-${MAX_KEY_ID_LENGTH} bytes of UTF-8`);
    }
    if (keys.has(id)) throw new Error(`sealing key id ${JSON.stringify(id)} is configured twice`);
    if (key.byteLength !== KEY_LENGTH) {
      throw new Error(`sealing key ${JSON.stringify(id)} must be ${KEY_LENGTH} bytes, got ${key.byteLength}`);
    }
    keys.set(id, createSecretKey(Buffer.from(key)));
  }
  const activeKeyId = config.activeKeyId;
  const activeKey = keys.get(activeKeyId);
  if (activeKey === undefined) {
    throw new Error(`active sealing key ${JSON.stringify(activeKeyId)} is not among the configured keys`);
  }
  const activeIdBytes = Buffer.from(activeKeyId, 'utf8');
  const activeHeader = Buffer.concat([
    Buffer.from([SEALED_FORMAT_VERSION, activeIdBytes.length]),
    activeIdBytes,
  ]);

  function open(sealed: Uint8Array, context?: string): Buffer {
    const { keyId, headerLength } = readHeader(sealed);
    const key = keys.get(keyId);
    if (key === undefined) {
      throw new SealingError(
        'UNKNOWN_KEY',
        `sealed value uses key ${JSON.stringify(keyId)}, which is not configured`,
      );
    }
    const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    const nonce = bytes.subarray(headerLength, headerLength + NONCE_LENGTH);
    const ciphertext = bytes.subarray(headerLength + NONCE_LENGTH, bytes.length - TAG_LENGTH);
    const tag = bytes.subarray(bytes.length - TAG_LENGTH);
    const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_LENGTH });
    decipher.setAAD(additionalData(bytes.subarray(0, headerLength), context));
    decipher.setAuthTag(tag);
    const plaintext = decipher.update(ciphertext);
    try {
      decipher.final();
    } catch {
      // Drop the unauthenticated output before anyone can see it.
      plaintext.fill(0);
      throw new SealingError(
        'AUTHENTICATION_FAILED',
        `sealed value (key ${JSON.stringify(keyId)}) failed authentication: it was altered, or opened with the wrong context`,
      );
    }
    return plaintext;
  }

  return {
    activeKeyId,
    seal(plaintext, context) {
      const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext;
      const nonce = randomBytes(NONCE_LENGTH);
      const cipher = createCipheriv('aes-256-gcm', activeKey, nonce, { authTagLength: TAG_LENGTH });
      cipher.setAAD(additionalData(activeHeader, context));
      const ciphertext = Buffer.concat([cipher.update(data), cipher.final()]);
      return Buffer.concat([activeHeader, nonce, ciphertext, cipher.getAuthTag()]);
    },
    open,
    openString(sealed, context) {
      return open(sealed, context).toString('utf8');
    },
    keyIdOf(sealed) {
      return readHeader(sealed).keyId;
    },
    needsResealing(sealed) {
      const { version, keyId } = readHeader(sealed);
      return version !== SEALED_FORMAT_VERSION || keyId !== activeKeyId;
    },
  };
}
