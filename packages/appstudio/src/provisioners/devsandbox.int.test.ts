/**
 * The appstudio.redhat.com/devsandbox provisioner against the real API server: the reference's
 * SpaceRequest-provisioner unit scenarios (§8.6), the DT/DTC/DTClass lifecycle e2e suite (§8.10) and the
 * sandbox-provisioner e2e suite (§8.11). The test plays the Dev Sandbox host operator: it fills a
 * SpaceRequest's status, adds and removes the host operator's finalizer. Design §6 changes one outcome: with
 * reclaim policy Delete the claim goes only after its target (named in the test).
 */
import assert from 'node:assert/strict';
import { SecretType } from '@gitops/api';
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

const HOST_FINALIZER = 'finalizer.toolchain.dev.openshift.com';
const statusOf = (o: KubeObject | undefined) =>
  (o?.status ?? {}) as {
    phase?: string;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };

const f: AppStudioFixture = createAppStudioFixture();
let ns: string;
let clockOffsetMs = 0;
const suffix = randomSuffix();
const deleteClass = `test-isolation-delete-${suffix}`;
const retainClass = `test-isolation-retain-${suffix}`;
const otherClass = `test-non-sandbox-${suffix}`;
/** The provisioner of the classes under test. */
const provisioner = 'appstudio.redhat.com/devsandbox';

const spaceRequestsOf = async (claim: string) =>
  (await f.list(Kind.SpaceRequest, ns)).filter(
    (sr) => sr.metadata.labels?.['appstudio.openshift.io/dtc'] === claim,
  );
const getClaim = (name: string) => f.get(Kind.DeploymentTargetClaim, ns, name);
const getTarget = (name: string) => f.get(Kind.DeploymentTarget, ns, name);
const getSpaceRequest = (name: string) => f.get(Kind.SpaceRequest, ns, name);
const gone = (what: string, read: () => Promise<KubeObject | undefined>) =>
  eventually(`${what} gone`, async () => ((await read()) === undefined ? true : undefined));

/** The host operator: finalizer, a namespace and a Secret, then Ready with one namespaceAccess entry. */
async function hostOperatorProvisions(sr: KubeObject, namespace: string, secret: string): Promise<void> {
  await f.patch(Kind.SpaceRequest, ns, sr.metadata.name, { metadata: { finalizers: [HOST_FINALIZER] } });
  await f.create(Kind.Secret, ns, secret, {
    type: 'Opaque',
    stringData: { kubeconfig: `kubeconfig-of-${namespace}` },
  });
  await f.patch(
    Kind.SpaceRequest,
    ns,
    sr.metadata.name,
    {
      status: {
        targetClusterURL: 'https://fake-client-api',
        namespaceAccess: [{ name: namespace, secretRef: secret }],
        conditions: [{ type: 'Ready', status: 'True', reason: 'Provisioned', message: '' }],
      },
    },
    'status',
  );
}
const setReadyReason = (sr: string, status: string, reason: string) =>
  f.patch(
    Kind.SpaceRequest,
    ns,
    sr,
    { status: { conditions: [{ type: 'Ready', status, reason, message: '' }] } },
    'status',
  );

