/**
 * The binder (DeploymentTargetClaim controller) and the reclaimer (DeploymentTarget controller) against the
 * real API server: the reference's DTC and DT unit scenarios (§8.4, §8.5) and the binder e2e suite (§8.9),
 * with the design's fixes (§6) named where they change the outcome. Classes here use a provisioner nobody
 * serves, so targets are the user's; the provisioners have their own test files.
 */
import assert from 'node:assert/strict';
import type { KubeObject } from '@gitops/shared';
import { eventually, randomSuffix } from '@gitops/shared/testing';
import { afterAll, beforeAll, describe, it } from 'vitest';
import {
  type AppStudioFixture,
  createAppStudioFixture,
  errorOf,
  Kind,
  specOf,
} from '../testing/appstudio-fixture.ts';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

const statusOf = (o: KubeObject | undefined) =>
  (o?.status ?? {}) as { phase?: string; conditions?: Condition[] };
const SUCCESS = { status: 'False', reason: 'Success', message: '' };
const annotations = (o: KubeObject | undefined) => o?.metadata.annotations ?? {};

const f: AppStudioFixture = createAppStudioFixture();
let ns: string;
/** Class names are cluster-wide: unique per run. */
const suffix = randomSuffix();
const retainClass = `test-retain-${suffix}`;
const deleteClass = `test-delete-${suffix}`;
/** Retain too, for targets left unclaimed (a claim of retainClass would auto-bind them). */
const retainClass2 = `test-retain2-${suffix}`;

const claim = (name: string, spec: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}) =>
  f.create(Kind.DeploymentTargetClaim, ns, name, {
    metadata,
    spec: { deploymentTargetClassName: retainClass, ...spec },
  });
const target = (name: string, spec: Record<string, unknown> = {}) =>
  f.create(Kind.DeploymentTarget, ns, name, {
    spec: {
      deploymentTargetClassName: retainClass,
      kubernetesCredentials: {
        defaultNamespace: 'test-ns',
        apiURL: 'https://api-url/api',
        clusterCredentialsSecret: 'test-secret',
        allowInsecureSkipTLSVerify: false,
      },
      ...spec,
    },
  });
const getClaim = (name: string) => f.get(Kind.DeploymentTargetClaim, ns, name);
const getTarget = (name: string) => f.get(Kind.DeploymentTarget, ns, name);
const phase = (what: string, read: () => Promise<KubeObject | undefined>, want: string) =>
  eventually(`${what} ${want}`, async () => {
    const o = await read();
    // A claim is Bound for the test once bind-complete is written too (the binder writes it last).
    const complete =
      want !== 'Bound' ||
      o?.kind !== 'DeploymentTargetClaim' ||
      o.metadata.annotations?.['dt.appstudio.redhat.com/bind-complete'] === 'true';
    return statusOf(o).phase === want && complete ? o : undefined;
  });
const errorCondition = (what: string, read: () => Promise<KubeObject | undefined>, message: string) =>
  eventually(`${what}: ${message}`, async () => {
    const o = await read();
    return errorOf(o)?.message === message ? o : undefined;
  });
const gone = (what: string, read: () => Promise<KubeObject | undefined>) =>
  eventually(`${what} gone`, async () => ((await read()) === undefined ? true : undefined));

beforeAll(async () => {
  ns = await f.createNamespace('appstudio-dtc');
  // A provisioner nobody serves: claims wait for targets the user creates.
  await f.createClass(retainClass, { provisioner: 'example.com/manual', reclaimPolicy: 'Retain' });
  await f.createClass(deleteClass, { provisioner: 'example.com/manual', reclaimPolicy: 'Delete' });
  await f.createClass(retainClass2, { provisioner: 'example.com/manual', reclaimPolicy: 'Retain' });
  await f.start();
});
afterAll(() => f.cleanup());

