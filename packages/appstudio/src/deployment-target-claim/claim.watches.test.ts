import assert from 'node:assert/strict';
import { DeploymentTargetAnnotation } from '@gitops/api';
import { describe, it } from 'vitest';
import {
  assertOwnEvents,
  claim,
  deleting,
  deploymentTargetClass,
  environment,
  target,
  updated,
  useWatches,
} from '../testing/unit.ts';
import { type ClaimWatchDeps, claimChanged, watchClaimSources } from './claim.watches.ts';

const provisioning = (name: string, className: string) =>
  claim(
    name,
    { deploymentTargetClassName: className },
    {},
    {
      annotations: { [DeploymentTargetAnnotation.DTProvisioner]: className },
    },
  );
const bindComplete = { annotations: { [DeploymentTargetAnnotation.BindComplete]: 'true' } };

describe('DeploymentTargetClaim watches: which events wake which claims', () => {
  const watch = useWatches<ClaimWatchDeps>(
    ['claims', 'targets', 'classes', 'environments'],
    { predicates: [claimChanged] },
    watchClaimSources,
  );

  it('the claim: created, its spec, annotations, finalizers, deletion and a relist wake it; a status write does not', async () => {
    await assertOwnEvents(watch, watch.sources.claims, claim('c'), {
      ownWrite: { status: { phase: 'Pending' } },
      changes: [
        (c) => updated(c, { metadata: bindComplete }),
        (c) => updated(c, { metadata: { finalizers: ['binder.appstudio.redhat.com/finalizer'] } }),
        deleting,
      ],
      removed: true,
    });
  });

  it('a target wakes the claims linked to it and the waiting claims of its namespace, not bound or named ones', async () => {
    watch.sources.claims.put(claim('referenced', { targetName: 'other' }));
    watch.sources.claims.put(claim('naming', { targetName: 't' }));
    watch.sources.claims.put(claim('waiting'));
    watch.sources.claims.put(claim('bound', {}, { phase: 'Bound' }, bindComplete));
    watch.sources.claims.put(claim('elsewhere', {}, {}, { namespace: 'other-ns' }));
    const t = target('t', { claimRef: 'referenced' });
    const expected = ['ns/naming', 'ns/referenced', 'ns/waiting'];
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.put(t)), expected);
    assert.deepEqual(
      await watch.wakes(() => watch.sources.targets.put(updated(t, { status: { phase: 'Bound' } }))),
      expected,
    );
    assert.deepEqual(await watch.wakes(() => watch.sources.targets.remove(t)), expected);
  });

  it('a class wakes only its claims that asked for provisioning', async () => {
    watch.sources.claims.put(provisioning('asked', 'sandbox'));
    watch.sources.claims.put(claim('not-asked', { deploymentTargetClassName: 'sandbox' }));
    watch.sources.claims.put(provisioning('other-class', 'other'));
    const cls = deploymentTargetClass('sandbox');
    assert.deepEqual(await watch.wakes(() => watch.sources.classes.put(cls)), ['ns/asked']);
    assert.deepEqual(await watch.wakes(() => watch.sources.classes.remove(cls)), ['ns/asked']);
  });

  it('an Environment wakes the claim it names, whether or not the claim exists; one without a claim wakes none', async () => {
    const env = environment('dev', {
      configuration: { target: { deploymentTargetClaim: { claimName: 'c' } } },
    });
    assert.deepEqual(await watch.wakes(() => watch.sources.environments.put(env)), ['ns/c']);
    assert.deepEqual(await watch.wakes(() => watch.sources.environments.remove(env)), ['ns/c']);
    assert.deepEqual(await watch.wakes(() => watch.sources.environments.put(environment('plain'))), []);
  });
});
