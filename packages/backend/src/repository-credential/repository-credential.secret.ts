/**
 * The Secret a GitOpsDeploymentRepositoryCredential names, and what the CR asks for: its spec read, the
 * Secret read live in the CR's own namespace, the credentials it holds (pure: type, keys, UTF-8, no control
 * characters) and the fingerprint the validation memo compares (a hash, never a credential).
 */
import { createHash } from 'node:crypto';
import type { GitOpsDeploymentRepositoryCredentialSpec } from '@gitops/api';
import { SecretKey, SecretType } from '@gitops/api';
import type { RepositoryType } from '@gitops/db';
import { getPathIfExists, type KubeConfig } from '@gitops/shared';
import { isJsonObject } from '../json.ts';
import type { GitCredentials } from './git-ls-remote.ts';
import type { RepositoryCredentialOutcome } from './repository-credential.conditions.ts';

/** What a RepositoryCredential asks for: spec.repository (or its alias spec.url), spec.secret, spec.type. */
export interface RepositoryCredentialSpec {
  repository: string;
  secret: string;
  /** git unless spec.type says helm or oci. */
  type: RepositoryType;
}

/** spec.repository, or its alias spec.url; the type, git by default. */
export function parseRepositoryCredentialSpec(
  spec: GitOpsDeploymentRepositoryCredentialSpec,
): RepositoryCredentialSpec {
  const type: RepositoryType = spec.type === 'helm' || spec.type === 'oci' ? spec.type : 'git';
  return { repository: spec.repository || spec.url || '', secret: spec.secret, type };
}

type SecretRead =
  | { ok: true; credentials: GitCredentials }
  | { ok: false; outcome: RepositoryCredentialOutcome };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A Secret value as text; `null` when its bytes are not UTF-8 (binary data is never a Git credential). */
function decode(value: unknown): string | undefined | null {
  if (typeof value !== 'string') return undefined;
  try {
    return utf8.decode(Buffer.from(value, 'base64'));
  } catch {
    return null;
  }
}

/** Control characters (an sshPrivateKey may have line breaks and tabs): Git, its environment and askpass refuse them. */
function hasControlCharacters(value: string, allowLineBreaks: boolean): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (allowLineBreaks && (code === 0x09 || code === 0x0a || code === 0x0d)) continue;
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** Why a credential value cannot be used, naming the key and never the value. */
function unusableValue(key: string, value: string | undefined | null, multiline = false): string | undefined {
  if (value === null) return `${key} is not UTF-8 text (binary data)`;
  if (value !== undefined && hasControlCharacters(value, multiline)) {
    return `${key} contains control characters`;
  }
  return undefined;
}

/**
 * A user Secret's credentials (pure; exported for tests). A Helm repository or an OCI registry takes a
 * username and password only (Argo CD has no SSH for them).
 */
export function credentialsOfSecret(
  secretName: string,
  secret: unknown,
  repositoryType: RepositoryType = 'git',
): SecretRead {
  const object = isJsonObject(secret) ? secret : {};
  // The API server writes `Opaque` for a Secret created without a type (as the public API document shows it).
  const type = typeof object.type === 'string' && object.type !== '' ? object.type : SecretType.Opaque;
  if (type !== SecretType.RepositoryCredential && type !== SecretType.Opaque) {
    return { ok: false, outcome: { kind: 'secretInvalidType', secret: secretName, type } };
  }
  const data = isJsonObject(object.data) ? object.data : {};
  const username = decode(data[SecretKey.Username]);
  const password = decode(data[SecretKey.Password]);
  const sshPrivateKey = decode(data[SecretKey.SshPrivateKey]);
  const problem =
    unusableValue(SecretKey.SshPrivateKey, sshPrivateKey, true) ??
    unusableValue(SecretKey.Username, username) ??
    unusableValue(SecretKey.Password, password);
  if (problem) {
    return { ok: false, outcome: { kind: 'secretInvalidContent', secret: secretName, problem } };
  }
  if (typeof sshPrivateKey === 'string' && sshPrivateKey.trim() !== '') {
    if (repositoryType !== 'git') {
      return {
        ok: false,
        outcome: {
          kind: 'secretInvalidContent',
          secret: secretName,
          problem: `a repository of type ${repositoryType} takes username and password, not sshPrivateKey`,
        },
      };
    }
    return { ok: true, credentials: { sshPrivateKey } };
  }
  if (typeof username === 'string' || typeof password === 'string') {
    if (!username || !password) {
      return {
        ok: false,
        outcome: {
          kind: 'secretInvalidContent',
          secret: secretName,
          problem: 'both username and password must be set',
        },
      };
    }
    return { ok: true, credentials: { username, password } };
  }
  return {
    ok: false,
    outcome: {
      kind: 'secretInvalidContent',
      secret: secretName,
      problem: 'it must contain username and password, or sshPrivateKey',
    },
  };
}

export function fingerprintOf(
  uid: string,
  url: string,
  type: RepositoryType,
  credentials: GitCredentials,
): string {
  // In memory only; a hash, so the memo never holds a credential.
  return createHash('sha256')
    .update(
      JSON.stringify([uid, url, type, credentials.username, credentials.password, credentials.sshPrivateKey]),
    )
    .digest('hex');
}

/** The Secret `name` of `namespace`, live; undefined when there is none. */
export async function readSecret(
  deps: { kc: KubeConfig },
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<unknown> {
  return await getPathIfExists(
    deps.kc,
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
    signal,
  );
}
