import assert from 'node:assert/strict';
import { AppStudioKinds } from '@gitops/api';
import type { KubeObject } from '@gitops/shared';
import { handInformer } from '@gitops/shared/testing';
import { describe, it } from 'vitest';
import type { BindingCr, ClaimCr, EnvironmentCr, TargetCr } from '../objects.ts';
import {
  application,
  binding,
  claim,
  claimedEnvironment,
  environment,
  object,
  target,
  updated,
  useWatches,
  wiredController,
} from '../testing/unit.ts';
import { bindingChanged, watchBindingSources } from './binding.watches.ts';

const Binding = AppStudioKinds.SnapshotEnvironmentBinding;
const controlledBy = (b: BindingCr, controller = true) => ({
  ownerReferences: [
    {
      apiVersion: Binding.apiVersion,
      kind: Binding.kind,
      name: b.metadata.name,
      uid: b.metadata.uid ?? '',
      controller,
    },
  ],
});

describe('SnapshotEnvironmentBinding watches: which events wake which bindings', () => {
  const watch = useWatches(
    () => ({
      bindings: handInformer<BindingCr>(),
      environments: handInformer<EnvironmentCr>(),
      deployments: handInformer<KubeObject>(),
      applications: handInformer<KubeObject>(),
      claims: handInformer<ClaimCr>(),
      targets: handInformer<TargetCr>(),
    }),
    (deps) =>
      wiredController(deps.bindings, { type: Binding, predicates: [bindingChanged] }, (b) =>
        watchBindingSources(b, deps),
      ),
  );

  it("the binding: its spec, labels, deletion, a relist and other writers' status fields wake it; its own status writes do not", async () => {
    const b = binding('b');
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(b)), ['ns/b']);
    const own = updated(b, { status: { gitopsDeployments: [{ componentName: 'web' }] } });
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(own)), []);
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(own)), ['ns/b'], 'relist');
    const components = updated(own, {
      status: {
        ...own.status,
        components: [
          {
            name: 'web',
            gitopsRepository: { url: 'u', branch: 'main', path: 'p', generatedResources: [], commitID: 'c1' },
          },
        ],
      },
    });
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(components)), ['ns/b']);
    const labelled = updated(components, { metadata: { labels: { team: 'a' } } });
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(labelled)), ['ns/b']);
    const respecced = updated(labelled, { spec: { ...labelled.spec, snapshot: 'snap-2' } });
    assert.deepEqual(await watch.wakes(() => watch.sources.bindings.put(respecced)), ['ns/b']);
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
