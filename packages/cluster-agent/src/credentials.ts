/**
 * How the agent opens a stored credential (docs/threat-model.md). With its own database role it has its
 * instance's key pair (instance-key.ts) and opens only what the backend sealed for this instance: a value not
 * sealed yet, or sealed from an older version of its row, is waited for (the backend seals within moments of
 * every change), never guessed. With the backend's role (the 0.1.0 way) it opens the stored value with
 * GITOPS_ENCRYPTION_KEYS, as before. A value sealed for the instance but missing while the agent still holds
 * GITOPS_ENCRYPTION_KEYS (during an upgrade) falls back to them.
 */
import {
  type Db,
  INSTANCE_SEALED_FIELDS,
  type InstanceKeyring,
  type InstanceSealedField,
  instanceSealContext,
  listInstanceSealedValues,
  type Sealer,
} from '@gitops/db';
import { ErrorCode, TerminalError } from '@gitops/shared';

/** A credential row's sealed fields: the backend's stored value of each (null: the field is not set). */
export interface SealedCredential {
  table: 'cluster_credentials' | 'repository_credentials';
  id: string;
  /** The row's updated_at: a value sealed for the instance from this version of the row is current. */
  updatedAt: Date;
  fields: Partial<Record<InstanceSealedField, Uint8Array | null>>;
}

export type OpenedCredential =
  | { values: Partial<Record<InstanceSealedField, string>> }
  /** Not sealed for this instance yet: the reason, for a pending outcome. */
  | { waiting: string };

export interface CredentialOpener {
  open(credential: SealedCredential): Promise<OpenedCredential>;
}

/** A stored credential that the keys this agent has do not open (its message names the key, never a value). */
export class UnreadableCredentialError extends Error {
  override readonly name = 'UnreadableCredentialError';
}

/** How long a reconcile waits before it looks again for a value the backend has not sealed yet. */
export const SEALING_WAIT_MS = 500;

export function createCredentialOpener(deps: {
  db: Db;
  engineInstanceId: string;
  keyring: () => InstanceKeyring | undefined;
  /** GITOPS_ENCRYPTION_KEYS, when the agent has them (an agent with the backend's role, or during an upgrade). */
  sealer: Sealer | undefined;
}): CredentialOpener {
  const legacy = (field: InstanceSealedField, value: Uint8Array, credential: SealedCredential): string => {
    if (!deps.sealer) {
      throw new TerminalError(
        ErrorCode.configInvalid,
        `the credentials of ${credential.table} ${credential.id} cannot be opened: this agent has no engine instance key (it runs with the backend's database role) and no GITOPS_ENCRYPTION_KEYS`,
      );
    }
    const sealer = deps.sealer;
    try {
      return sealer.openString(value, INSTANCE_SEALED_FIELDS[field].context);
    } catch (err) {
      // Which key, never the value. Retried (the key may be configured next): callers decide otherwise.
      let keyId = 'unknown';
      try {
        keyId = sealer.keyIdOf(value);
      } catch {}
      throw new UnreadableCredentialError(
        `the credentials of ${credential.table} ${credential.id} cannot be unsealed (key ${keyId}; is it in GITOPS_ENCRYPTION_KEYS?): ${(err as Error).message}`,
      );
    }
  };

  return {
    async open(credential) {
      const wanted = Object.entries(credential.fields).filter(
        (entry): entry is [InstanceSealedField, Uint8Array] => entry[1] !== null && entry[1] !== undefined,
      );
      const values: Partial<Record<InstanceSealedField, string>> = {};
      const keyring = deps.keyring();
      if (!keyring) {
        for (const [field, value] of wanted) values[field] = legacy(field, value, credential);
        return { values };
      }
      const sealed = await listInstanceSealedValues(
        deps.db,
        deps.engineInstanceId,
        credential.table === 'cluster_credentials'
          ? { clusterCredentialsId: credential.id }
          : { repositoryCredentialsId: credential.id },
      );
      for (const [field, value] of wanted) {
        const mine = sealed.find((s) => s.field === field);
        const current = mine && mine.sourceUpdatedAt.getTime() === credential.updatedAt.getTime();
        if (current && keyring.keyIds().includes(mine.keyId)) {
          values[field] = await keyring.open(mine.sealed, instanceSealContext(field, credential.id));
        } else if (deps.sealer) {
          values[field] = legacy(field, value, credential);
        } else {
          return {
            waiting: `waiting for the backend to seal the credentials of ${credential.table} ${credential.id} for this engine instance`,
          };
        }
      }
      return { values };
    },
  };
}