/** §8.10's shared sequence: class → claim → Environment → SpaceRequest Ready → target → bound → ManagedEnvironment. */
async function provisioned(claim: string, className: string, env: string) {
  await f.create(Kind.DeploymentTargetClaim, ns, claim, { spec: { deploymentTargetClassName: className } });
  await f.create(Kind.Environment, ns, env, {
    spec: {
      displayName: '',
      deploymentStrategy: 'AppStudioAutomated',
      configuration: { target: { deploymentTargetClaim: { claimName: claim } } },
    },
  });
  const pending = await eventually('claim Pending with the annotation', async () => {
    const c = await getClaim(claim);
    return statusOf(c).phase === 'Pending' &&
      c?.metadata.annotations?.['provisioner.appstudio.redhat.com/dt-provisioner'] === className
      ? c
      : undefined;
  });
  assert.ok(pending);
  const [sr] = await eventually('one SpaceRequest', async () => {
    const list = await spaceRequestsOf(claim);
    return list.length > 0 ? list : undefined;
  });
  assert.ok(sr);
  assert.ok(sr.metadata.name.startsWith(`${claim}-`));
  assert.equal(specOf(sr).tierName, 'appstudio-env');
  await hostOperatorProvisions(sr, `${claim}-space`, `${claim}-space-secret`);

  // Bound (the binder) and the finalizer (the reclaimer) are two controllers' writes, in either order.
  const target = await eventually('the provisioned target Bound, with the reclaimer finalizer', async () => {
    const t = await getTarget(`${claim}-dt`);
    return statusOf(t).phase === 'Bound' &&
      t?.metadata.finalizers?.includes('dt.appstudio.redhat.com/finalizer')
      ? t
      : undefined;
  });
  assert.equal(
    target.metadata.annotations?.['provisioner.appstudio.redhat.com/provisioned-by'],
    'appstudio.redhat.com/devsandbox',
  );
  assert.equal(target.metadata.labels?.['provisioner.appstudio.redhat.com/dt-provisioner'], className);
  assert.deepEqual(specOf(target), {
    deploymentTargetClassName: className,
    claimRef: claim,
    kubernetesCredentials: {
      defaultNamespace: `${claim}-space`,
      apiURL: 'https://fake-client-api',
      clusterCredentialsSecret: `${claim}-space-secret`,
      allowInsecureSkipTLSVerify: false,
    },
  });
  const bound = await eventually('claim Bound', async () => {
    const c = await getClaim(claim);
    return statusOf(c).phase === 'Bound' &&
      errorOf(c)?.reason === 'Success' &&
      c?.metadata.annotations?.['dt.appstudio.redhat.com/bind-complete'] === 'true'
      ? c
      : undefined;
  });
  assert.equal(specOf(bound).targetName, `${claim}-dt`);
  assert.equal(bound.metadata.annotations?.['dt.appstudio.redhat.com/bind-complete'], 'true');
  assert.equal(bound.metadata.annotations?.['dt.appstudio.redhat.com/bound-by-controller'], 'true');
  await eventually('SpaceRequest labelled with the target', async () =>
    (await getSpaceRequest(sr.metadata.name))?.metadata.labels?.['appstudio.openshift.io/dt'] ===
    `${claim}-dt`
      ? true
      : undefined,
  );
  // The Environment: its ManagedEnvironment uses a managed-environment copy of the Opaque Secret.
  const me = await eventually('the ManagedEnvironment', () =>
    f.get(Kind.GitOpsDeploymentManagedEnvironment, ns, `managed-environment-${env}`),
  );
  assert.deepEqual(specOf(me), {
    apiURL: 'https://fake-client-api',
    credentialsSecret: `managed-environment-secret-${env}`,
    allowInsecureSkipTLSVerify: false,
    namespaces: [`${claim}-space`],
    clusterResources: false,
  });
  const copy = await f.get(Kind.Secret, ns, `managed-environment-secret-${env}`);
  assert.equal(copy?.type, SecretType.ManagedEnvironment);
  assert.equal(
    Buffer.from(String((copy?.data as Record<string, string> | undefined)?.kubeconfig), 'base64').toString(),
    `kubeconfig-of-${claim}-space`,
  );
  assert.equal(copy?.metadata.labels?.['appstudio.openshift.io/environment-secret'], env);
  return { sr: sr.metadata.name, target: `${claim}-dt` };
}

beforeAll(async () => {
  ns = await f.createNamespace('appstudio-sandbox');
  await f.createClass(deleteClass, { provisioner, reclaimPolicy: 'Delete' });
  await f.createClass(retainClass, { provisioner, reclaimPolicy: 'Retain' });
  await f.createClass(otherClass, { provisioner: 'non-sandbox', reclaimPolicy: 'Delete' });
  await f.start({ now: () => new Date(Date.now() + clockOffsetMs) });
});
afterAll(() => f.cleanup());

