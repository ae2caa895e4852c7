import assert from 'node:assert/strict';
import { describe, it } from 'vitest';
import { gitOpsDeployment, managedEnvironment, repositoryCredential, syncRun } from './builders.ts';

describe('core kind builders', () => {
  it('build a GitOpsDeployment exactly as given, with the API group and kind', () => {
    const spec = { source: { repoURL: 'file:///repo.git', path: 'dev' }, type: 'automated' as const };
    assert.deepEqual(gitOpsDeployment('app', spec, { namespace: 'team', labels: { a: 'b' } }), {
      apiVersion: 'managed-gitops.redhat.com/v1alpha1',
      kind: 'GitOpsDeployment',
      metadata: { name: 'app', namespace: 'team', labels: { a: 'b' } },
      spec,
    });
  });

  it('build a SyncRun and a RepositoryCredential without adding to the spec', () => {
    assert.deepEqual(syncRun('run', { gitopsDeploymentName: 'app', revisionID: 'v1' }), {
      apiVersion: 'managed-gitops.redhat.com/v1alpha1',
      kind: 'GitOpsDeploymentSyncRun',
      metadata: { name: 'run' },
      spec: { gitopsDeploymentName: 'app', revisionID: 'v1' },
    });
    assert.deepEqual(repositoryCredential('cred', { repository: 'https://git/x', secret: 's' }).spec, {
      repository: 'https://git/x',
      secret: 's',
    });
    assert.equal(repositoryCredential('cred', { secret: 's' }).kind, 'GitOpsDeploymentRepositoryCredential');
  });

  it('build a ManagedEnvironment that verifies TLS unless told otherwise', () => {
    const env = managedEnvironment('env', { apiURL: 'https://k8s', credentialsSecret: 's' });
    assert.equal(env.kind, 'GitOpsDeploymentManagedEnvironment');
    assert.deepEqual(env.spec, {
      allowInsecureSkipTLSVerify: false,
      apiURL: 'https://k8s',
      credentialsSecret: 's',
    });
    const insecure = managedEnvironment('env', {
      apiURL: 'https://k8s',
      credentialsSecret: 's',
      allowInsecureSkipTLSVerify: true,
    });
    assert.equal(insecure.spec.allowInsecureSkipTLSVerify, true);
  });
});