describe('DeploymentTargetClaim binder and DeploymentTarget reclaimer: binding', () => {
  it('a claim without target waits Pending with the dt-provisioner annotation (the class name); a target claiming it binds both', async () => {
    await claim('dynamic');
    await phase('claim', () => getClaim('dynamic'), 'Pending');
    const pending = await eventually('Success', async () => {
      const c = await getClaim('dynamic');
      return JSON.stringify(errorOf(c)) === JSON.stringify(SUCCESS) ? c : undefined;
    });
    assert.equal(statusOf(pending).phase, 'Pending');
    assert.equal(annotations(pending)['provisioner.appstudio.redhat.com/dt-provisioner'], retainClass);
    assert.ok(pending.metadata.finalizers?.includes('binder.appstudio.redhat.com/finalizer'));
    assert.deepEqual(errorOf(pending), SUCCESS);

    await target('dynamic-dt', { claimRef: 'dynamic' });
    const bound = await phase('claim', () => getClaim('dynamic'), 'Bound');
    assert.equal(specOf(bound).targetName, 'dynamic-dt');
    assert.equal(annotations(bound)['dt.appstudio.redhat.com/bind-complete'], 'true');
    assert.equal(annotations(bound)['dt.appstudio.redhat.com/bound-by-controller'], 'true');
    const dt = await phase('target', () => getTarget('dynamic-dt'), 'Bound');
    assert.ok(dt.metadata.finalizers?.includes('dt.appstudio.redhat.com/finalizer'));
    await eventually('Success on both', async () =>
      JSON.stringify(errorOf(await getClaim('dynamic'))) === JSON.stringify(SUCCESS) &&
      JSON.stringify(errorOf(await getTarget('dynamic-dt'))) === JSON.stringify(SUCCESS)
        ? true
        : undefined,
    );
  });

  it('a claim naming a target that does not exist yet waits Pending, then binds it (not "by controller")', async () => {
    await claim('named', { targetName: 'named-dt' });
    await phase('claim', () => getClaim('named'), 'Pending');
    await target('named-dt');
    const bound = await phase('claim', () => getClaim('named'), 'Bound');
    assert.equal(annotations(bound)['dt.appstudio.redhat.com/bind-complete'], 'true');
    assert.equal(annotations(bound)['dt.appstudio.redhat.com/bound-by-controller'], undefined);
    const dt = await phase('target', () => getTarget('named-dt'), 'Bound');
    assert.equal(specOf(dt).claimRef, 'named', 'the binder writes the claimRef, as the PV binder does');
  });

  it('auto-binding is deterministic (appstudio README promise 6): the oldest matching target wins, and it is claimed for the claim', async () => {
    const className = `test-auto-${suffix}`;
    const older = await target('auto-older', { deploymentTargetClassName: className });
    // creationTimestamp has whole seconds: the newer target is created in a later second.
    await eventually('a later second', async () =>
      new Date().toISOString().slice(0, 19) > String(older.metadata.creationTimestamp).slice(0, 19)
        ? true
        : undefined,
    );
    await target('auto-newer', { deploymentTargetClassName: className });
    await claim('auto', { deploymentTargetClassName: className });
    const bound = await phase('claim', () => getClaim('auto'), 'Bound');
    assert.equal(specOf(bound).targetName, 'auto-older');
    assert.equal(specOf(await getTarget('auto-older')).claimRef, 'auto');
    assert.equal(specOf(await getTarget('auto-newer')).claimRef, undefined);
    assert.equal(statusOf(await getTarget('auto-newer')).phase, undefined);
  });

  it('a claim naming a target claimed by another claim stays Pending with a clear condition', async () => {
    await claim('someone-else', { targetName: 'taken-dt' });
    await target('taken-dt');
    await phase('the first claim', () => getClaim('someone-else'), 'Bound');
    await claim('late', { targetName: 'taken-dt' });
    const c = await errorCondition(
      'claim',
      () => getClaim('late'),
      'DeploymentTargetClaim wants to claim a DeploymentTarget that is already claimed',
    );
    assert.equal(statusOf(c).phase, 'Pending');
    assert.equal(errorOf(c)?.status, 'True');
    assert.equal(specOf(await getTarget('taken-dt')).claimRef, 'someone-else', 'the other claim keeps it');
  });

  it('a claim naming an unclaimed target of another class gets the original’s mismatch message', async () => {
    // (A class of its own: an unclaimed target of the shared class would be auto-bound by other claims.)
    const ownClass = `test-mismatch-${suffix}`;
    await target('other-class-dt', { deploymentTargetClassName: ownClass });
    await claim('mismatch', { targetName: 'other-class-dt', deploymentTargetClassName: 'random' });
    await errorCondition(
      'claim',
      () => getClaim('mismatch'),
      `DeploymentTarget does not match the specified DeploymentTargetClaim: DeploymentTarget other-class-dt does not match DeploymentTargetClaim mismatch in namespace ${ns}: deploymentTargetClassName does not match`,
    );
  });

  it('a claim naming a target without any credentials gets the original’s message; the target is not touched', async () => {
    const ownClass = `test-nocreds-${suffix}`;
    await target('empty-dt', {
      deploymentTargetClassName: ownClass,
      kubernetesCredentials: {
        defaultNamespace: '',
        apiURL: '',
        clusterCredentialsSecret: '',
        allowInsecureSkipTLSVerify: false,
      },
    });
    await claim('wants-empty', { targetName: 'empty-dt', deploymentTargetClassName: ownClass });
    const c = await errorCondition(
      'claim',
      () => getClaim('wants-empty'),
      `DeploymentTarget does not match the specified DeploymentTargetClaim: DeploymentTarget empty-dt does not match DeploymentTargetClaim wants-empty in namespace ${ns}: DeploymentTarget does not have cluster credentials`,
    );
    assert.equal(statusOf(c).phase, 'Pending');
    const dt = await getTarget('empty-dt');
    assert.equal(specOf(dt).claimRef, undefined);
    assert.equal(dt?.metadata.deletionTimestamp, undefined);
  });

  it('a bound claim with two targets claiming it reports it and deletes nothing', async () => {
    await claim('doubly', {}, { annotations: { 'dt.appstudio.redhat.com/bind-complete': 'true' } });
    await target('doubly-a', { claimRef: 'doubly' });
    await target('doubly-b', { claimRef: 'doubly' });
    await errorCondition(
      'claim',
      () => getClaim('doubly'),
      'failed to process bound DeploymentTargetClaim: multiple DeploymentTargets found for a bounded DeploymentTargetClaim doubly',
    );
    assert.ok(await getTarget('doubly-a'));
    assert.ok(await getTarget('doubly-b'));
  });

  it('a bound claim whose provisioner annotation is stale gets the class name back; with an empty class it is removed', async () => {
    await target('stale-dt', { claimRef: 'stale' });
    await claim(
      'stale',
      { targetName: 'stale-dt' },
      {
        annotations: {
          'dt.appstudio.redhat.com/bind-complete': 'true',
          'provisioner.appstudio.redhat.com/dt-provisioner': "provisioner-doesn't-exist",
        },
      },
    );
    await eventually('annotation rewritten', async () =>
      annotations(await getClaim('stale'))['provisioner.appstudio.redhat.com/dt-provisioner'] === retainClass
        ? true
        : undefined,
    );
    await phase('claim', () => getClaim('stale'), 'Bound');

    await target('stale-empty-dt', { claimRef: 'stale-empty', deploymentTargetClassName: '' });
    await claim(
      'stale-empty',
      { targetName: 'stale-empty-dt', deploymentTargetClassName: '' },
      {
        annotations: {
          'dt.appstudio.redhat.com/bind-complete': 'true',
          'provisioner.appstudio.redhat.com/dt-provisioner': 'x',
        },
      },
    );
    await eventually('annotation removed', async () =>
      annotations(await getClaim('stale-empty'))['provisioner.appstudio.redhat.com/dt-provisioner'] ===
      undefined
        ? true
        : undefined,
    );
  });

  it('a claim without class and target waits Pending with no annotations', async () => {
    await claim('classless', { deploymentTargetClassName: '' });
    const c = await phase('claim', () => getClaim('classless'), 'Pending');
    assert.equal(annotations(c)['provisioner.appstudio.redhat.com/dt-provisioner'], undefined);
  });
});

