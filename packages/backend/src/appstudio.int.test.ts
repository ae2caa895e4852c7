/**
 * The App Studio controllers inside the backend (GITOPS_APPSTUDIO, default on): a binding's generated
 * GitOpsDeployment carries the backend's shard label and goes down the core pipeline like one a user wrote.
 */
import assert from 'node:assert/strict';
import { AppStudioKinds, Kinds } from '@gitops/api';
import { getApiCrMappingByUid } from '@gitops/db';
import { collectionPath, HttpMethod, type KubeObject, kubeRequest } from '@gitops/shared';
import { eventually } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import { BACKEND_SHARD_LABEL } from './config.ts';
import { useStartedBackend } from './testing/backend-fixture.ts';

describe('App Studio in the backend', () => {
  const { f, tenant } = useStartedBackend({}, 'appstudio-be');

  const create = (
    kind: { apiVersion: string; kind: string; resource: { apiVersion: string; plural: string } },
    name: string,
    body: Record<string, unknown>,
  ) =>
    kubeRequest(f.kc, {
      method: HttpMethod.POST,
      path: collectionPath({ ...kind.resource, namespace: tenant.name }),
      body: {
        apiVersion: kind.apiVersion,
        kind: kind.kind,
        metadata: { name, namespace: tenant.name, labels: { [BACKEND_SHARD_LABEL]: f.runLabel } },
        ...body,
      },
    });

  it('a binding with component status becomes a GitOpsDeployment that the backend serves', async () => {
    await create(AppStudioKinds.Application, 'app', { spec: { displayName: 'app' } });
    await create(AppStudioKinds.Environment, 'dev', {
      spec: { displayName: '', deploymentStrategy: 'Manual' },
    });
    await create(AppStudioKinds.SnapshotEnvironmentBinding, 'app-dev', {
      spec: { application: 'app', environment: 'dev', snapshot: 's', components: [{ name: 'web' }] },
    });
    await kubeRequest(f.kc, {
      method: HttpMethod.PATCH,
      path: `${collectionPath({ ...AppStudioKinds.SnapshotEnvironmentBinding.resource, namespace: tenant.name })}/app-dev/status`,
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          components: [
            {
              name: 'web',
              gitopsRepository: {
                url: 'https://example.com/repo.git',
                branch: 'main',
                path: 'components/web/overlays/dev',
                generatedResources: [],
                commitID: '',
              },
            },
          ],
        },
      },
    });
    const deployment = await eventually('the generated GitOpsDeployment', () =>
      f.getDeployment(tenant.name, 'app-dev-app-dev-web'),
    );
    assert.equal(deployment.metadata.labels?.[BACKEND_SHARD_LABEL], f.runLabel);
    assert.equal(
      (deployment as KubeObject & { apiVersion: string }).apiVersion,
      Kinds.GitOpsDeployment.apiVersion,
    );
    await eventually('the backend maps it to an application row', () =>
      getApiCrMappingByUid(f.db, deployment.metadata.uid ?? ''),
    );
  });
});
