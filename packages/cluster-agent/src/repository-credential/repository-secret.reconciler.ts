/**
 * Makes Argo CD's repository Secrets match the repository_credentials rows of this engine instance
 * (level-based; serves operations, drift repair and orphan cleanup alike):
 * row exists → server-side apply `repo-cred-<id>` and `repo-cred-<id>-cluster` (one per tenant AppProject;
 * credentials opened from their sealed columns);
 * row gone (or on another engine instance) → delete every Secret labelled with its id.
 * The tenant's AppProject (sourceRepos include the credential's URL) is updated by the caller.
 */
import {
  type Db,
  getRepositoryCredentials,
  listRepositoryCredentialIdsOfEngineInstance,
  type RepositoryCredentialsRow,
} from '@gitops/db';
import {
  collectionPath,
  deleteIfExists,
  ErrorCode,
  HttpMethod,
  type Informer,
  isKubeObject,
  type KubeConfig,
  type KubeObject,
  kubeRequest,
  type Logger,
  mergePatch,
  secretRef,
  serverSideApply,
  TerminalError,
} from '@gitops/shared';
import type { ResourceOutcome } from '../agent-context.ts';
import { AgentLabel, databaseIdOf, FIELD_MANAGER, isUuid } from '../argocd.ts';
import { type CredentialOpener, SEALING_WAIT_MS, UnreadableCredentialError } from '../credentials.ts';
import {
  REPOSITORY_SECRET_SELECTOR,
  type renderRepositorySecret,
  renderRepositorySecrets,
  repositorySecretDrifted,
} from './repository-secret.render.ts';

export interface RepositorySecretReconcilerOptions {
  kc: KubeConfig;
  db: Db;
  /** Opens the row's credentials (sealed for this instance: credentials.ts). */
  credentials: CredentialOpener;
  namespace: string;
  engineInstanceId: string;
  /** Our repository Secrets in the Argo CD namespace ({@link REPOSITORY_SECRET_SELECTOR}). */
  secrets: Informer<KubeObject>;
}

export interface RepositorySecretReconciler {
  /** Returns the outcome and the tenant of the row (when it exists), for the AppProject update. */
  reconcile(
    id: string,
    options: { signal: AbortSignal; logger: Logger },
  ): Promise<{ outcome: ResourceOutcome; clusterUserId?: string }>;
  /** Ids of live Secrets whose row is missing, and of every row (the periodic pass). */
  resync(enqueue: (id: string) => void, signal: AbortSignal): Promise<number>;
}

export function createRepositorySecretReconciler(
  options: RepositorySecretReconcilerOptions,
): RepositorySecretReconciler {
  const { kc, db, credentials, namespace, engineInstanceId, secrets } = options;

  /** The row's username, password and SSH key, opened (credentials.ts), or why they must be waited for. */
  async function openRow(row: RepositoryCredentialsRow) {
    try {
      return await credentials.open({
        table: 'repository_credentials',
        id: row.id,
        updatedAt: row.updated_at,
        fields: {
          username: row.username_sealed,
          password: row.password_sealed,
          ssh_private_key: row.ssh_private_key_sealed,
        },
      });
    } catch (err) {
      // Never retried: a value sealed with a key this agent does not have needs a configuration change.
      if (err instanceof UnreadableCredentialError)
        throw new TerminalError(
          ErrorCode.invalidObject,
          'a repository credential could not be decrypted (is the key in GITOPS_ENCRYPTION_KEYS?)',
        );
      throw err;
    }
  }

  async function liveSecretsOf(id: string, signal: AbortSignal): Promise<KubeObject[]> {
    const list = (await kubeRequest(kc, {
      method: HttpMethod.GET,
      path: collectionPath({ apiVersion: 'v1', plural: 'secrets', namespace }),
      query: { labelSelector: `${REPOSITORY_SECRET_SELECTOR},${AgentLabel.DatabaseId}=${id}` },
      signal,
    })) as { items?: unknown };
    return Array.isArray(list.items) ? list.items.filter(isKubeObject) : [];
  }

  /** Applies one Secret when it drifted, removing data keys we do not declare. Returns whether it wrote. */
  async function applySecret(
    desired: ReturnType<typeof renderRepositorySecret>,
    signal: AbortSignal,
    logger: Logger,
  ): Promise<boolean> {
    const live = secrets.get(namespace, desired.metadata.name);
    if (!repositorySecretDrifted(live, desired)) return false;
    await serverSideApply(kc, desired, { fieldManager: FIELD_MANAGER, force: true, signal });
    const extra = Object.keys((live as { data?: Record<string, unknown> } | undefined)?.data ?? {}).filter(
      (key) => !(key in desired.data),
    );
    if (extra.length > 0) {
      // Keys another manager added (or we owned before, e.g. password → sshPrivateKey): remove them.
      await mergePatch(
        kc,
        secretRef(namespace, desired.metadata.name),
        { data: Object.fromEntries(extra.map((key) => [key, null])) },
        { fieldManager: FIELD_MANAGER, signal },
      );
    }
    logger.info({ secret: desired.metadata.name, created: live === undefined }, 'repository Secret applied');
    return true;
  }

  return {
    async reconcile(id, { signal, logger }) {
      const row = isUuid(id) ? await getRepositoryCredentials(db, id) : undefined;
      if (!row || row.engine_instance_id !== engineInstanceId) {
        let deleted = false;
        for (const secret of await liveSecretsOf(id, signal)) {
          deleted =
            (await deleteIfExists(kc, secretRef(namespace, secret.metadata.name), {
              uid: secret.metadata.uid,
              signal,
            })) || deleted;
          logger.info({ secret: secret.metadata.name }, 'repository Secret deleted (its row is gone)');
        }
        return { outcome: { status: 'done', changed: deleted } };
      }
      const opened = await openRow(row);
      if ('waiting' in opened) {
        return {
          outcome: { status: 'pending', reason: opened.waiting, requeueAfterMs: SEALING_WAIT_MS },
          clusterUserId: row.cluster_user_id,
        };
      }
      const secretsOfRow = renderRepositorySecrets({
        id: row.id,
        clusterUserId: row.cluster_user_id,
        repositoryUrl: row.repository_url,
        repositoryType: row.repository_type,
        username: opened.values.username,
        password: opened.values.password,
        sshPrivateKey: opened.values.ssh_private_key,
        namespace,
      });
      let changed = false;
      for (const desired of secretsOfRow) {
        changed = (await applySecret(desired, signal, logger)) || changed;
      }
      return { outcome: { status: 'done', changed }, clusterUserId: row.cluster_user_id };
    },

    async resync(enqueue, signal) {
      let queued = 0;
      const ids = new Set(await listRepositoryCredentialIdsOfEngineInstance(db, engineInstanceId));
      for (const id of ids) {
        if (signal.aborted) return queued;
        enqueue(id);
        queued++;
      }
      for (const secret of secrets.list(namespace)) {
        const id = databaseIdOf(secret);
        if (id && !ids.has(id)) {
          enqueue(id);
          queued++;
        }
      }
      return queued;
    },
  };
}