describe('DeploymentTargetClaim binder and DeploymentTarget reclaimer: Lost, release and reclaim', () => {
  it('deleting the target of a bound claim makes the claim Lost; the claim stays', async () => {
    await claim('losing', { targetName: 'losing-dt' });
    await target('losing-dt');
    await phase('claim', () => getClaim('losing'), 'Bound');
    await f.remove(Kind.DeploymentTarget, ns, 'losing-dt');
    await gone('target', () => getTarget('losing-dt'));
    await phase('claim', () => getClaim('losing'), 'Lost');
    const lost = await errorCondition(
      'claim',
      () => getClaim('losing'),
      `failed to process bound DeploymentTargetClaim: DeploymentTarget not found for a bounded DeploymentTargetClaim losing in namespace ${ns}`,
    );
    assert.deepEqual(errorOf(lost)?.status, 'True');
    assert.equal(statusOf(lost).phase, 'Lost');
  });

  it('Retain: deleting a bound claim releases its target (phase Released, claimRef cleared) and the claim goes', async () => {
    await claim('retained');
    await target('retained-dt', { claimRef: 'retained' });
    await phase('claim', () => getClaim('retained'), 'Bound');
    await f.remove(Kind.DeploymentTargetClaim, ns, 'retained');
    await gone('claim', () => getClaim('retained'));

    const dt = await phase('target', () => getTarget('retained-dt'), 'Released');
    assert.equal(specOf(dt).claimRef, '');
    assert.equal(dt.metadata.deletionTimestamp, undefined);
    assert.ok(dt.metadata.finalizers?.includes('dt.appstudio.redhat.com/finalizer'));
  });

  it('Delete: deleting a bound claim deletes its target, and the claim goes only after it (appstudio README promise 6)', async () => {
    await claim('deleted', { deploymentTargetClassName: deleteClass });
    // Another finalizer holds the target, so the claim's wait can be seen.
    await f.create(Kind.DeploymentTarget, ns, 'deleted-dt', {
      metadata: { finalizers: ['example.com/hold'] },
      spec: {
        deploymentTargetClassName: deleteClass,
        claimRef: 'deleted',
        kubernetesCredentials: {
          defaultNamespace: 'x',
          apiURL: 'https://api-url/api',
          clusterCredentialsSecret: 's',
          allowInsecureSkipTLSVerify: false,
        },
      },
    });
    await phase('claim', () => getClaim('deleted'), 'Bound');
    await f.remove(Kind.DeploymentTargetClaim, ns, 'deleted');
    await eventually('the target being deleted', async () =>
      (await getTarget('deleted-dt'))?.metadata.deletionTimestamp ? true : undefined,
    );
    const waiting = await errorCondition(
      'claim',
      () => getClaim('deleted'),
      'waiting for DeploymentTarget deleted-dt to be deprovisioned (reclaim policy Delete)',
    );
    assert.ok(waiting.metadata.deletionTimestamp);
    // Our reclaimer has let go already (no provisioner of ours); the other finalizer goes too.
    await f.patch(Kind.DeploymentTarget, ns, 'deleted-dt', { metadata: { finalizers: null } });
    await gone('target', () => getTarget('deleted-dt'));
    await gone('claim', () => getClaim('deleted'));
  });

  it('a claim an Environment names is not released until the Environment lets go (appstudio README promise 6, in-use protection)', async () => {
    await claim('in-use');
    await target('in-use-dt', { claimRef: 'in-use' });
    await phase('claim', () => getClaim('in-use'), 'Bound');
    await phase('target', () => getTarget('in-use-dt'), 'Bound');
    await f.create(Kind.Environment, ns, 'uses-claim', {
      spec: {
        displayName: '',
        deploymentStrategy: 'Manual',
        configuration: { target: { deploymentTargetClaim: { claimName: 'in-use' } } },
      },
    });
    // The protection reads the controllers' Environment cache: delete once the Environment is in it (its
    // controller has answered it with a ManagedEnvironment or a condition).
    await eventually('the Environment seen by the controllers', async () =>
      (await f.get(Kind.GitOpsDeploymentManagedEnvironment, ns, 'managed-environment-uses-claim')) ||
      (statusOf(await f.get(Kind.Environment, ns, 'uses-claim')).conditions ?? []).length > 0
        ? true
        : undefined,
    );
    await f.remove(Kind.DeploymentTargetClaim, ns, 'in-use');
    const held = await errorCondition(
      'claim',
      () => getClaim('in-use'),
      'DeploymentTargetClaim is in use by Environment uses-claim: it is released once no Environment names it',
    );
    assert.equal(statusOf(held).phase, 'Bound');
    assert.equal(statusOf(await getTarget('in-use-dt')).phase, 'Bound');
    await f.remove(Kind.Environment, ns, 'uses-claim');
    await gone('claim', () => getClaim('in-use'));
    await phase('target', () => getTarget('in-use-dt'), 'Released');
  });

  it('an unbound claim just goes when deleted', async () => {
    await claim('unbound', { deploymentTargetClassName: '' });
    await phase('claim', () => getClaim('unbound'), 'Pending');
    await f.remove(Kind.DeploymentTargetClaim, ns, 'unbound');
    await gone('claim', () => getClaim('unbound'));
  });

  it('the reclaimer: a finalizer on every target; under Retain a claimRef to a claim that is gone is cleared', async () => {
    await target('orphan-dt', { claimRef: 'never-existed', deploymentTargetClassName: retainClass2 });
    await eventually('claimRef cleared', async () => {
      const dt = await getTarget('orphan-dt');
      return specOf(dt).claimRef === '' &&
        dt?.metadata.finalizers?.includes('dt.appstudio.redhat.com/finalizer')
        ? true
        : undefined;
    });
  });

  it('a target whose class does not exist reports Success and is not stuck on delete (the original’s §9.23 defect)', async () => {
    await target('classless-dt', { deploymentTargetClassName: `no-such-class-${suffix}` });
    await eventually('finalizer and Success', async () => {
      const dt = await getTarget('classless-dt');
      return dt?.metadata.finalizers?.includes('dt.appstudio.redhat.com/finalizer') &&
        JSON.stringify(errorOf(dt)) === JSON.stringify(SUCCESS)
        ? true
        : undefined;
    });
    await f.remove(Kind.DeploymentTarget, ns, 'classless-dt');
    await gone('target', () => getTarget('classless-dt'));
  });
});
