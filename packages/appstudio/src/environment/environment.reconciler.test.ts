import assert from 'node:assert/strict';
import { AppStudioKinds, SecretType } from '@gitops/api';
import { describe, it } from 'vitest';
import type { ClaimCr, EnvironmentCr, TargetCr } from '../objects.ts';
import {
  cacheOf,
  claim,
  claimedEnvironment,
  credentialsEnvironment,
  NS,
  noApiServer,
  object,
  ownerRefTo,
  quietLogger,
  recordedEvents,
} from '../testing/unit.ts';
import { type EnvironmentReconcilerDeps, reconcileEnvironment } from './environment.reconciler.ts';

function deps(
  caches: Partial<Pick<EnvironmentReconcilerDeps, 'environments' | 'managedEnvironments' | 'secrets'>> & {
    claims?: ClaimCr[];
    targets?: TargetCr[];
  } = {},
) {
  const recorded = recordedEvents();
  const d: EnvironmentReconcilerDeps = {
    kc: noApiServer(),
    events: recorded.recorder,
    now: () => new Date('2026-01-01T00:00:00Z'),
    shardLabels: {},
    environments: caches.environments ?? cacheOf<EnvironmentCr>(),
    managedEnvironments: caches.managedEnvironments ?? cacheOf(),
    secrets: caches.secrets ?? cacheOf(),
    opaqueSecrets: cacheOf(),
    claims: cacheOf(...(caches.claims ?? [])),
    targets: cacheOf(...(caches.targets ?? [])),
  };
  return { deps: d, events: recorded.events };
}

describe('Environment reconcile, passes that write nothing', () => {
  it('an Environment gone, with no ManagedEnvironment of its own: nothing to do', async () => {
    const notOurs = object('managed-environment-dev', {}, { ownerReferences: [] });
    const { deps: d, events } = deps({ managedEnvironments: cacheOf(notOurs) });
    assert.equal(await reconcileEnvironment(d, `${NS}/dev`, quietLogger), undefined);
    assert.deepEqual(events, []);
  });

  it('a claim not Bound yet: waits for its events', async () => {
    const { deps: d, events } = deps({
      environments: cacheOf(claimedEnvironment('dev', 'c')),
      claims: [claim('c')],
    });
    assert.equal(await reconcileEnvironment(d, `${NS}/dev`, quietLogger), undefined);
    assert.deepEqual(events, []);
  });

  it('its ManagedEnvironment up to date and no conditions: nothing written, no Event', async () => {
    const env = credentialsEnvironment('dev');
    const me = object(
      'managed-environment-dev',
      { spec: { apiURL: 'https://c.example', credentialsSecret: 'creds' } },
      { ownerReferences: [ownerRefTo(AppStudioKinds.Environment, env)] },
    );
    const secret = object('creds', { type: SecretType.ManagedEnvironment });
    const { deps: d, events } = deps({
      environments: cacheOf(env),
      managedEnvironments: cacheOf(me),
      secrets: cacheOf(secret),
    });
    assert.equal(await reconcileEnvironment(d, `${NS}/dev`, quietLogger), undefined);
    assert.deepEqual(events, []);
  });
});