describe('devsandbox provisioner (the test plays the Dev Sandbox host operator): reclaim', () => {
  it('Delete: deleting the Environment then the claim deprovisions the SpaceRequest; target and then claim go once the host operator is done (appstudio README promise 6)', async () => {
    const { sr, target } = await provisioned('staging-dtc', deleteClass, 'my-env');
    await f.remove(Kind.Environment, ns, 'my-env');
    await gone('the ManagedEnvironment', () =>
      f.get(Kind.GitOpsDeploymentManagedEnvironment, ns, 'managed-environment-my-env'),
    );
    await f.remove(Kind.DeploymentTargetClaim, ns, 'staging-dtc');
    await eventually('target and SpaceRequest being deleted', async () =>
      (await getTarget(target))?.metadata.deletionTimestamp &&
      (await getSpaceRequest(sr))?.metadata.deletionTimestamp
        ? true
        : undefined,
    );
    await setReadyReason(sr, 'False', 'Terminating');
    // While the host operator terminates the space, everything waits, the claim too (the original let it go).
    const waiting = await eventually('the claim waiting for its target', async () => {
      const c = await getClaim('staging-dtc');
      return errorOf(c)?.message ===
        `waiting for DeploymentTarget ${target} to be deprovisioned (reclaim policy Delete)`
        ? c
        : undefined;
    });
    assert.ok(waiting.metadata.deletionTimestamp);
    assert.ok(await getTarget(target));
    assert.ok(await getSpaceRequest(sr));
    await f.patch(Kind.SpaceRequest, ns, sr, { metadata: { finalizers: null } });
    await gone('SpaceRequest', () => getSpaceRequest(sr));
    await gone('target', () => getTarget(target));
    await gone('claim', () => getClaim('staging-dtc'));
  });

  it('Retain: deleting the claim keeps target and SpaceRequest; the target is Released with no claimRef', async () => {
    const { sr, target } = await provisioned('retain-dtc', retainClass, 'retain-env');
    await f.remove(Kind.Environment, ns, 'retain-env');
    await f.remove(Kind.DeploymentTargetClaim, ns, 'retain-dtc');
    await gone('claim', () => getClaim('retain-dtc'));
    const released = await eventually('target Released', async () => {
      const t = await getTarget(target);
      return statusOf(t).phase === 'Released' ? t : undefined;
    });
    assert.equal(specOf(released).claimRef, '');
    assert.equal(released.metadata.deletionTimestamp, undefined);
    assert.equal((await getSpaceRequest(sr))?.metadata.deletionTimestamp, undefined);
  });

  it('Delete with a termination that fails: the target is Failed after 2 minutes; once the SpaceRequest goes, target and claim go', async () => {
    const { sr, target } = await provisioned('failing-dtc', deleteClass, 'failing-env');
    await f.remove(Kind.Environment, ns, 'failing-env');
    await f.remove(Kind.DeploymentTargetClaim, ns, 'failing-dtc');
    await eventually('SpaceRequest being deleted', async () =>
      (await getSpaceRequest(sr))?.metadata.deletionTimestamp ? true : undefined,
    );
    await setReadyReason(sr, 'False', 'Terminating');
    // The controllers' clock moves 3 minutes on; the host operator gives up.
    clockOffsetMs = 3 * 60_000;
    await setReadyReason(sr, 'False', 'UnableToTerminate');
    await eventually('target Failed', async () =>
      statusOf(await getTarget(target)).phase === 'Failed' ? true : undefined,
    );
    assert.ok(await getClaim('failing-dtc'), 'the claim waits for its target');
    clockOffsetMs = 0;
    await f.patch(Kind.SpaceRequest, ns, sr, { metadata: { finalizers: null } });
    await gone('SpaceRequest', () => getSpaceRequest(sr));
    await gone('target', () => getTarget(target));
    await gone('claim', () => getClaim('failing-dtc'));
  });

  it('a provisioned target deleted by hand (finalizer stripped) leaves its claim Lost, not deleted', async () => {
    const { target } = await provisioned('stripped-dtc', deleteClass, 'stripped-env');
    // Deleted, then its finalizer stripped (before the delete, the reclaimer would put it back).
    await f.remove(Kind.DeploymentTarget, ns, target);
    await f.patch(Kind.DeploymentTarget, ns, target, { metadata: { finalizers: null } });
    await gone('target', () => getTarget(target));
    await eventually('claim Lost', async () =>
      statusOf(await getClaim('stripped-dtc')).phase === 'Lost' ? true : undefined,
    );
  });
});

