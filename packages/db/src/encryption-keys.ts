/**
 * `GITOPS_ENCRYPTION_KEYS`, the sealing keys both processes are configured with (the backend seals, the
 * cluster-agent opens): `id=<base64 32 bytes>[,id2=...]`, the first key is the active one. One parser for
 * both, so the two can never disagree on what a valid value is.
 */
import type { EnvVar } from '@gitops/shared';
import { z } from 'zod';
import { decodeSealingKey, type SealingKey } from './sealing.ts';

/** The configured sealing keys; the first is the active one. */
export interface EncryptionKeys {
  keys: SealingKey[];
  activeKeyId: string;
}

/**
 * Parses `id=<base64 32 bytes>[,id2=...]` (entries and ids trimmed; ids unique). The error reason never
 * contains key material.
 */
export function parseEncryptionKeys(raw: string): { value: EncryptionKeys } | { error: string } {
  const keys: SealingKey[] = [];
  for (const [index, entry] of raw.split(',').entries()) {
    const trimmed = entry.trim();
    const equals = trimmed.indexOf('=');
    const id = trimmed.slice(0, equals).trim();
    if (equals <= 0 || id === '')
      return { error: `entry ${index + 1} must look like id=<base64 of 32 bytes>` };
    if (keys.some((k) => k.id === id)) return { error: `key id ${JSON.stringify(id)} is given twice` };
    try {
      keys.push({ id, key: decodeSealingKey(trimmed.slice(equals + 1)) });
    } catch {
      return { error: `key ${JSON.stringify(id)} must be 32 bytes, base64 encoded` };
    }
  }
  const first = keys[0];
  if (!first) return { error: 'is required' };
  return { value: { keys, activeKeyId: first.id } };
}

/** The config variable (secret: its value is never echoed); required. */
export function encryptionKeysVar(name = 'GITOPS_ENCRYPTION_KEYS'): EnvVar<EncryptionKeys> {
  return keysVar(name, true) as EnvVar<EncryptionKeys>;
}

/** The same keys, not required: unset is `undefined` (a cluster-agent with its own instance key needs none). */
export function optionalEncryptionKeysVar(
  name = 'GITOPS_ENCRYPTION_KEYS',
): EnvVar<EncryptionKeys | undefined> {
  return keysVar(name, false);
}

function keysVar(name: string, required: boolean): EnvVar<EncryptionKeys | undefined> {
  const schema = z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if ((raw === undefined || raw === '') && !required) return undefined;
      const result = raw === undefined ? { error: 'is required' } : parseEncryptionKeys(raw);
      if ('error' in result) {
        ctx.addIssue({ code: 'custom', message: result.error });
        return z.NEVER;
      }
      return result.value;
    });
  return {
    name,
    schema,
    secret: true,
    description: `sealing keys id=<base64 32 bytes>[,id2=...]; the first is active${required ? '' : ' (optional)'}`,
  };
}
