import assert from 'node:assert/strict';
import { AppStudioKinds } from '@gitops/api';
import { describe, it } from 'vitest';
import type { BindingCr } from '../objects.ts';
import {
  application,
  assertOwnEvents,
  binding,
  claim,
  claimedEnvironment,
  environment,
  object,
  ownerRefTo,
  target,
  updated,
  useWatches,
} from '../testing/unit.ts';
import { type BindingWatchDeps, bindingChanged, watchBindingSources } from './binding.watches.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;
const controlledBy = (b: BindingCr, controller = true) => ({
  ownerReferences: [ownerRefTo(Binding, b, controller)],
});

describe('SnapshotEnvironmentBinding watches: which events wake which bindings', () => {
  const watch = useWatches<BindingWatchDeps>(
    ['bindings', 'environments', 'deployments', 'applications', 'claims', 'targets'],
    { type: Binding, predicates: [bindingChanged] },
    watchBindingSources,
  );

  it("the binding: its spec, labels, deletion, a relist and other writers' status fields wake it; its own status writes do not", async () => {
    const gitopsRepository = { url: 'u', branch: 'main', path: 'p', generatedResources: [], commitID: 'c1' };
    await assertOwnEvents(watch, watch.sources.bindings, binding('b'), {
      ownWrite: { status: { gitopsDeployments: [{ componentName: 'web' }] } },
      changes: [
        (own) => updated(own, { status: { ...own.status, components: [{ name: 'web', gitopsRepository }] } }),
        (b) => updated(b, { metadata: { labels: { team: 'a' } } }),
        (b) => updated(b, { spec: { ...b.spec, snapshot: 'snap-2' } }),
      ],
      removed: false,
    });
  });

  it('a GitOpsDeployment wakes the binding that controls it, at every event', async () => {
    const b = binding('b');
    watch.sources.bindings.put(b);
    const d = object('b-app-dev-web', { status: { sync: { status: 'OutOfSync' } } }, controlledBy(b));
    assert.deepEqual(await watch.wakes(() => watch.sources.deployments.put(d)), ['ns/b']);
    assert.deepEqual(
      await watch.wakes(() =>
        watch.sources.deployments.put(updated(d, { status: { sync: { status: 'Synced' } } })),
      ),
      ['ns/b'],
    );
    const notControlled = object('x', {}, controlledBy(b, false));
    assert.deepEqual(await watch.wakes(() => watch.sources.deployments.put(notControlled)), []);
  });

  it('its Environment: created, its spec, a relist and deletion; its Application: only created or deleted', async () => {
    watch.sources.bindings.put(binding('b'));
    watch.sources.bindings.put(binding('elsewhere', { environment: 'prod', application: 'other' }));
    const env = environment('dev');
    assert.deepEqual(await watch.wakes(() => watch.sources.environments.put(env)), ['ns/b']);
    const status = updated(env, { status: { conditions: [] } });
    assert.deepEqual(await watch.wakes(() => watch.sources.environments.put(status)), []);
    assert.deepEqual(await watch.wakes(() => watch.sources.environments.remove(status)), ['ns/b']);
    const app = application('app');
    assert.deepEqual(await watch.wakes(() => watch.sources.applications.put(app)), ['ns/b']);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.applications.put(updated(app, { spec: { displayName: 'App' } }))),
      [],
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.applications.remove(app)), ['ns/b']);
  });

  it('another binding of the same application and environment created or deleted wakes it (which is earlier)', async () => {
    watch.sources.bindings.put(binding('first'));
    watch.sources.bindings.put(binding('other-env', { environment: 'prod' }));
    const second = binding('second');
    // The new binding wakes itself (for) and the other binding of (app, dev).
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(second)), ['ns/first', 'ns/second']);
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.remove(second)), [
      'ns/first',
      'ns/second',
    ]);
  });

  it("the claim of its Environment (every event) and that claim's target (spec, creation, deletion) wake it", async () => {
    watch.sources.bindings.put(binding('b'));
    watch.sources.environments.put(claimedEnvironment('dev', 'c'));
    const c = claim('c');
    assert.deepEqual(await watch.wakes(() => watch.sources.claims.put(c)), ['ns/b']);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.claims.put(updated(c, { status: { phase: 'Bound' } }))),
      ['ns/b'],
    );
    const t = target('t', { claimRef: 'c' });
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(t)), ['ns/b']);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.targets.put(updated(t, { status: { phase: 'Bound' } }))),
      [],
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.remove(t)), ['ns/b']);
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(target('unclaimed'))), []);
  });
});