describe('devsandbox provisioner (the test plays the Dev Sandbox host operator): provisioning', () => {
  it('a claim naming a class that does not exist gets the original’s condition, and provisions once the class appears', async () => {
    const missing = `abc-${suffix}`;
    await f.create(Kind.DeploymentTargetClaim, ns, 'no-class-dtc', {
      spec: { deploymentTargetClassName: missing },
    });
    await eventually('the condition', async () =>
      errorOf(await getClaim('no-class-dtc'))?.message ===
      `unable to handle provisioning of SpaceRequest: DeploymentTargetClaim no-class-dtc does not have a matching DeploymentTargetClass ${missing}: the resource could not be found on the cluster`
        ? true
        : undefined,
    );
    assert.deepEqual(await spaceRequestsOf('no-class-dtc'), []);
    await f.createClass(missing, { provisioner, reclaimPolicy: 'Delete' });
    await eventually('a SpaceRequest', async () =>
      (await spaceRequestsOf('no-class-dtc')).length === 1 ? true : undefined,
    );
  });

  it('exactly one SpaceRequest per claim, also with another claim’s SpaceRequest around; none for another provisioner', async () => {
    await f.create(Kind.DeploymentTargetClaim, ns, 'new-sandbox-dtc', {
      spec: { deploymentTargetClassName: retainClass },
    });
    await f.create(Kind.DeploymentTargetClaim, ns, 'new-non-sandbox-dtc', {
      spec: { deploymentTargetClassName: otherClass },
    });
    await eventually('one SpaceRequest', async () =>
      (await spaceRequestsOf('new-sandbox-dtc')).length === 1 ? true : undefined,
    );
    await eventually('the other claim annotated', async () =>
      (await getClaim('new-non-sandbox-dtc'))?.metadata.annotations?.[
        'provisioner.appstudio.redhat.com/dt-provisioner'
      ] === otherClass
        ? true
        : undefined,
    );
    // A later event on the claim does not make a second one.
    const touched = await f.patch(Kind.DeploymentTargetClaim, ns, 'new-sandbox-dtc', {
      metadata: { labels: { touched: 'yes' } },
    });
    await eventually('claim reconciled again', async () =>
      errorOf(await getClaim('new-sandbox-dtc')) ? true : undefined,
    );
    // Counted once the controllers have seen the touched claim and finished with it.
    await f.settledAfter(touched);
    assert.equal((await spaceRequestsOf('new-sandbox-dtc')).length, 1);
    assert.deepEqual(await spaceRequestsOf('new-non-sandbox-dtc'), []);
  });

  it('a Ready SpaceRequest makes exactly one target for its claim; one labelled for a claim that does not exist makes none', async () => {
    await f.create(Kind.DeploymentTargetClaim, ns, 'existing-dt-dtc', {
      spec: { deploymentTargetClassName: `test-sandbox-class-${suffix}` },
    });
    // The claim already has a target (the user's): the SpaceRequest must not add a second one.
    await f.create(Kind.DeploymentTarget, ns, 'users-dt', {
      spec: {
        deploymentTargetClassName: `test-sandbox-class-${suffix}`,
        claimRef: 'existing-dt-dtc',
        kubernetesCredentials: {
          defaultNamespace: 'x',
          apiURL: 'https://x',
          clusterCredentialsSecret: 's',
          allowInsecureSkipTLSVerify: false,
        },
      },
    });
    const sr = await f.create(Kind.SpaceRequest, ns, 'existing-dt-sr', {
      metadata: { labels: { 'appstudio.openshift.io/dtc': 'existing-dt-dtc' } },
      spec: { tierName: 'appstudio-env', targetClusterRoles: [] },
    });
    await hostOperatorProvisions(sr, 'existing-space', 'existing-space-secret');
    await eventually('SpaceRequest labelled with the user’s target', async () =>
      (await getSpaceRequest('existing-dt-sr'))?.metadata.labels?.['appstudio.openshift.io/dt'] === 'users-dt'
        ? true
        : undefined,
    );
    const claiming = (await f.list(Kind.DeploymentTarget, ns)).filter(
      (t) => specOf(t).claimRef === 'existing-dt-dtc',
    );
    assert.deepEqual(
      claiming.map((t) => t.metadata.name),
      ['users-dt'],
    );

    const wrong = await f.create(Kind.SpaceRequest, ns, 'wrong-sr', {
      metadata: {
        labels: { 'appstudio.openshift.io/dtc': 'wrongvalue' },
        annotations: { 'appstudio.openshift.io/dtclass': retainClass },
      },
      spec: { tierName: 'appstudio-env', targetClusterRoles: [] },
    });
    await hostOperatorProvisions(wrong, 'wrong-space', 'wrong-space-secret');
    // Retain: an orphan SpaceRequest is kept, and no target appears for it.
    const touched = await f.patch(Kind.SpaceRequest, ns, 'wrong-sr', {
      metadata: { labels: { touched: 'yes' } },
    });
    // Once the controllers have seen the event and finished with it.
    await f.settledAfter(touched);
    await eventually('the SpaceRequest still there after its event', async () =>
      (await getSpaceRequest('wrong-sr'))?.metadata.labels?.touched === 'yes' ? true : undefined,
    );
    assert.deepEqual(
      (await f.list(Kind.DeploymentTarget, ns)).filter((t) => specOf(t).claimRef === 'wrongvalue'),
      [],
    );
  });

  it('a SpaceRequest whose claim is gone is deleted when its class says Delete', async () => {
    await f.create(Kind.SpaceRequest, ns, 'orphan-sr', {
      metadata: {
        labels: { 'appstudio.openshift.io/dtc': 'gone-dtc' },
        annotations: { 'appstudio.openshift.io/dtclass': deleteClass },
      },
      spec: { tierName: 'appstudio-env', targetClusterRoles: [] },
    });
    await gone('orphan SpaceRequest', () => getSpaceRequest('orphan-sr'));
  });

  it('a SpaceRequest without the claim label is left alone', async () => {
    await f.create(Kind.SpaceRequest, ns, 'unlabelled-sr', { spec: { tierName: 'appstudio-env' } });
    const touched = await f.patch(Kind.SpaceRequest, ns, 'unlabelled-sr', {
      metadata: { labels: { touched: 'yes' } },
    });
    // Once the controllers have seen the event and finished with it.
    await f.settledAfter(touched);
    const sr = await eventually('the SpaceRequest', () => getSpaceRequest('unlabelled-sr'));
    assert.equal(sr.metadata.deletionTimestamp, undefined);
    assert.deepEqual(sr.metadata.finalizers ?? [], []);
  });
});
