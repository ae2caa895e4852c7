import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { insertApplication } from '../application.repository.ts';
import { upsertClusterUser } from '../cluster-user.repository.ts';
import type { ApplicationRow, ClusterUserRow, Database, EngineInstanceRow } from '../database.ts';
import { upsertEngineInstance } from '../engine-instance.repository.ts';

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
