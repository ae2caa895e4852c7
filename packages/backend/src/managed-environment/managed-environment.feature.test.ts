import assert from 'node:assert/strict';
import { type KubeObject, passesCreate, passesDelete, passesUpdate } from '@gitops/shared';
import { describe, it } from 'vitest';
import { connectionChanged } from './managed-environment.feature.ts';

const environment = (rv: string, status: string | undefined, generation = 1): KubeObject => ({
  metadata: { name: 'env', namespace: 'tenant', resourceVersion: rv, generation },
  spec: { apiURL: 'https://cluster.example:6443', credentialsSecret: 'creds' },
  ...(status
    ? {
        status: {
          conditions: [
            { type: 'ConnectionInitializationSucceeded', status, reason: 'Succeeded', message: '' },
          ],
        },
      }
    : {}),
});

describe("what wakes a namespace's GitOpsDeployments from its environments' cache", () => {
  it('a connection condition that changed or an environment that is gone; not a create, a relist or a spec edit', () => {
    const p = [connectionChanged];
    assert.equal(passesUpdate(p, environment('1', undefined), environment('2', 'True')), true);
    assert.equal(passesUpdate(p, environment('2', 'True'), environment('3', 'False')), true);
    assert.equal(passesDelete(p, environment('3', 'False')), true);
    assert.equal(passesUpdate(p, environment('2', 'True'), environment('2', 'True')), false);
    // A spec edit: its reconcile writes the rows and says so (onEnvironmentChanged), not this watch.
    assert.equal(passesUpdate(p, environment('2', 'True'), environment('4', 'True', 2)), false);
    assert.equal(passesCreate(p, environment('1', 'True')), false);
  });
});
