import assert from 'node:assert/strict';
import { AppStudioKinds, AppStudioLabel, LEGACY_ENVIRONMENT_OWNER_API_VERSION } from '@gitops/api';
import { describe, it } from 'vitest';
import {
  assertOwnEvents,
  claim,
  claimedEnvironment,
  credentialsEnvironment,
  deleting,
  environment,
  object,
  target,
  updated,
  useWatches,
} from '../testing/unit.ts';
import {
  type EnvironmentWatchDeps,
  environmentChanged,
  environmentOwnerOf,
  watchEnvironmentSources,
} from './environment.watches.ts';

const Environment = AppStudioKinds.Environment;
const ownedBy = (name: string, owner: string, apiVersion = Environment.apiVersion, controller = true) =>
  object(
    `managed-environment-${name}`,
    { spec: { apiURL: 'https://c.example' } },
    {
      ownerReferences: [{ apiVersion, kind: 'Environment', name: owner, uid: `uid-${owner}`, controller }],
    },
  );

describe('Environment watches: which events wake which Environments', () => {
  const watch = useWatches<EnvironmentWatchDeps>(
    ['environments', 'managedEnvironments', 'secrets', 'opaqueSecrets', 'claims', 'targets'],
    { predicates: [environmentChanged] },
    watchEnvironmentSources,
  );

  it('the Environment: created, its spec, a relist, its deletion wake it; a status write does not', async () => {
    await assertOwnEvents(watch, watch.sources.environments, environment('dev'), {
      ownWrite: { status: { conditions: [] } },
      changes: [(env) => updated(env, { spec: { displayName: 'Dev' } }), deleting],
      removed: true,
    });
  });

  it('a ManagedEnvironment wakes the Environment that owns it (either owner form), on spec changes only', async () => {
    const me = ownedBy('dev', 'dev');
    assert.deepEqual(await watch.wakes(() => watch.sources.managedEnvironments.put(me)), ['ns/dev']);
    const statusOnly = updated(me, { status: { conditions: [] } });
    assert.deepEqual(await watch.wakes(() => watch.sources.managedEnvironments.put(statusOnly)), []);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.managedEnvironments.put(updated(statusOnly, { spec: {} }))),
      ['ns/dev'],
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.managedEnvironments.remove(statusOnly)), [
      'ns/dev',
    ]);
    const legacy = ownedBy('old', 'old', LEGACY_ENVIRONMENT_OWNER_API_VERSION, false);
    assert.deepEqual(await watch.wakes(() => watch.sources.managedEnvironments.put(legacy)), ['ns/old']);
    const foreign = object(
      'managed-environment-x',
      {},
      {
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'u' }],
      },
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.managedEnvironments.put(foreign)), []);
  });

  it('a Secret wakes the Environments naming it, those whose claim is bound to a target naming it, and the one its copy was made for', async () => {
    watch.sources.environments.put(credentialsEnvironment('direct'));
    watch.sources.environments.put(
      credentialsEnvironment('other', { clusterCredentialsSecret: 'unrelated' }),
    );
    watch.sources.environments.put(claimedEnvironment('via-claim', 'c1'));
    watch.sources.environments.put(environment('copied'));
    watch.sources.claims.put(claim('c1', { targetName: 't1' }));
    watch.sources.targets.put(
      target('t1', {
        kubernetesCredentials: {
          defaultNamespace: 'x',
          apiURL: 'https://c.example',
          clusterCredentialsSecret: 'creds',
          allowInsecureSkipTLSVerify: false,
        },
      }),
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.secrets.put(object('creds'))), [
      'ns/direct',
      'ns/via-claim',
    ]);
    assert.deepEqual(await watch.wakes(() => watch.sources.opaqueSecrets.put(object('creds'))), [
      'ns/direct',
      'ns/via-claim',
    ]);
    const copy = object(
      'managed-environment-secret-copied',
      {},
      {
        labels: { [AppStudioLabel.EnvironmentSecret]: 'copied' },
      },
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.secrets.put(copy)), ['ns/copied']);
    assert.deepEqual(await watch.wakes(() => watch.sources.secrets.remove(copy)), ['ns/copied']);
    assert.deepEqual(await watch.wakes(() => watch.sources.secrets.put(object('nobodys'))), []);
  });

  it('a claim wakes the Environments naming it (every event); a target, those of its claims on spec changes', async () => {
    watch.sources.environments.put(claimedEnvironment('dev', 'c1'));
    watch.sources.environments.put(claimedEnvironment('prod', 'c2'));
    const c1 = claim('c1');
    assert.deepEqual(await watch.wakes(() => watch.sources.claims.put(c1)), ['ns/dev']);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.claims.put(updated(c1, { status: { phase: 'Bound' } }))),
      ['ns/dev'],
    );
    const t = target('t1', { claimRef: 'c1' });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(t)), ['ns/dev']);
    const statusOnly = updated(t, { status: { phase: 'Bound' } });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(statusOnly)), []);
    // A target named by a claim's targetName (no claimRef yet).
    watch.sources.claims.put(claim('c2', { targetName: 't2' }));
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(target('t2'))), ['ns/prod']);
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.remove(statusOnly)), ['ns/dev']);
  });
});

describe('environmentOwnerOf', () => {
  it('reads the controller ownerReference and the legacy form, nothing else', () => {
    assert.equal(environmentOwnerOf(ownedBy('a', 'dev')), 'dev');
    assert.equal(environmentOwnerOf(ownedBy('a', 'dev', LEGACY_ENVIRONMENT_OWNER_API_VERSION, false)), 'dev');
    assert.equal(environmentOwnerOf(ownedBy('a', 'dev', 'other.io/v1')), undefined);
    assert.equal(environmentOwnerOf(object('a')), undefined);
  });
});
