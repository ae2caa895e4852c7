import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { insertApplication } from '../application.repository.ts';
import { upsertClusterUser } from '../cluster-user.repository.ts';
import type { ApplicationRow, ClusterUserRow, Database, EngineInstanceRow } from '../database.ts';
import { upsertEngineInstance } from '../engine-instance.repository.ts';
import { holdAgentListeningLock } from '../operation.repository.ts';

/** Rows the db package's integration tests build on. Exported from `@gitops/db/testing`, not from the package's production index. */

export async function givenEngineInstance(
  db: Kysely<Database>,
  name = `argocd-${randomUUID()}`,
): Promise<EngineInstanceRow> {
  return await upsertEngineInstance(db, {
    name,
    namespaceName: name,
    namespaceUid: randomUUID(),
    clusterIdentity: 'test-cluster',
  });
}

export async function givenClusterUser(db: Kysely<Database>): Promise<ClusterUserRow> {
  const uid = randomUUID();
  return await upsertClusterUser(db, { uid, name: `tenant-${uid.slice(0, 8)}` });
}

export async function givenApplication(
  db: Kysely<Database>,
  input: {
    clusterUser: ClusterUserRow;
    engineInstance: EngineInstanceRow;
    managedEnvironmentId?: string | null;
  },
): Promise<ApplicationRow> {
  return await insertApplication(db, {
    name: `gitopsdepl-${randomUUID()}`,
    clusterUserId: input.clusterUser.id,
    engineInstanceId: input.engineInstance.id,
    managedEnvironmentId: input.managedEnvironmentId ?? null,
    spec: { source: { repoURL: 'https://github.com/org/repo', path: 'env/dev' } },
  });
}

/**
 * Plays a cluster-agent's LISTEN connection: a session of its own (not from a pool) holding the
 * agent-listening lock of `engineInstanceId`. `end()` closes the session, as an agent that stops or crashes.
 */
export async function givenListeningAgentSession(
  url: string,
  engineInstanceId: string,
): Promise<{ held: boolean; end(): Promise<void> }> {
  const session = new pg.Client({ connectionString: url });
  await session.connect();
  const held = await holdAgentListeningLock(session, engineInstanceId);
  return { held, end: () => session.end() };
}
